//! `gonkad tx inference`: register, update and remove ML nodes; register transfer agents.

use anyhow::{bail, Result};
use gonka_client::{
    msg_register_node, msg_register_transfer_agent, msg_remove_node, msg_update_node,
    node_key_proof, NodeSpec,
};

use super::{sign_broadcast_print, TxOptions};
use crate::{keys::load_key, Global};

/// `gonkad tx inference` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Register an ML node hosted by a staked participant.
    RegisterNode(NodeArgs),
    /// Replace every field of a registered node (except its id).
    UpdateNode(NodeArgs),
    /// Remove a registered node; its stored work records stay.
    RemoveNode(RemoveNodeArgs),
    /// Register (or update) a staked participant as a transfer agent.
    RegisterTransferAgent(TransferAgentArgs),
}

/// Arguments of `gonkad tx inference register-node` and `update-node`.
#[derive(clap::Args)]
pub struct NodeArgs {
    /// Name of the host's operator key in the keyring (a staked participant).
    from: String,
    /// Globally unique node id: 1 to 64 of [A-Za-z0-9._-].
    #[arg(long)]
    id: String,
    /// Model id served (repeat for several); each must be priced by the chain.
    #[arg(long = "model", value_name = "MODEL", required = true)]
    models: Vec<String>,
    /// VRAM of the node in MiB.
    #[arg(long)]
    vram_mib: u64,
    /// Bandwidth of the node in Mbit/s.
    #[arg(long)]
    bandwidth_mbps: u64,
    /// Most requests the node serves at once (at least 1).
    #[arg(long)]
    max_concurrency: u64,
    /// http:// or https:// URL transfer agents reach the node at.
    #[arg(long)]
    endpoint: String,
    /// The ML node's response key file (hex of the 32-byte secret, as `gonka-sidecar ml-node
    /// --response-key-file` keeps it): its public key is registered and its signature proves
    /// the host holds it.
    #[arg(long, value_name = "PATH")]
    response_key_file: std::path::PathBuf,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx inference remove-node`.
#[derive(clap::Args)]
pub struct RemoveNodeArgs {
    /// Name of the host's operator key in the keyring.
    from: String,
    /// Id of the node to remove.
    id: String,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx inference register-transfer-agent`.
#[derive(clap::Args)]
pub struct TransferAgentArgs {
    /// Name of the transfer agent's key in the keyring (a staked participant).
    from: String,
    /// Public URL of the transfer agent's OpenAI-compatible endpoint.
    #[arg(long)]
    url: String,
    /// Hex of a compressed (33-byte) secp256k1 public key; the FROM key's own when omitted.
    #[arg(long, value_parser = parse_pubkey_arg)]
    pubkey: Option<PubKey>,
    #[command(flatten)]
    tx: TxOptions,
}

/// A parsed `--pubkey` (a newtype so clap does not take `Vec<u8>` as a list of bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PubKey(Vec<u8>);

fn parse_pubkey_arg(text: &str) -> Result<PubKey> {
    parse_pubkey_hex(text).map(PubKey)
}

/// Parses the hex (optionally `0x`-prefixed) of a compressed SEC1 secp256k1 public key:
/// 33 bytes starting with 02 or 03.
pub fn parse_pubkey_hex(text: &str) -> Result<Vec<u8>> {
    let bytes = super::parse_fixed_hex(text, 33, "a compressed secp256k1 public key")?;
    if !matches!(bytes[0], 0x02 | 0x03) {
        bail!(
            "public key starts with {:02x}; a compressed secp256k1 public key starts with 02 or 03",
            bytes[0]
        );
    }
    Ok(bytes)
}

impl NodeArgs {
    /// The node `host` declares, with its key's proof of possession on the chain.
    async fn spec(&self, global: &Global, host: &str) -> Result<NodeSpec> {
        let node_key = gonka_client::keys::read_secret_key_file(&self.response_key_file)?;
        let chain_id = match &global.chain_id {
            Some(id) => id.clone(),
            None => global.client()?.chain_id().await?,
        };
        Ok(NodeSpec {
            node_id: self.id.clone(),
            models: self.models.clone(),
            vram_mib: self.vram_mib,
            bandwidth_mbps: self.bandwidth_mbps,
            max_concurrency: self.max_concurrency,
            endpoint: self.endpoint.clone(),
            pubkey: node_key
                .verifying_key()
                .to_encoded_point(true)
                .as_bytes()
                .to_vec(),
            key_proof: node_key_proof(&node_key, &chain_id, host, &self.id),
        })
    }
}

/// Runs a `gonkad tx inference` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    let (key, msg, tx) = match command {
        Command::RegisterNode(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_register_node(key.address(), &args.spec(global, key.address()).await?);
            (key, msg, args.tx)
        }
        Command::UpdateNode(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_update_node(key.address(), &args.spec(global, key.address()).await?);
            (key, msg, args.tx)
        }
        Command::RemoveNode(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_remove_node(key.address(), &args.id);
            (key, msg, args.tx)
        }
        Command::RegisterTransferAgent(args) => {
            let key = load_key(global, &args.from)?;
            let pubkey = args
                .pubkey
                .map(|p| p.0)
                .unwrap_or_else(|| key.public_key().to_bytes());
            let msg = msg_register_transfer_agent(key.address(), &args.url, &pubkey);
            (key, msg, args.tx)
        }
    };
    sign_broadcast_print(global, &key, vec![msg], &tx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compressed_pubkey_hex() {
        let hex33 = format!("02{}", "ab".repeat(32));
        let key = parse_pubkey_hex(&hex33).unwrap();
        assert_eq!(key.len(), 33);
        assert_eq!((key[0], key[32]), (0x02, 0xab));
        assert_eq!(parse_pubkey_hex(&format!("0x{hex33}")).unwrap(), key);
        assert_eq!(parse_pubkey_hex(&hex33.to_uppercase()).unwrap(), key);

        let short = parse_pubkey_hex("02abcd").unwrap_err().to_string();
        assert!(short.contains("3 bytes"), "{short}");
        let odd = parse_pubkey_hex(&format!("04{}", "ab".repeat(32)));
        assert!(odd.unwrap_err().to_string().contains("02 or 03"));
        let uncompressed = parse_pubkey_hex(&format!("04{}", "ab".repeat(64)));
        assert!(uncompressed.unwrap_err().to_string().contains("65 bytes"));
        assert!(parse_pubkey_hex("zz")
            .unwrap_err()
            .to_string()
            .contains("not hex"));
        assert!(parse_pubkey_hex("").is_err());
    }
}
