//! `gonkad tx disputes`: submit a validation, open a user dispute, vote on a dispute.

use anyhow::{bail, Context, Result};
use gonka_client::chat::served_leaf;
use gonka_client::disputes::{
    msg_open_dispute, msg_submit_validation, msg_vote_dispute, ReExecution,
};
use gonka_client::rpc::QueryError;
use gonka_client::settlement::{msg_dispute_leaf, proven_leaf};
use gonka_client::Any;
use gonka_inference::InferenceError;
use gonka_proto::query as q;
use gonka_proto::settlement::{QueryBatchRequest, ServedLeaf};
use gonka_sdk::ErrorCode;

use super::settlement::LEAF_TIMEOUT;
use super::{sign_broadcast_print, TxOptions};
use crate::{amount::parse_ngnk, keys::load_key, Global};

/// `gonkad tx disputes` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// As the assigned validator, commit your result of a sampled work record (the chain
    /// compares it once the record's transfer agent reveals the output).
    Validate(ValidateArgs),
    /// As the requester of an answer, dispute it with a deposit: its committee re-executes
    /// it; a wrong answer slashes its host and returns the deposit, a right one pays the
    /// deposit to the host.
    Open(OpenArgs),
    /// As a committee member, commit your result as your vote on a dispute.
    Vote(VoteArgs),
}

/// Arguments of `gonkad tx disputes validate`.
#[derive(clap::Args)]
pub struct ValidateArgs {
    /// Name of the validator's operator key in the keyring.
    from: String,
    /// Inference id of the sampled record (64 lowercase hex digits).
    inference_id: String,
    /// Hex of the SHA-256 of your own answer text (64 hex digits).
    #[arg(value_parser = parse_hash_arg)]
    result_hash: Hash,
    /// Prompt tokens your re-execution counted.
    #[arg(long)]
    prompt_tokens: u64,
    /// Completion tokens your re-execution counted.
    #[arg(long)]
    completion_tokens: u64,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx disputes open`.
#[derive(clap::Args)]
#[command(after_help = "\
An answer that is on chain as a work record (it was sampled for validation, or its leaf was \
demanded) is disputed with MsgOpenDispute. Any other answer is disputed with its leaf: the \
command asks the transfer agents (--ta, else those registered on chain) for the leaf and \
proof of the inference (GET /v1/leaves/{inference_id}), checks the proof against the batch \
root on chain and sends MsgDisputeLeaf. A leaf is served once its batch is on chain (a few \
blocks after the answer) and disputable for x/disputes' dispute_window_blocks after that.

Example:
  gonkad tx disputes open alice 3f0c...e1 1gnk")]
pub struct OpenArgs {
    /// Name of the requester's key in the keyring.
    from: String,
    /// Inference id of the disputed answer (`gonkad chat` prints it).
    inference_id: String,
    /// Deposit (at least the chain's min_deposit): 1500ngnk, 2.5gnk or a bare number of ngnk.
    deposit: String,
    /// Transfer agent base URL to ask for the answer's leaf; repeat to ask several. Without
    /// it, the transfer agents registered on chain are asked.
    #[arg(long = "ta", value_name = "URL")]
    transfer_agents: Vec<String>,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx disputes vote`.
#[derive(clap::Args)]
pub struct VoteArgs {
    /// Name of the committee member's operator key in the keyring.
    from: String,
    /// Dispute id.
    dispute_id: u64,
    /// Hex of the SHA-256 of your own answer text (64 hex digits).
    #[arg(value_parser = parse_hash_arg)]
    result_hash: Hash,
    /// Prompt tokens your re-execution counted.
    #[arg(long)]
    prompt_tokens: u64,
    /// Completion tokens your re-execution counted.
    #[arg(long)]
    completion_tokens: u64,
    #[command(flatten)]
    tx: TxOptions,
}

/// A parsed 32-byte hash argument (a newtype so clap does not take `Vec<u8>` as a list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hash(Vec<u8>);

fn parse_hash_arg(text: &str) -> Result<Hash> {
    parse_hash_hex(text).map(Hash)
}

/// Parses the hex (optionally `0x`-prefixed) of a 32-byte SHA-256 hash.
pub fn parse_hash_hex(text: &str) -> Result<Vec<u8>> {
    super::parse_fixed_hex(text, 32, "a SHA-256 hash")
}

/// The result of a re-execution as the arguments give it.
fn re_execution(hash: &Hash, prompt_tokens: u64, completion_tokens: u64) -> ReExecution {
    let mut result_hash = [0u8; 32];
    result_hash.copy_from_slice(&hash.0); // parse_hash_hex checked the length
    ReExecution {
        result_hash,
        prompt_tokens,
        completion_tokens,
    }
}

/// Runs a `gonkad tx disputes` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    let (key, msg, tx) = match command {
        Command::Validate(args) => {
            let key = load_key(global, &args.from)?;
            let found = re_execution(
                &args.result_hash,
                args.prompt_tokens,
                args.completion_tokens,
            );
            let msg = msg_submit_validation(key.address(), &args.inference_id, &found);
            (key, msg, args.tx)
        }
        Command::Open(args) => {
            let key = load_key(global, &args.from)?;
            let deposit = parse_ngnk(&args.deposit)?;
            let msg = dispute(global, key.address(), &args, deposit).await?;
            (key, msg, args.tx)
        }
        Command::Vote(args) => {
            let key = load_key(global, &args.from)?;
            let found = re_execution(
                &args.result_hash,
                args.prompt_tokens,
                args.completion_tokens,
            );
            let msg = msg_vote_dispute(key.address(), args.dispute_id, &found);
            (key, msg, args.tx)
        }
    };
    sign_broadcast_print(global, &key, vec![msg], &tx).await
}

/// The message that disputes `args.inference_id` for `requester`: MsgOpenDispute for a
/// record on chain, else MsgDisputeLeaf with the leaf its transfer agent serves.
async fn dispute(global: &Global, requester: &str, args: &OpenArgs, deposit: u128) -> Result<Any> {
    let id = &args.inference_id;
    let rpc = global.client()?;
    let request = gonka_proto::inference::QueryRecordRequest {
        inference_id: id.clone(),
    };
    match rpc.query::<q::inference::Record>(&request).await {
        Ok(_) => return Ok(msg_open_dispute(requester, id, deposit)),
        Err(e) if !is_unknown_record(&e) => return Err(e),
        Err(_) => {}
    }
    let (url, served) = fetch_leaf(global, args).await?;
    let proof = served.proof.context("the leaf carries no proof")?;
    let record = proof
        .leaf
        .as_ref()
        .and_then(|leaf| leaf.record.as_ref())
        .with_context(|| format!("{url} served a leaf without its record"))?;
    if &record.inference_id != id {
        bail!(
            "{url} served the leaf of {} when asked for {id}",
            record.inference_id
        );
    }
    if record.requester != requester {
        bail!(
            "inference {id} was requested by {}, not by {requester}: only its requester may dispute it",
            record.requester
        );
    }
    let by_number = QueryBatchRequest {
        transfer_agent: record.transfer_agent.clone(),
        number: served.batch_number,
        ..QueryBatchRequest::default()
    };
    let batch = super::settlement::batch(global, by_number).await?;
    let settled = batch
        .settled
        .as_ref()
        .context("the batch carries no message")?;
    proven_leaf(settled, &proof).with_context(|| {
        format!(
            "{url} served a proof that is not on batch {}'s root on chain; demand leaf {} on chain instead (gonkad tx settlement demand-leaf {requester} {} {} <deposit>)",
            batch.id, proof.index, batch.id, proof.index
        )
    })?;
    eprintln!(
        "disputing leaf {} of batch {} (served by {url})",
        proof.index, batch.id
    );
    Ok(msg_dispute_leaf(requester, batch.id, proof, deposit))
}

/// Whether `error` is the chain saying it holds no such work record.
fn is_unknown_record(error: &anyhow::Error) -> bool {
    error.downcast_ref::<QueryError>().is_some_and(|e| {
        e.codespace == InferenceError::CODESPACE && e.code == InferenceError::UnknownRecord.code()
    })
}

/// The first leaf of `args.inference_id` a transfer agent serves, with that agent's URL.
async fn fetch_leaf(global: &Global, args: &OpenArgs) -> Result<(String, ServedLeaf)> {
    let id = &args.inference_id;
    let urls = crate::chat::transfer_agents(global, &args.transfer_agents).await?;
    let mut why = Vec::new();
    for url in urls {
        match served_leaf(&url, id, LEAF_TIMEOUT).await {
            Ok(Some(served)) => return Ok((url, served)),
            Ok(None) => why.push(format!("{url}: no leaf")),
            Err(e) => why.push(format!("{e:#}")),
        }
    }
    bail!(
        "inference {id} is not on chain as a work record and no transfer agent serves its leaf ({}); if the answer is only seconds old, retry once its batch is on chain, or name its transfer agent with --ta",
        why.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_32_byte_hash_hex() {
        let hash = parse_hash_hex(&"ab".repeat(32)).unwrap();
        assert_eq!(hash, vec![0xab; 32]);
        assert_eq!(
            parse_hash_hex(&format!("0x{}", "AB".repeat(32))).unwrap(),
            hash
        );
        assert!(parse_hash_hex("abcd")
            .unwrap_err()
            .to_string()
            .contains("2 bytes"));
        assert!(parse_hash_hex("zz")
            .unwrap_err()
            .to_string()
            .contains("not hex"));
    }
}
