//! Settlement queries ([`gonka_proto::query::settlement`]).

use gonka_auth::validate_address;
use gonka_proto::query::settlement as q;
use gonka_proto::settlement as pb;
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{SettlementError, SettlementRead};

/// Answers a settlement query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Escrow>(|r| {
            let escrow = state
                .escrow(&r.requester, &r.transfer_agent)?
                .ok_or_else(|| {
                    SettlementError::UnknownEscrow.err(format!(
                        "{} holds no escrow for transfer agent {}",
                        r.requester, r.transfer_agent
                    ))
                })?;
            Ok(pb::QueryEscrowResponse {
                escrow: Some(escrow),
            })
        })
        .on::<q::Batch>(|r| {
            let batch = if r.transfer_agent.is_empty() {
                state.batch(r.id)?.ok_or_else(|| {
                    SettlementError::UnknownBatch.err(format!("no batch with id {}", r.id))
                })?
            } else {
                state
                    .batch_by_number(&r.transfer_agent, r.number)?
                    .ok_or_else(|| {
                        SettlementError::UnknownBatch.err(format!(
                            "no stored batch numbered {} by transfer agent {} (not settled yet, or pruned)",
                            r.number, r.transfer_agent
                        ))
                    })?
            };
            Ok(pb::QueryBatchResponse { batch: Some(batch) })
        })
        .on::<q::BatchNumber>(|r| {
            Ok(pb::QueryBatchNumberResponse {
                number: state.batch_number(&r.transfer_agent)?,
            })
        })
        .on::<q::Demands>(|r| {
            validate_address("transfer_agent", &r.transfer_agent)?;
            // At most MAX_DEMANDS (100): see `q::demands_limit`.
            let limit = usize::try_from(q::demands_limit(r.limit)).unwrap_or(usize::MAX);
            Ok(pb::QueryDemandsResponse {
                demands: state.agent_demands(
                    &r.transfer_agent,
                    (r.start_batch_id, r.start_index),
                    limit,
                )?,
            })
        })
        .on::<q::Params>(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.settlement_params()?),
            })
        })
        .answer()
}
