//! Rewards queries: `/rewards/epoch`, `/rewards/participant`, `/rewards/params`.

use gonka_auth::validate_address;
use gonka_proto::rewards::{
    QueryEpochRewardsRequest, QueryEpochRewardsResponse, QueryParamsRequest, QueryParamsResponse,
    QueryParticipantRewardsRequest, QueryParticipantRewardsResponse,
};
use gonka_sdk::{decode_request, ErrorCode, Result, StateRead};
use prost::Message;

use crate::{RewardsError, RewardsRead};

/// Dispatches `path`; `None` if it is not a rewards path.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    let answer = match path {
        "/rewards/epoch" => decode_request::<QueryEpochRewardsRequest>(data)
            .and_then(|request| epoch(state, request.epoch)),
        "/rewards/participant" => {
            decode_request::<QueryParticipantRewardsRequest>(data).and_then(|request| {
                validate_address("operator", &request.operator)?;
                Ok(QueryParticipantRewardsResponse {
                    rewards: state.participant_rewards(&request.operator)?,
                }
                .encode_to_vec())
            })
        }
        "/rewards/params" => decode_request::<QueryParamsRequest>(data).and_then(|_| {
            Ok(QueryParamsResponse {
                params: Some(state.rewards_params_proto()?),
            }
            .encode_to_vec())
        }),
        _ => return None,
    };
    Some(answer)
}

fn epoch(state: &dyn StateRead, epoch: u64) -> Result<Vec<u8>> {
    let Some(rewards) = state.epoch_rewards(epoch)? else {
        let current = gonka_epochs::current(state)?;
        return Err(RewardsError::NotSettled.err(format!(
            "rewards of epoch {epoch} are not settled: an epoch is settled in its last block \
             and the current epoch is {current}"
        )));
    };
    Ok(QueryEpochRewardsResponse {
        rewards: Some(rewards),
        participants: state.epoch_participant_rewards(epoch)?,
    }
    .encode_to_vec())
}
