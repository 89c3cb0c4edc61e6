//! Answering leaf demands (`--settlement batches`): anyone may demand, with a deposit, a
//! leaf of one of this TA's pending batches on chain; a demand left unanswered for
//! `leaf_answer_blocks` voids the batch and slashes the TA as if it had withheld the leaf.
//! This task asks the chain for the TA's open demands (`/settlement/demands`) every poll and
//! answers each with `MsgProvideLeaf` (the leaf and its proof, from the stored batch), which
//! also earns the TA the deposit. A demand whose answer is on its way is not answered twice.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use gonka_client::settlement::msg_provide_leaf;
use gonka_client::{Chain, TxOutcome};
use gonka_proto::query::settlement as q;
use gonka_proto::settlement::{QueryBatchRequest, QueryDemandsRequest};

use crate::leaves::Leaves;

/// Answers this TA's leaf demands every `every`, until the process ends.
pub async fn run_answerer(chain: Arc<Chain>, leaves: Arc<Leaves>, every: Duration) {
    let mut answered: BTreeSet<(u64, u64)> = BTreeSet::new();
    loop {
        tokio::time::sleep(every).await;
        if let Err(e) = answer_open(&chain, &leaves, &mut answered).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot answer leaf demands now; retrying");
        }
    }
}

async fn answer_open(
    chain: &Chain,
    leaves: &Leaves,
    answered: &mut BTreeSet<(u64, u64)>,
) -> anyhow::Result<()> {
    let open = chain
        .client()
        .query::<q::Demands>(&QueryDemandsRequest {
            transfer_agent: chain.address().to_string(),
            limit: 0,
        })
        .await?
        .demands;
    // Demands no longer open need no memory.
    answered.retain(|key| open.iter().any(|d| (d.batch_id, d.index) == *key));
    for demand in open {
        let key = (demand.batch_id, demand.index);
        if answered.contains(&key) {
            continue;
        }
        let batch = chain
            .client()
            .query::<q::Batch>(&QueryBatchRequest {
                id: demand.batch_id,
            })
            .await?
            .batch
            .and_then(|b| b.settled)
            .filter(|m| m.transfer_agent == chain.address());
        let Some(msg) = batch else {
            continue;
        };
        let Some(proof) = leaves.proof(msg.number, demand.index).await? else {
            tracing::error!(batch = msg.number, index = demand.index, "a leaf of this TA's batch is demanded but the TA does not keep it; the batch will be voided");
            answered.insert(key);
            continue;
        };
        let tx = msg_provide_leaf(chain.address(), demand.batch_id, proof);
        match chain
            .submit_for_outcome(vec![tx], Duration::from_secs(30))
            .await?
        {
            TxOutcome::Executed(_) => {
                tracing::info!(batch = msg.number, index = demand.index, challenger = %demand.challenger, "answered a leaf demand");
                answered.insert(key);
            }
            TxOutcome::Refused(reason) => {
                tracing::warn!(batch = msg.number, index = demand.index, %reason, "the chain refused the answer to a leaf demand");
            }
        }
    }
    Ok(())
}
