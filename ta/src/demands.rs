//! Answering leaf demands: anyone may demand, with a deposit, a
//! leaf of one of this TA's pending batches on chain; a demand left unanswered for
//! `leaf_answer_blocks` voids the batch and slashes the TA as if it had withheld the leaf.
//! This task asks the chain for the TA's open demands (`/settlement/demands`, page by page)
//! every poll and answers them with `MsgProvideLeaf` (the leaf and its proof, from the stored
//! batch): up to [`ROUND`] per round, in transactions within auth's limits ([`pack`]) sent
//! together; the answers also earn the TA the deposits. The chain itself demands the leaves
//! it samples for validation (x/settlement), so an honest TA answers a share of every batch;
//! the [`Backlog`] makes the committer wait while a full round or more is open, so the TA
//! never commits faster than it can answer. A demand whose answer is on its way is not
//! answered twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use gonka_client::settlement::msg_provide_leaf;
use gonka_client::tx::{pack, TX_MAX_MSGS, TX_MSG_BUDGET};
use gonka_client::{Chain, TxOutcome};
use gonka_proto::query::settlement::{self as q, MAX_DEMANDS};
use gonka_proto::settlement::{QueryBatchRequest, QueryDemandsRequest};

use crate::leaves::Leaves;

/// Open demands on this TA's batches as last read (what the committer waits on before it
/// commits more work than the TA can answer for).
#[derive(Debug, Default)]
pub struct Backlog(AtomicUsize);

impl Backlog {
    /// Demands open at the last read.
    pub fn open(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// Pages of demands read per round.
pub const PAGES_PER_ROUND: usize = 10;

/// Open demands one round answers at most.
pub const ROUND: usize = PAGES_PER_ROUND * MAX_DEMANDS as usize;

/// Answers this TA's leaf demands, up to [`ROUND`] of them per round ([`pack`]ed into
/// transactions), every `every` (at once again while rounds come full), until the process ends.
pub async fn run_answerer(
    chain: Arc<Chain>,
    leaves: Arc<Leaves>,
    backlog: Arc<Backlog>,
    every: Duration,
) {
    let mut answered: BTreeSet<(u64, u64)> = BTreeSet::new();
    loop {
        match answer_round(&chain, &leaves, &mut answered).await {
            Ok(open) => {
                backlog.0.store(open, Ordering::Relaxed);
                if open >= ROUND {
                    continue;
                }
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot answer leaf demands now; retrying");
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Reads up to [`ROUND`] open demands and answers them; returns how many were read.
async fn answer_round(
    chain: &Chain,
    leaves: &Leaves,
    answered: &mut BTreeSet<(u64, u64)>,
) -> anyhow::Result<usize> {
    let mut open = Vec::new();
    let mut start = (0, 0);
    for _ in 0..PAGES_PER_ROUND {
        let page = chain
            .client()
            .query::<q::Demands>(&QueryDemandsRequest {
                transfer_agent: chain.address().to_string(),
                limit: MAX_DEMANDS,
                start_batch_id: start.0,
                start_index: start.1,
            })
            .await?
            .demands;
        let full = page.len() as u64 == MAX_DEMANDS;
        if let Some(last) = page.last() {
            start = (last.batch_id, last.index + 1);
        }
        open.extend(page);
        if !full {
            break;
        }
    }
    let count = open.len();
    // Demands no longer open need no memory.
    answered.retain(|key| open.iter().any(|d| (d.batch_id, d.index) == *key));
    let mut numbers: BTreeMap<u64, Option<u64>> = BTreeMap::new();
    let (mut keys, mut msgs) = (Vec::new(), Vec::new());
    for demand in open {
        let key = (demand.batch_id, demand.index);
        if answered.contains(&key) {
            continue;
        }
        let number = match numbers.get(&demand.batch_id) {
            Some(number) => *number,
            None => {
                let number = chain
                    .client()
                    .query::<q::Batch>(&QueryBatchRequest {
                        id: demand.batch_id,
                        ..Default::default()
                    })
                    .await?
                    .batch
                    .and_then(|b| b.settled)
                    .filter(|m| m.transfer_agent == chain.address())
                    .map(|m| m.number);
                numbers.insert(demand.batch_id, number);
                number
            }
        };
        let Some(number) = number else {
            continue;
        };
        let Some(proof) = leaves.proof(number, demand.index).await? else {
            tracing::error!(batch = number, index = demand.index, "a leaf of this TA's batch is demanded but the TA does not keep it; the batch will be voided");
            answered.insert(key);
            continue;
        };
        keys.push(key);
        msgs.push(msg_provide_leaf(chain.address(), demand.batch_id, proof));
    }
    let txs = pack(msgs, TX_MAX_MSGS, TX_MSG_BUDGET);
    let sizes: Vec<usize> = txs.iter().map(Vec::len).collect();
    let sent = join_all(
        txs.into_iter()
            .map(|msgs| chain.submit_for_outcome(msgs, Duration::from_secs(30))),
    )
    .await;
    let mut keys = keys.into_iter();
    for (size, outcome) in sizes.into_iter().zip(sent) {
        let page: Vec<(u64, u64)> = keys.by_ref().take(size).collect();
        match outcome {
            Ok(TxOutcome::Executed(_)) => {
                tracing::info!(answers = size, "answered leaf demands");
                answered.extend(page);
            }
            Ok(TxOutcome::Refused(reason)) => {
                tracing::warn!(answers = size, %reason, "the chain refused answers to leaf demands");
            }
            Err(e) => {
                tracing::warn!(answers = size, error = %format!("{e:#}"), "answers to leaf demands not included yet");
            }
        }
    }
    Ok(count)
}
