//! `gonkad tx`: sign with a keyring key, broadcast with `broadcast_tx_sync`, wait for the
//! block that includes the tx.

use std::time::Duration;

use anyhow::{bail, Result};
use gonka_client::{msg_send, sign};
use serde_json::json;

use crate::{amount::parse_ngnk, keys::load_key, Global};

/// `gonkad tx` modules.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Bank transactions.
    #[command(subcommand)]
    Bank(BankCommand),
}

/// `gonkad tx bank` subcommands.
#[derive(clap::Subcommand)]
pub enum BankCommand {
    /// Send GNK from a keyring key to an address.
    Send(SendArgs),
}

/// Arguments of `gonkad tx bank send`.
#[derive(clap::Args)]
pub struct SendArgs {
    /// Name of the sending key in the keyring.
    from: String,
    /// Recipient address (gonka1...).
    to: String,
    /// Amount: 1500ngnk, 2.5gnk or a bare number of ngnk.
    amount: String,
    /// Fee in ngnk (at least the chain's minimum fee).
    #[arg(long, default_value = "1000ngnk")]
    fee: String,
    /// Memo stored with the tx.
    #[arg(long, default_value = "")]
    memo: String,
    /// Seconds to wait for inclusion in a block.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
}

/// Runs a `gonkad tx` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    let Command::Bank(BankCommand::Send(args)) = command;
    let key = load_key(&global.home(), &args.from)?;
    let amount = parse_ngnk(&args.amount)?;
    let fee = parse_ngnk(&args.fee)?;
    if !args.to.starts_with("gonka1") {
        bail!(
            "recipient {:?} is not a gonka address (gonka1...); see `gonkad keys show NAME`",
            args.to
        );
    }
    let client = global.client()?;
    let signer = client
        .signer_data(key.address(), global.chain_id.as_deref())
        .await?;
    let tx = sign(
        &key,
        vec![msg_send(key.address(), &args.to, amount)],
        &signer,
        fee,
        &args.memo,
    )?;
    eprintln!(
        "broadcasting to {} and waiting for a block...",
        client.url()
    );
    let included = client
        .broadcast_and_wait(tx, Duration::from_secs(args.timeout))
        .await?;
    global.output.print(
        json!({"hash": included.hash, "height": included.height, "code": included.code, "codespace": included.codespace, "log": included.log}),
        || {
            let mut text = format!("hash: {}\nheight: {}\ncode: {}", included.hash, included.height, included.code);
            if included.code != 0 {
                text.push_str(&format!("\nfailed ({}): {}", included.codespace, included.log));
            }
            text
        },
    );
    if included.code != 0 {
        bail!(
            "tx {} was included but failed; it paid its fee",
            included.hash
        );
    }
    Ok(())
}
