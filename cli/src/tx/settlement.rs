//! `gonkad tx settlement`: a requester's escrow for a transfer agent.

use anyhow::{bail, Result};
use gonka_client::settlement::{msg_close_escrow, msg_open_escrow, msg_top_up_escrow};

use super::{sign_broadcast_print, TxOptions};
use crate::{amount::parse_ngnk, keys::load_key, Global};

/// `gonkad tx settlement` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Set money aside for one transfer agent: its batches charge your signed requests to it,
    /// so it can serve you without asking the chain. One escrow per transfer agent.
    #[command(name = "open-escrow")]
    Open(OpenArgs),
    /// Add to an open escrow, and optionally move its expiry later.
    #[command(name = "top-up-escrow")]
    TopUp(TopUpArgs),
    /// Start closing an escrow: batches of requests already served may still charge it for
    /// one challenge window, then the rest comes back to you.
    #[command(name = "close-escrow")]
    Close(CloseArgs),
}

/// Arguments of `gonkad tx settlement open-escrow`.
#[derive(clap::Args)]
pub struct OpenArgs {
    /// Name of the requester's key in the keyring.
    from: String,
    /// The transfer agent's address (gonka1...), as your requests name it.
    transfer_agent: String,
    /// Amount, e.g. 2.5gnk or 1500ngnk.
    amount: String,
    /// Blocks until the escrow starts closing.
    #[arg(long, default_value_t = 100_000)]
    expires_in: u64,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx settlement top-up-escrow`.
#[derive(clap::Args)]
pub struct TopUpArgs {
    /// Name of the requester's key in the keyring.
    from: String,
    /// The transfer agent's address.
    transfer_agent: String,
    /// Amount to add (may be 0 to only extend the expiry).
    amount: String,
    /// Move the expiry to this many blocks from now (never earlier than it is).
    #[arg(long)]
    expires_in: Option<u64>,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx settlement close-escrow`.
#[derive(clap::Args)]
pub struct CloseArgs {
    /// Name of the requester's key in the keyring.
    from: String,
    /// The transfer agent's address.
    transfer_agent: String,
    #[command(flatten)]
    tx: TxOptions,
}

/// The height `blocks` after the chain's latest.
async fn height_in(global: &Global, blocks: u64) -> Result<u64> {
    if blocks == 0 {
        bail!("--expires-in must be at least 1 block");
    }
    let status = global.client()?.status().await?;
    Ok(status.sync_info.latest_block_height.value() + blocks)
}

/// Runs a `gonkad tx settlement` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    match command {
        Command::Open(args) => {
            let key = load_key(global, &args.from)?;
            let amount = parse_ngnk(&args.amount)?;
            let expires_at = height_in(global, args.expires_in).await?;
            let msg = msg_open_escrow(key.address(), &args.transfer_agent, amount, expires_at);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
        Command::TopUp(args) => {
            let key = load_key(global, &args.from)?;
            let amount = parse_ngnk(&args.amount)?;
            let expires_at = match args.expires_in {
                Some(blocks) => height_in(global, blocks).await?,
                None => 0,
            };
            let msg = msg_top_up_escrow(key.address(), &args.transfer_agent, amount, expires_at);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
        Command::Close(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_close_escrow(key.address(), &args.transfer_agent);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
    }
}
