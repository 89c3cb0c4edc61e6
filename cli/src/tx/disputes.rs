//! `gonkad tx disputes`: submit a validation, open a user dispute, vote on a dispute.

use anyhow::Result;
use gonka_client::disputes::{
    msg_open_dispute, msg_submit_validation, msg_vote_dispute, ReExecution,
};

use super::{sign_broadcast_print, TxOptions};
use crate::{amount::parse_ngnk, keys::load_key, Global};

/// `gonkad tx disputes` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// As the assigned validator, commit your result of a sampled work record (the chain
    /// compares it once the record's transfer agent reveals the output).
    Validate(ValidateArgs),
    /// As the requester of a work record, dispute it with a deposit.
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
pub struct OpenArgs {
    /// Name of the requester's key in the keyring.
    from: String,
    /// Inference id of the disputed record.
    inference_id: String,
    /// Deposit (at least the chain's min_deposit): 1500ngnk, 2.5gnk or a bare number of ngnk.
    deposit: String,
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
            let msg = msg_open_dispute(
                key.address(),
                &args.inference_id,
                parse_ngnk(&args.deposit)?,
            );
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
