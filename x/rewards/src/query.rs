//! Rewards queries ([`gonka_proto::query::rewards`]).

use gonka_auth::validate_address;
use gonka_proto::query::page::PageRequest;
use gonka_proto::query::rewards as q;
use gonka_proto::rewards::{
    QueryEpochRewardsResponse, QueryParamsResponse, QueryParticipantRewardsResponse,
};
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{RewardsError, RewardsRead};

/// Answers a rewards query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Epoch>(|request| epoch(state, request.epoch, request.pagination.as_ref()))
        .on::<q::Participant>(|request| {
            validate_address("operator", &request.operator)?;
            let page =
                state.participant_rewards_page(&request.operator, request.pagination.as_ref())?;
            Ok(QueryParticipantRewardsResponse {
                rewards: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Params>(|_| {
            Ok(QueryParamsResponse {
                params: Some(state.rewards_params_proto()?),
            })
        })
        .answer()
}

fn epoch(
    state: &dyn StateRead,
    epoch: u64,
    page: Option<&PageRequest>,
) -> Result<QueryEpochRewardsResponse> {
    let Some(rewards) = state.epoch_rewards(epoch)? else {
        let current = gonka_epochs::current(state)?;
        return Err(RewardsError::NotSettled.err(format!(
            "rewards of epoch {epoch} are not settled: an epoch is settled in its last block \
             and the current epoch is {current}"
        )));
    };
    let page = state.epoch_participant_rewards_page(epoch, page)?;
    Ok(QueryEpochRewardsResponse {
        rewards: Some(rewards),
        participants: page.items,
        pagination: page.pagination,
    })
}

#[cfg(test)]
mod tests {
    use gonka_auth::module_address;
    use gonka_proto::rewards::{
        EpochRewards, ParticipantReward, QueryEpochRewardsRequest, QueryParticipantRewardsRequest,
    };
    use gonka_sdk::{assert_pages, Delta, MemoryState};

    use super::*;
    use crate::RewardsWrite;

    #[test]
    fn every_list_spans_its_pages() {
        let empty = MemoryState::default();
        let mut state = Delta::new(&empty);
        let mut operators: Vec<String> =
            (0..9).map(|i| module_address(&format!("op{i}"))).collect();
        operators.sort();
        for epoch in 0..8 {
            state.put_epoch_rewards(&EpochRewards {
                epoch,
                ..Default::default()
            });
            for (i, operator) in operators.iter().enumerate() {
                state.put_participant_reward(&ParticipantReward {
                    epoch,
                    operator: operator.clone(),
                    work: i as u64,
                    amount: (epoch * 100 + i as u64).to_string(),
                });
            }
        }
        let reward = |epoch: u64, i: usize| ParticipantReward {
            epoch,
            operator: operators[i].clone(),
            work: i as u64,
            amount: (epoch * 100 + i as u64).to_string(),
        };
        let route = |path: &str, data: &[u8]| route(path, data, &state);

        let of_epoch: Vec<_> = (0..operators.len()).map(|i| reward(6, i)).collect();
        let request = QueryEpochRewardsRequest {
            epoch: 6,
            ..Default::default()
        };
        assert_pages::<q::Epoch>(route, request, &of_epoch);
        let of_operator: Vec<_> = (0..8).map(|epoch| reward(epoch, 4)).collect();
        let request = QueryParticipantRewardsRequest {
            operator: operators[4].clone(),
            ..Default::default()
        };
        assert_pages::<q::Participant>(route, request, &of_operator);
    }
}
