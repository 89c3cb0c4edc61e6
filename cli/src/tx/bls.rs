//! `gonkad tx bls`: register or rotate a participant's BLS key.

use std::path::PathBuf;

use anyhow::Result;
use gonka_client::bls::{load_or_create_key, msg_register_bls_key};

use super::{sign_broadcast_print, TxOptions};
use crate::{keys::load_key, Global};

/// `gonkad tx bls` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Register (or rotate) the participant's BLS key with its proof of possession.
    RegisterKey(RegisterKeyArgs),
}

/// Arguments of `gonkad tx bls register-key`.
#[derive(clap::Args)]
pub struct RegisterKeyArgs {
    /// Name of the participant's operator key in the keyring.
    from: String,
    /// File holding the BLS secret key (hex); created with a fresh random key if missing
    /// [default: <home>/bls/<from>.key]. Keep it: a validator's shares of every group key
    /// are tied to it.
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    #[command(flatten)]
    tx: TxOptions,
}

/// Runs a `gonkad tx bls` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    match command {
        Command::RegisterKey(args) => {
            let home = global.home();
            let key = load_key(global, &args.from)?;
            let path = args
                .key_file
                .unwrap_or_else(|| home.join("bls").join(format!("{}.key", args.from)));
            let bls = load_or_create_key(&path, &key)?;
            let chain_id = match &global.chain_id {
                Some(id) => id.clone(),
                None => global.client()?.chain_id().await?,
            };
            eprintln!(
                "BLS public key {} (secret in {})",
                hex::encode(bls.public_key().to_bytes()),
                path.display()
            );
            let msg = msg_register_bls_key(key.address(), &chain_id, &bls);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
    }
}
