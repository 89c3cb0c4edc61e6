//! `gonkad tx settlement`: a requester's escrow for a transfer agent, and the messages anyone
//! watching a batch sends: demand a leaf, provide a demanded leaf, challenge a batch.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use gonka_client::chat::batch_leaf;
use gonka_client::settlement::{
    msg_challenge_batch, msg_close_escrow, msg_demand_leaf, msg_open_escrow, msg_provide_leaf,
    msg_top_up_escrow, proven_leaf,
};
use gonka_proto::query as q;
use gonka_proto::settlement::msg_challenge_batch::Kind;
use gonka_proto::settlement::{
    Batch, DuplicateLeaf, HostMismatch, LeafProof, QueryBatchRequest, UnsortedLeaves,
};

use super::{sign_broadcast_print, TxOptions};
use crate::{amount::parse_ngnk, keys::load_key, Global};

/// How long a transfer agent has to serve a leaf.
pub(super) const LEAF_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Demand leaf INDEX of a pending batch on chain, with a deposit: its transfer agent must
    /// provide it within leaf_answer_blocks (then the deposit is its), or the batch is voided
    /// and the agent slashed (then the deposit comes back).
    #[command(name = "demand-leaf")]
    Demand(DemandArgs),
    /// Answer a leaf demand: fetch the leaf and its proof from the batch's transfer agent
    /// (anyone may send it; transfer agents answer their demands by themselves).
    #[command(name = "provide-leaf")]
    Provide(LeafArgs),
    /// Challenge a pending batch with leaves its transfer agent serves: a success voids the
    /// batch, slashes the agent (and a host that co-signed a bad leaf) and pays you a bounty.
    /// A challenge that proves nothing fails and costs only its fee.
    #[command(name = "challenge-batch", after_help = CHALLENGE_HELP)]
    Challenge(ChallengeArgs),
}

const CHALLENGE_HELP: &str = "\
Kinds (the leaves are fetched from the batch's transfer agent and checked against the root on \
chain before anything is sent):
  invalid-leaf   leaf INDEX breaks a rule of its own (signature, price, tokens, model, age)
  unsorted       leaves INDEX and INDEX+1 are out of (requester, inference id) order
  host-mismatch  leaf INDEX's host chain or running totals are wrong; --other names a second
                 leaf (default: the one its host_previous names)
  duplicate      leaf INDEX is also leaf --other of batch --other-batch
A node whose sum is wrong (sum_mismatch) or a requester line that is not its leaves' sum \
(requester_mismatch) needs inner nodes of the tree, which transfer agents do not serve; build \
those with gonka_client::settlement.

Examples:
  gonkad tx settlement challenge-batch alice 4 invalid-leaf 2
  gonkad tx settlement challenge-batch alice 5 duplicate 0 --other-batch 4 --other 3";

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

/// Arguments of `gonkad tx settlement demand-leaf`.
#[derive(clap::Args)]
pub struct DemandArgs {
    /// Name of your key in the keyring.
    from: String,
    /// Batch id on chain (`gonkad query settlement batch`).
    batch_id: u64,
    /// Leaf index in the batch.
    index: u64,
    /// Deposit (at least min_leaf_deposit): 1500ngnk, 2.5gnk or a bare number of ngnk.
    deposit: String,
    #[command(flatten)]
    tx: TxOptions,
}

/// Arguments of `gonkad tx settlement provide-leaf`.
#[derive(clap::Args)]
pub struct LeafArgs {
    /// Name of your key in the keyring.
    from: String,
    /// Batch id on chain.
    batch_id: u64,
    /// Leaf index in the batch.
    index: u64,
    /// The transfer agent's base URL [default: the URL it registered on chain].
    #[arg(long = "ta", value_name = "URL")]
    ta_url: Option<String>,
    #[command(flatten)]
    tx: TxOptions,
}

/// What a challenge shows.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ChallengeKind {
    /// The leaf breaks a rule of its own.
    InvalidLeaf,
    /// The leaf and the next are out of order.
    Unsorted,
    /// The leaf's host chain or totals are wrong.
    HostMismatch,
    /// The leaf is also in another batch.
    Duplicate,
}

/// Arguments of `gonkad tx settlement challenge-batch`.
#[derive(clap::Args)]
pub struct ChallengeArgs {
    /// Name of your key in the keyring (the bounty's payee).
    from: String,
    /// Batch id on chain.
    batch_id: u64,
    /// What is wrong.
    #[arg(value_enum)]
    kind: ChallengeKind,
    /// Index of the faulty leaf.
    index: u64,
    /// host-mismatch: a second leaf of the batch; duplicate: the leaf's index in --other-batch.
    #[arg(long, value_name = "INDEX")]
    other: Option<u64>,
    /// duplicate: id of the other batch holding the same request.
    #[arg(long, value_name = "BATCH_ID")]
    other_batch: Option<u64>,
    /// The transfer agent's base URL [default: the URL it registered on chain].
    #[arg(long = "ta", value_name = "URL")]
    ta_url: Option<String>,
    #[command(flatten)]
    tx: TxOptions,
}

/// The batch `request` names (by id, or by transfer agent and number) as the chain holds it.
pub(super) async fn batch(global: &Global, request: QueryBatchRequest) -> Result<Batch> {
    let named = if request.transfer_agent.is_empty() {
        format!("batch {}", request.id)
    } else {
        format!(
            "batch {} of transfer agent {}",
            request.number, request.transfer_agent
        )
    };
    global
        .client()?
        .query::<q::settlement::Batch>(&request)
        .await
        .with_context(|| format!("finding {named} on chain"))?
        .batch
        .with_context(|| format!("the chain answered no {named}"))
}

/// The URL transfer agent `address` registered on chain.
async fn registered_url(global: &Global, address: &str) -> Result<String> {
    let agents = global
        .client()?
        .query_all::<q::inference::TransferAgents>(Default::default())
        .await?;
    agents
        .into_iter()
        .find(|ta| ta.address == address)
        .map(|ta| ta.url)
        .with_context(|| {
            format!("transfer agent {address} is not registered on chain; pass --ta URL")
        })
}

/// Leaf `index` of chain batch `batch_id` with its proof, from the batch's transfer agent
/// (at `ta_url`, else its registered URL), checked against the root on chain.
async fn fetch_proof(
    global: &Global,
    batch_id: u64,
    index: u64,
    ta_url: Option<&str>,
) -> Result<LeafProof> {
    let by_id = QueryBatchRequest {
        id: batch_id,
        ..QueryBatchRequest::default()
    };
    let batch = batch(global, by_id).await?;
    let settled = batch.settled.context("the batch carries no message")?;
    let url = match ta_url {
        Some(url) => url.to_string(),
        None => registered_url(global, &settled.transfer_agent).await?,
    };
    let proof = batch_leaf(&url, settled.number, index, LEAF_TIMEOUT)
        .await?
        .with_context(|| {
            format!(
                "{url} does not serve leaf {index} of batch {batch_id} (its batch {}); demand it on chain: gonkad tx settlement demand-leaf <from> {batch_id} {index} <deposit>",
                settled.number
            )
        })?;
    if proof.index != index {
        bail!(
            "{url} served leaf {} when asked for leaf {index}",
            proof.index
        );
    }
    proven_leaf(&settled, &proof).with_context(|| {
        format!("{url} served a proof that is not on batch {batch_id}'s root on chain; demand the leaf on chain instead")
    })?;
    Ok(proof)
}

/// The challenge `args` describe, with the leaves it needs fetched and checked.
async fn challenge(global: &Global, args: &ChallengeArgs) -> Result<Kind> {
    let ta = args.ta_url.as_deref();
    let leaf = fetch_proof(global, args.batch_id, args.index, ta).await?;
    Ok(match args.kind {
        ChallengeKind::InvalidLeaf => Kind::InvalidLeaf(leaf),
        ChallengeKind::Unsorted => {
            let second = fetch_proof(global, args.batch_id, args.index + 1, ta).await?;
            Kind::Unsorted(UnsortedLeaves {
                first: Some(leaf),
                second: Some(second),
            })
        }
        ChallengeKind::HostMismatch => {
            let previous = leaf.leaf.as_ref().map_or(0, |l| l.host_previous);
            let other = match args.other.or(previous.checked_sub(1)) {
                Some(other) => Some(fetch_proof(global, args.batch_id, other, ta).await?),
                None => None,
            };
            Kind::HostMismatch(HostMismatch {
                leaf: Some(leaf),
                other,
            })
        }
        ChallengeKind::Duplicate => {
            let (Some(other_batch), Some(other)) = (args.other_batch, args.other) else {
                bail!("a duplicate challenge names the other leaf with --other-batch ID --other INDEX");
            };
            // The other batch may be another transfer agent's: ask the one it registered.
            let other = fetch_proof(global, other_batch, other, None).await?;
            Kind::Duplicate(DuplicateLeaf {
                leaf: Some(leaf),
                other_batch_id: other_batch,
                other: Some(other),
            })
        }
    })
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
        Command::Demand(args) => {
            let key = load_key(global, &args.from)?;
            let deposit = parse_ngnk(&args.deposit)?;
            let msg = msg_demand_leaf(key.address(), args.batch_id, args.index, deposit);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
        Command::Provide(args) => {
            let key = load_key(global, &args.from)?;
            let proof =
                fetch_proof(global, args.batch_id, args.index, args.ta_url.as_deref()).await?;
            let msg = msg_provide_leaf(key.address(), args.batch_id, proof);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
        Command::Challenge(args) => {
            let key = load_key(global, &args.from)?;
            let kind = challenge(global, &args).await?;
            let msg = msg_challenge_batch(key.address(), args.batch_id, kind);
            sign_broadcast_print(global, &key, vec![msg], &args.tx).await
        }
    }
}
