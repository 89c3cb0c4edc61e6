//! The revealer: opens the output commitments of this TA's records when the chain asks.
//!
//! A record on chain carries only the executor's salted output commitment. Once the validator
//! assigned to it has committed its own result (or a dispute needs the answer), the chain
//! lists the record under `/disputes/reveals_due` for its transfer agent, which must send
//! `MsgRevealOutput` (the salt and the answer's hash — or a "logprobs" model's scored output —
//! kept in the payload store with the request body) within `reveal_deadline_blocks`. An output left unrevealed is settled as
//! withheld against the TA's stake, so [`run_revealer`] polls often and never gives up on a
//! reveal it can make. A reveal is never sent before the chain asks: a validator that learnt
//! the answer early could vouch for it without re-executing.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use gonka_client::disputes::{msg_reveal_output, msg_reveal_scored_output};
use gonka_client::{Any, Chain, TxOutcome};
use gonka_proto::disputes as dpb;
use gonka_proto::query as q;

use super::payloads::PayloadStore;

/// Most reveals sent in one transaction (well under the default `max_msgs_per_tx` of 32; a
/// chain that allows fewer refuses the tx and the reveals go one per tx).
pub const MAX_REVEALS_PER_TX: usize = 16;

/// One pass: reveals every output the chain asks this TA for and the store holds the opening
/// of, in transactions of at most [`MAX_REVEALS_PER_TX`]; a transaction the chain refuses is
/// retried one reveal per transaction, so one stale reveal does not hold up the others.
/// Returns how many were revealed.
pub async fn reveal_due(chain: &Chain, store: &PayloadStore, timeout: Duration) -> Result<usize> {
    let due = chain
        .client()
        .query_all::<q::disputes::RevealsDue>(dpb::QueryRevealsDueRequest {
            transfer_agent: chain.address().into(),
            ..Default::default()
        })
        .await?;
    let mut msgs = Vec::with_capacity(due.len());
    for item in &due {
        match store.opening(&item.inference_id)? {
            Some(o) => msgs.push(match &o.scored {
                Some(scored) => {
                    msg_reveal_scored_output(chain.address(), &item.inference_id, &o.salt, scored)
                }
                None => msg_reveal_output(
                    chain.address(),
                    &item.inference_id,
                    &o.salt,
                    &o.response_hash,
                ),
            }),
            None => tracing::error!(
                inference = %item.inference_id,
                deadline = item.deadline_height,
                "the chain asks for the output of a record whose opening this TA no longer holds; it will be settled as withheld against this TA's stake"
            ),
        }
    }
    let mut revealed = 0;
    for chunk in msgs.chunks(MAX_REVEALS_PER_TX) {
        if submit(chain, chunk.to_vec(), timeout).await? {
            revealed += chunk.len();
        } else if chunk.len() > 1 {
            for msg in chunk {
                if submit(chain, vec![msg.clone()], timeout).await? {
                    revealed += 1;
                }
            }
        }
    }
    Ok(revealed)
}

/// Submits `msgs` in one tx: `Ok(true)` when executed, `Ok(false)` when refused (logged), an
/// error when the chain could not be reached.
async fn submit(chain: &Chain, msgs: Vec<Any>, timeout: Duration) -> Result<bool> {
    let count = msgs.len();
    match chain.submit_for_outcome(msgs, timeout).await? {
        TxOutcome::Executed(_) => Ok(true),
        TxOutcome::Refused(reason) => {
            tracing::warn!(count, %reason, "reveal refused");
            Ok(false)
        }
    }
}

/// Runs [`reveal_due`] every `every` until the process ends; failures to reach the chain are
/// logged and retried at the next pass.
pub async fn run_revealer(chain: Arc<Chain>, store: Arc<PayloadStore>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        match reveal_due(&chain, &store, Duration::from_secs(30)).await {
            Ok(0) => {}
            Ok(revealed) => tracing::info!(revealed, "revealed record outputs the chain asked for"),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot reveal record outputs now; retrying")
            }
        }
    }
}
