//! Rewards queries ([`gonka_proto::query::rewards`]).

use gonka_auth::validate_address;
use gonka_proto::query::rewards as q;
use gonka_proto::rewards::{
    QueryEpochRewardsResponse, QueryParamsResponse, QueryParticipantRewardsResponse,
};
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{RewardsError, RewardsRead};

/// Answers a rewards query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Epoch>(|request| epoch(state, request.epoch))
        .on::<q::Participant>(|request| {
            validate_address("operator", &request.operator)?;
            Ok(QueryParticipantRewardsResponse {
                rewards: state.participant_rewards(&request.operator)?,
            })
        })
        .on::<q::Params>(|_| {
            Ok(QueryParamsResponse {
                params: Some(state.rewards_params_proto()?),
            })
        })
        .answer()
}

fn epoch(state: &dyn StateRead, epoch: u64) -> Result<QueryEpochRewardsResponse> {
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
    })
}
