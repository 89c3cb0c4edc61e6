//! Disputes queries ([`gonka_proto::query::disputes`]).

use gonka_proto::disputes as pb;
use gonka_proto::query::disputes as q;
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::sampling::sample_rate_ppm;
use crate::{kind, status, DisputesError, DisputesRead};

/// Answers a disputes query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Dispute>(|r| {
            let dispute = state.dispute(r.id)?.ok_or_else(|| {
                DisputesError::UnknownDispute.err(format!("no dispute with id {}", r.id))
            })?;
            Ok(pb::QueryDisputeResponse {
                dispute: Some(dispute),
            })
        })
        .on::<q::List>(|r| {
            let disputes = if r.status.is_empty() {
                state.all_disputes()?
            } else if status::DISPUTE_ALL.contains(&r.status.as_str()) {
                state.disputes_with_status(&r.status)?
            } else {
                return Err(DisputesError::InvalidMsg.err(format!(
                    "status must be empty or one of {}, found {:?}",
                    status::DISPUTE_ALL.join(", "),
                    r.status
                )));
            };
            Ok(pb::QueryDisputesResponse { disputes })
        })
        .on::<q::Participant>(|r| {
            Ok(pb::QueryParticipantDisputesResponse {
                disputes: state.disputes_of(&r.address)?,
            })
        })
        .on::<q::Pending>(|r| pending(state, &r.validator))
        .on::<q::Validation>(|r| {
            let validation = state.validation(&r.inference_id)?.ok_or_else(|| {
                DisputesError::NotSampled.err(format!(
                    "work record {:?} was not sampled for validation",
                    r.inference_id
                ))
            })?;
            Ok(pb::QueryValidationResponse {
                validation: Some(validation),
            })
        })
        .on::<q::Stats>(|r| {
            let executor = state.executor_stats(&r.address)?;
            Ok(pb::QueryStatsResponse {
                current_rate_ppm: sample_rate_ppm(&state.disputes_params()?, executor.clean_streak),
                executor: Some(executor),
                reputation: Some(state.reputation(&r.address)?),
            })
        })
        .on::<q::Params>(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.disputes_params()?),
            })
        })
        .answer()
}

/// Pending validations of `validator`, then open disputes on whose committee it has not
/// voted yet.
fn pending(state: &dyn StateRead, validator: &str) -> Result<pb::QueryPendingResponse> {
    let mut work: Vec<pb::PendingWork> = state
        .pending_validations(validator)?
        .into_iter()
        .map(|v| pb::PendingWork {
            kind: kind::VALIDATION.into(),
            inference_id: v.inference_id,
            dispute_id: 0,
            model: v.model,
            executor_node: v.executor_node,
            executor_host: v.executor_host,
            transfer_agent: v.transfer_agent,
            deadline_height: v.deadline_height,
        })
        .collect();
    for d in state.disputes_of(validator)? {
        let owes = d.status == status::OPEN
            && d.committee.iter().any(|m| m == validator)
            && !d.votes.iter().any(|v| v.voter == validator);
        if owes {
            work.push(pb::PendingWork {
                kind: "dispute".into(),
                inference_id: d.inference_id,
                dispute_id: d.id,
                model: d.model,
                executor_node: d.executor_node,
                executor_host: d.executor_host,
                transfer_agent: d.transfer_agent,
                deadline_height: d.deadline_height,
            });
        }
    }
    Ok(pb::QueryPendingResponse { work })
}
