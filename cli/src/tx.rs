//! `gonkad tx`: sign with a keyring key, broadcast with `broadcast_tx_sync`, wait for the
//! block that includes the tx.
//!
//! Gas and fees as a Cosmos user expects them: `--gas auto` (the default) simulates the tx
//! and multiplies the gas it used by `--gas-adjustment`; `--gas N` sets the limit. The fee is
//! `--fees` if given, else ceil(gas limit × `--gas-prices`), whose default is the chain's
//! minimum gas price.

mod bls;
mod disputes;
mod inference;
mod pol;
mod settlement;
mod stake;

use std::time::Duration;

use anyhow::{bail, Result};
use gonka_client::{msg_send, sign, Any, GasAdjustment, GasFee, GasPrice, Key};
use serde_json::json;

use crate::{amount::parse_ngnk, keys::load_key, Global};

/// Parses the hex (optionally `0x`-prefixed) of exactly `len` bytes; `what` names the value in
/// errors, e.g. "a SHA-256 hash" or "a compressed secp256k1 public key".
pub fn parse_fixed_hex(text: &str, len: usize, what: &str) -> Result<Vec<u8>> {
    let trimmed = text.trim();
    let digits = trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
        .unwrap_or(trimmed);
    let bytes = hex::decode(digits).map_err(|e| {
        anyhow::anyhow!(
            "{text:?} is not hex ({e}); pass the {} hex digits of {what}",
            2 * len
        )
    })?;
    if bytes.len() != len {
        bail!(
            "{} bytes given; {what} is {len} bytes ({} hex digits)",
            bytes.len(),
            2 * len
        );
    }
    Ok(bytes)
}

/// `gonkad tx` modules.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Bank transactions.
    #[command(subcommand)]
    Bank(BankCommand),
    /// Stake transactions: become a participant, bond, unbond, unjail.
    #[command(subcommand)]
    Stake(stake::Command),
    /// Inference transactions: register, update and remove ML nodes and transfer agents.
    #[command(subcommand)]
    Inference(inference::Command),
    /// Disputes transactions: submit a validation, open a dispute, vote on one.
    #[command(subcommand)]
    Disputes(disputes::Command),
    /// BLS transactions: register or rotate a participant's BLS key.
    #[command(subcommand)]
    Bls(bls::Command),
    /// Settlement transactions: open, top up and close an escrow for a transfer agent.
    #[command(subcommand)]
    Settlement(settlement::Command),
    /// Training transactions: create a training job, join one as a worker.
    #[command(subcommand)]
    Pol(pol::Command),
}

/// `gonkad tx bank` subcommands.
#[derive(clap::Subcommand)]
pub enum BankCommand {
    /// Send GNK from a keyring key to an address.
    Send(SendArgs),
}

/// Options of every transaction.
#[derive(clap::Args)]
pub struct TxOptions {
    /// Gas limit of the tx, or `auto` to simulate it first and use the gas it needs times
    /// --gas-adjustment.
    #[arg(long, default_value = "auto", value_name = "auto|N")]
    gas: String,
    /// Multiplier of the simulated gas with --gas auto (headroom for state changing between
    /// the simulation and the block).
    #[arg(long, default_value = "1.3", value_name = "DECIMAL")]
    gas_adjustment: String,
    /// Price per gas unit in ngnk, e.g. 0.01ngnk: the fee is ceil(gas limit × price)
    /// [default: the chain's minimum gas price].
    #[arg(long, value_name = "PRICE", conflicts_with = "fees")]
    gas_prices: Option<String>,
    /// Fee to pay instead of gas × price, e.g. 2000ngnk; the chain refuses less than
    /// ceil(gas limit × its minimum gas price).
    #[arg(long, alias = "fee", value_name = "AMOUNT")]
    fees: Option<String>,
    /// Memo stored with the tx.
    #[arg(long, default_value = "")]
    memo: String,
    /// Seconds to wait for inclusion in a block.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
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
    #[command(flatten)]
    tx: TxOptions,
}

/// Runs a `gonkad tx` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    match command {
        Command::Bank(BankCommand::Send(args)) => send(global, args).await,
        Command::Stake(command) => stake::run(global, command).await,
        Command::Inference(command) => inference::run(global, command).await,
        Command::Disputes(command) => disputes::run(global, command).await,
        Command::Bls(command) => bls::run(global, command).await,
        Command::Settlement(command) => settlement::run(global, command).await,
        Command::Pol(command) => pol::run(global, command).await,
    }
}

async fn send(global: &Global, args: SendArgs) -> Result<()> {
    let key = load_key(global, &args.from)?;
    let amount = parse_ngnk(&args.amount)?;
    if !args.to.starts_with("gonka1") {
        bail!(
            "recipient {:?} is not a gonka address (gonka1...); see `gonkad keys show NAME`",
            args.to
        );
    }
    let msg = msg_send(key.address(), &args.to, amount);
    sign_broadcast_print(global, &key, vec![msg], &args.tx).await
}

/// Signs `msgs` with `key`, broadcasts them, waits for the including block and prints its
/// hash, height and result code. A tx that is included but fails is an error (it paid its
/// fee all the same).
pub async fn sign_broadcast_print(
    global: &Global,
    key: &Key,
    msgs: Vec<Any>,
    options: &TxOptions,
) -> Result<()> {
    let client = global.client()?;
    let signer = client
        .signer_data(key.address(), global.chain_id.as_deref())
        .await?;
    let gas_limit = match options.gas.trim() {
        "auto" => {
            let adjustment = GasAdjustment::parse(&options.gas_adjustment)?;
            let probe = sign(
                key,
                msgs.clone(),
                &signer,
                GasFee::SIMULATION,
                &options.memo,
            )?;
            let used = client.simulate(probe).await.map_err(|e| {
                anyhow::anyhow!(
                    "{e:#}\n(the tx was simulated to estimate its gas and would fail as it is)"
                )
            })?;
            adjustment.apply(used)
        }
        limit => limit.parse::<u64>().map_err(|_| {
            anyhow::anyhow!("--gas {limit:?} must be `auto` or a whole number of gas units")
        })?,
    };
    let fee = match (&options.fees, &options.gas_prices) {
        (Some(fees), _) => GasFee {
            gas_limit,
            amount: parse_ngnk(fees)?,
        },
        (None, Some(price)) => GasFee::at_price(
            gas_limit,
            &GasPrice::parse(price).map_err(anyhow::Error::msg)?,
        )?,
        (None, None) => GasFee::at_price(gas_limit, &client.min_gas_price().await?)?,
    };
    let tx = sign(key, msgs, &signer, fee, &options.memo)?;
    eprintln!(
        "broadcasting to {} and waiting for a block...",
        client.url()
    );
    let included = client
        .broadcast_and_wait(tx, Duration::from_secs(options.timeout))
        .await?;
    global.output.print(
        json!({
            "hash": included.hash,
            "height": included.height,
            "code": included.code,
            "codespace": included.codespace,
            "log": included.log,
            "gas_wanted": included.gas_wanted,
            "gas_used": included.gas_used,
            "fee": {"amount": fee.amount.to_string(), "denom": "ngnk"},
        }),
        || {
            let mut text = format!(
                "hash: {}\nheight: {}\ncode: {}\ngas: {} used of {}\nfee: {}ngnk",
                included.hash,
                included.height,
                included.code,
                included.gas_used,
                included.gas_wanted,
                fee.amount
            );
            if included.code != 0 {
                text.push_str(&format!(
                    "\nfailed ({}): {}",
                    included.codespace, included.log
                ));
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
