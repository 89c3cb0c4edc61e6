//! Stake queries ([`gonka_proto::query::stake`]).

use gonka_proto::query::stake as q;
use gonka_proto::stake::{
    QueryParamsResponse, QueryParticipantResponse, QueryParticipantsResponse,
    QueryUnbondingResponse, QueryWorkResponse,
};
use gonka_sdk::{QueryRouter, Result, StateRead};

use crate::StakeRead;

/// Answers a stake query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Participants>(|_| {
            Ok(QueryParticipantsResponse {
                participants: state.participants()?,
            })
        })
        .on::<q::Participant>(|r| {
            Ok(QueryParticipantResponse {
                participant: Some(state.existing_participant(&r.operator)?),
            })
        })
        .on::<q::Unbonding>(|r| {
            let entries = state
                .unbonding_entries()?
                .into_iter()
                .filter(|e| r.operator.is_empty() || e.operator == r.operator)
                .collect();
            Ok(QueryUnbondingResponse { entries })
        })
        .on::<q::Work>(|r| {
            Ok(QueryWorkResponse {
                credits: state.work_credits(r.epoch)?,
            })
        })
        .on::<q::Params>(|_| {
            Ok(QueryParamsResponse {
                params: Some(state.stake_params()?.to_proto()),
            })
        })
        .answer()
}
