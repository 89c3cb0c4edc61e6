//! Stake queries: `/stake/participants`, `/stake/participant`, `/stake/unbonding`,
//! `/stake/work`, `/stake/params`.

use gonka_proto::stake::{
    QueryParamsRequest, QueryParamsResponse, QueryParticipantRequest, QueryParticipantResponse,
    QueryParticipantsRequest, QueryParticipantsResponse, QueryUnbondingRequest,
    QueryUnbondingResponse, QueryWorkRequest, QueryWorkResponse,
};
use gonka_sdk::{decode_request, Result, StateRead};
use prost::Message;

use crate::StakeRead;

/// Dispatches `path`; `None` if it is not a stake path.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    let answer = match path {
        "/stake/participants" => decode_request::<QueryParticipantsRequest>(data).and_then(|_| {
            Ok(QueryParticipantsResponse {
                participants: state.participants()?,
            }
            .encode_to_vec())
        }),
        "/stake/participant" => decode_request::<QueryParticipantRequest>(data).and_then(|r| {
            Ok(QueryParticipantResponse {
                participant: Some(state.existing_participant(&r.operator)?),
            }
            .encode_to_vec())
        }),
        "/stake/unbonding" => decode_request::<QueryUnbondingRequest>(data).and_then(|r| {
            let entries = state
                .unbonding_entries()?
                .into_iter()
                .filter(|e| r.operator.is_empty() || e.operator == r.operator)
                .collect();
            Ok(QueryUnbondingResponse { entries }.encode_to_vec())
        }),
        "/stake/work" => decode_request::<QueryWorkRequest>(data).and_then(|r| {
            Ok(QueryWorkResponse {
                credits: state.work_credits(r.epoch)?,
            }
            .encode_to_vec())
        }),
        "/stake/params" => decode_request::<QueryParamsRequest>(data).and_then(|_| {
            Ok(QueryParamsResponse {
                params: Some(state.stake_params()?.to_proto()),
            }
            .encode_to_vec())
        }),
        _ => return None,
    };
    Some(answer)
}
