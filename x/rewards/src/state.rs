//! Typed access to rewards state, and the module accounts rewards move funds through.
//! Other crates read through these functions, never through the keys.

use gonka_auth::module_address;
use gonka_proto::rewards::{EpochRewards, Params, ParticipantReward};
use gonka_sdk::{Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::{default_params, keys, RewardsParams, COMMUNITY_POOL, REWARDS_POOL, VALIDATION_POOL};

/// Address of the module account each epoch's emission is minted into and its fees are
/// gathered in before they are paid out (it is empty again after every settlement).
pub fn rewards_pool_address() -> String {
    module_address(REWARDS_POOL)
}

/// Address of the community pool: rounding dust, and everything of an epoch without work.
pub fn community_pool_address() -> String {
    module_address(COMMUNITY_POOL)
}

/// Address of the validation pool: the `validation_share_ppm` part of every epoch.
pub fn validation_pool_address() -> String {
    module_address(VALIDATION_POOL)
}

/// The stored parameters in wire form (the defaults if genesis stored none).
pub fn params_proto(state: &(impl StateRead + ?Sized)) -> Result<Params> {
    Ok(state
        .get_proto(&keys::params())?
        .unwrap_or_else(default_params))
}

/// The stored parameters, parsed.
pub fn params(state: &(impl StateRead + ?Sized)) -> Result<RewardsParams> {
    RewardsParams::from_proto(&params_proto(state)?)
}

/// How `epoch` was settled; `None` until its last block has run.
pub fn epoch_rewards(
    state: &(impl StateRead + ?Sized),
    epoch: u64,
) -> Result<Option<EpochRewards>> {
    state.get_proto(&keys::epoch(epoch))
}

/// Every reward `operator` has earned, ascending by epoch.
pub fn participant_rewards(
    state: &(impl StateRead + ?Sized),
    operator: &str,
) -> Result<Vec<ParticipantReward>> {
    Ok(state
        .prefix_proto(&keys::participant_rewards(operator))?
        .into_iter()
        .map(|(_, reward)| reward)
        .collect())
}

/// Every participant reward of `epoch`, ascending by operator address.
pub fn epoch_participant_rewards(
    state: &(impl StateRead + ?Sized),
    epoch: u64,
) -> Result<Vec<ParticipantReward>> {
    let mut rewards = Vec::new();
    for (_, operator) in state.prefix_raw(&keys::payees(epoch))? {
        let operator = String::from_utf8_lossy(&operator);
        if let Some(reward) = state.get_proto(&keys::participant_reward(&operator, epoch))? {
            rewards.push(reward);
        }
    }
    Ok(rewards)
}

/// Stores the parameters.
pub(crate) fn put_params(state: &mut (impl StateWrite + ?Sized), params: &Params) {
    state.put_proto(keys::params(), params);
}

/// Stores how an epoch was settled.
pub(crate) fn put_epoch_rewards(state: &mut (impl StateWrite + ?Sized), rewards: &EpochRewards) {
    state.put_proto(keys::epoch(rewards.epoch), rewards);
}

/// Stores one participant's reward and indexes it under its epoch.
pub(crate) fn put_participant_reward(
    state: &mut (impl StateWrite + ?Sized),
    reward: &ParticipantReward,
) {
    state.put_proto(
        keys::participant_reward(&reward.operator, reward.epoch),
        reward,
    );
    state.put_raw(
        keys::payee(reward.epoch, &reward.operator),
        reward.operator.as_bytes().to_vec(),
    );
}
