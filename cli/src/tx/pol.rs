//! `gonkad tx pol`: create a training job and join one.

use anyhow::{bail, Context, Result};
use gonka_client::pol::msg_join_training;
use gonka_client::tx::any_of;
use gonka_proto::pol::{MsgCreateTrainingJob, TrainingConfig};

use super::{parse_fixed_hex, sign_broadcast_print, TxOptions};
use crate::{amount::parse_ngnk, keys::load_key, Global};

/// `gonkad tx pol` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Describe a training job and escrow its reward budget: staked hosts join it, train it
    /// together with DiLoCo round by round, and are paid from the budget per verified
    /// checkpoint. What the job does not pay comes back to you when it ends.
    #[command(name = "create-job")]
    CreateJob(Box<CreateJobArgs>),
    /// Join a forming training job as its next worker (a staked host only); the job starts
    /// when its last worker joins.
    Join(JoinArgs),
}

/// Arguments of `gonkad tx pol create-job`.
#[derive(clap::Args)]
pub struct CreateJobArgs {
    /// Name of the creator's key in the keyring.
    from: String,
    /// Reward budget, e.g. 10gnk or 5000ngnk: one slot per (round, worker), 10% of each
    /// paying its verification when sampled.
    budget: String,
    /// Hex of the dataset's 32-byte Merkle root (the trainers check their shards against it).
    #[arg(long, value_name = "HEX")]
    dataset_root: String,
    /// Architecture the trainers implement.
    #[arg(long, default_value = "gonka-ref-v1")]
    model: String,
    /// Workers the job needs before it starts.
    #[arg(long, default_value_t = 3)]
    workers: u64,
    /// Outer (DiLoCo) rounds.
    #[arg(long, default_value_t = 10)]
    rounds: u64,
    /// Inner AdamW steps per round (H).
    #[arg(long, default_value_t = 50)]
    inner_steps: u64,
    /// Blocks a round accepts checkpoints for; a worker without one by then is dropped.
    #[arg(long, default_value_t = 30)]
    round_blocks: u64,
    /// Bytes per training sequence.
    #[arg(long, default_value_t = 64)]
    seq_len: u64,
    /// Sequences per inner step.
    #[arg(long, default_value_t = 8)]
    batch_size: u64,
    /// Inner AdamW learning rate.
    #[arg(long, default_value = "0.003")]
    inner_lr: String,
    /// Inner AdamW weight decay.
    #[arg(long, default_value = "0")]
    inner_weight_decay: String,
    /// Outer Nesterov learning rate (DiLoCo: 0.7).
    #[arg(long, default_value = "0.7")]
    outer_lr: String,
    /// Outer Nesterov momentum (DiLoCo: 0.9).
    #[arg(long, default_value = "0.9")]
    outer_momentum: String,
    /// Seed of the initial weights and of the data order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx pol join`.
#[derive(clap::Args)]
pub struct JoinArgs {
    /// Name of the host's key in the keyring.
    from: String,
    /// The training job's id (from `gonkad query pol jobs`).
    job_id: u64,
    /// Base URL where your trainer serves its round outputs to the other workers and to
    /// verifiers (the sidecar's trainer address).
    #[arg(long, value_name = "URL")]
    endpoint: String,
    #[command(flatten)]
    tx: TxOptions,
}

/// A decimal rate such as `0.003` in parts per million (at most 6 fractional digits).
fn parse_ppm(flag: &str, text: &str) -> Result<u64> {
    let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    let valid = !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.len() <= 6
        && fraction.bytes().all(|b| b.is_ascii_digit());
    if !valid {
        bail!("--{flag} {text:?} must be a decimal number with at most 6 fractional digits, such as 0.003");
    }
    let whole: u64 = whole
        .parse()
        .with_context(|| format!("--{flag} {text:?} is too large"))?;
    let fraction: u64 = format!("{fraction:0<6}").parse().unwrap_or(0);
    whole
        .checked_mul(1_000_000)
        .and_then(|w| w.checked_add(fraction))
        .with_context(|| format!("--{flag} {text:?} is too large"))
}

/// Runs a `gonkad tx pol` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    match command {
        Command::CreateJob(args) => {
            let key = load_key(global, &args.from)?;
            let msg = MsgCreateTrainingJob {
                creator: key.address().into(),
                config: Some(TrainingConfig {
                    model: args.model,
                    seq_len: args.seq_len,
                    batch_size: args.batch_size,
                    inner_steps: args.inner_steps,
                    inner_lr_ppm: parse_ppm("inner-lr", &args.inner_lr)?,
                    inner_weight_decay_ppm: parse_ppm(
                        "inner-weight-decay",
                        &args.inner_weight_decay,
                    )?,
                    outer_lr_ppm: parse_ppm("outer-lr", &args.outer_lr)?,
                    outer_momentum_ppm: parse_ppm("outer-momentum", &args.outer_momentum)?,
                }),
                dataset_root: parse_fixed_hex(&args.dataset_root, 32, "a dataset Merkle root")?,
                seed: args.seed,
                outer_rounds: args.rounds,
                worker_count: args.workers,
                round_blocks: args.round_blocks,
                reward_budget: parse_ngnk(&args.budget)?.to_string(),
            };
            sign_broadcast_print(global, &key, vec![any_of(&msg)], &args.tx).await
        }
        Command::Join(args) => {
            let key = load_key(global, &args.from)?;
            let msg = msg_join_training(key.address(), args.job_id, &args.endpoint);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_ppm;

    #[test]
    fn rates_parse_to_parts_per_million() {
        assert_eq!(parse_ppm("x", "0.003").unwrap(), 3_000);
        assert_eq!(parse_ppm("x", "0.7").unwrap(), 700_000);
        assert_eq!(parse_ppm("x", "1").unwrap(), 1_000_000);
        assert_eq!(parse_ppm("x", "0.000001").unwrap(), 1);
        for bad in ["", ".5", "0.0000001", "1e-3", "-0.1", "0.x"] {
            let err = parse_ppm("inner-lr", bad).unwrap_err().to_string();
            assert!(err.contains("--inner-lr"), "{bad}: {err}");
        }
    }
}
