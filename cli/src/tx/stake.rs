//! `gonkad tx stake`: become a participant, bond more, unbond, unjail.

use anyhow::Result;
use gonka_client::{msg_stake, msg_unjail, msg_unstake};

use super::{sign_broadcast_print, TxOptions};
use crate::{amount::parse_ngnk, consensus_key::parse_consensus_key, keys::load_key, Global};

/// `gonkad tx stake` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Make a keyring key a participant with a first stake (at least the chain's min_stake).
    Create(CreateArgs),
    /// Bond more GNK to a participant.
    Add(AmountArgs),
    /// Start unbonding GNK; it is paid back after the chain's unbonding_epochs.
    Unstake(AmountArgs),
    /// Release a jailed participant once its jail time is over.
    Unjail(UnjailArgs),
}

/// Arguments of `gonkad tx stake create`.
#[derive(clap::Args)]
pub struct CreateArgs {
    /// Name of the operator key in the keyring; its address becomes the participant's id.
    from: String,
    /// First stake: 1500ngnk, 2.5gnk or a bare number of ngnk.
    amount: String,
    /// Name shown for the participant (at most 64 characters).
    #[arg(long)]
    moniker: String,
    /// CometBFT ed25519 public key to become a validator: base64, or the path of the node's
    /// priv_validator_key.json. Set once; omit it for a participant that does not validate.
    #[arg(long)]
    consensus_key: Option<String>,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx stake add` and `gonkad tx stake unstake`.
#[derive(clap::Args)]
pub struct AmountArgs {
    /// Name of the operator key in the keyring.
    from: String,
    /// Amount: 1500ngnk, 2.5gnk or a bare number of ngnk.
    amount: String,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx stake unjail`.
#[derive(clap::Args)]
pub struct UnjailArgs {
    /// Name of the operator key in the keyring.
    from: String,
    #[command(flatten)]
    tx: TxOptions,
}

/// Runs a `gonkad tx stake` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    let (key, msg, tx) = match command {
        Command::Create(args) => {
            let consensus_key = args
                .consensus_key
                .as_deref()
                .map(parse_consensus_key)
                .transpose()?;
            let key = load_key(global, &args.from)?;
            let amount = parse_ngnk(&args.amount)?;
            let msg = msg_stake(key.address(), amount, &args.moniker, consensus_key);
            (key, msg, args.tx)
        }
        Command::Add(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_stake(key.address(), parse_ngnk(&args.amount)?, "", None);
            (key, msg, args.tx)
        }
        Command::Unstake(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_unstake(key.address(), parse_ngnk(&args.amount)?);
            (key, msg, args.tx)
        }
        Command::Unjail(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_unjail(key.address());
            (key, msg, args.tx)
        }
    };
    sign_broadcast_print(global, &key, vec![msg], &tx).await
}
