//! Typed access to rewards state, and the module accounts rewards move funds through.
//! Other crates read through these traits, never through the keys.

use gonka_auth::module_address;
use gonka_proto::query::page::PageRequest;
use gonka_proto::rewards::{EpochRewards, Params, ParticipantReward};
use gonka_sdk::{
    paginate, paginate_proto, Page, Result, StateRead, StateReadExt, StateWrite, StateWriteExt,
};

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

/// Reads of rewards state.
pub trait RewardsRead: StateRead {
    /// The stored parameters in wire form (the defaults if genesis stored none).
    fn rewards_params_proto(&self) -> Result<Params> {
        Ok(self
            .get_proto(&keys::params())?
            .unwrap_or_else(default_params))
    }

    /// The stored parameters, parsed.
    fn rewards_params(&self) -> Result<RewardsParams> {
        RewardsParams::from_proto(&self.rewards_params_proto()?)
    }

    /// How `epoch` was settled; `None` until its last block has run.
    fn epoch_rewards(&self, epoch: u64) -> Result<Option<EpochRewards>> {
        self.get_proto(&keys::epoch(epoch))
    }

    /// Every reward `operator` has earned, ascending by epoch.
    fn participant_rewards(&self, operator: &str) -> Result<Vec<ParticipantReward>> {
        Ok(self
            .prefix_proto(&keys::participant_rewards(operator))?
            .into_iter()
            .map(|(_, reward)| reward)
            .collect())
    }

    /// One page of the rewards of `operator`, ascending by epoch.
    fn participant_rewards_page(
        &self,
        operator: &str,
        page: Option<&PageRequest>,
    ) -> Result<Page<ParticipantReward>> {
        paginate_proto(self, &keys::participant_rewards(operator), page, |_, r| {
            Ok(Some(r))
        })
    }

    /// One page of the participant rewards of `epoch`, ascending by operator address.
    fn epoch_participant_rewards_page(
        &self,
        epoch: u64,
        page: Option<&PageRequest>,
    ) -> Result<Page<ParticipantReward>> {
        paginate(self, &keys::payees(epoch), page, |_, operator| {
            let operator = String::from_utf8_lossy(operator);
            self.get_proto(&keys::participant_reward(&operator, epoch))
        })
    }

    /// Every participant reward of `epoch`, ascending by operator address.
    fn epoch_participant_rewards(&self, epoch: u64) -> Result<Vec<ParticipantReward>> {
        let mut rewards = Vec::new();
        for (_, operator) in self.prefix_raw(&keys::payees(epoch))? {
            let operator = String::from_utf8_lossy(&operator);
            if let Some(reward) = self.get_proto(&keys::participant_reward(&operator, epoch))? {
                rewards.push(reward);
            }
        }
        Ok(rewards)
    }
}

impl<T: StateRead + ?Sized> RewardsRead for T {}

/// Writes of rewards state.
pub trait RewardsWrite: StateWrite {
    /// Stores the parameters.
    fn put_rewards_params(&mut self, params: &Params) {
        self.put_proto(keys::params(), params);
    }

    /// Stores how an epoch was settled.
    fn put_epoch_rewards(&mut self, rewards: &EpochRewards) {
        self.put_proto(keys::epoch(rewards.epoch), rewards);
    }

    /// Stores one participant's reward and indexes it under its epoch.
    fn put_participant_reward(&mut self, reward: &ParticipantReward) {
        self.put_proto(
            keys::participant_reward(&reward.operator, reward.epoch),
            reward,
        );
        self.put_raw(
            keys::payee(reward.epoch, &reward.operator),
            reward.operator.as_bytes().to_vec(),
        );
    }
}

impl<T: StateWrite + ?Sized> RewardsWrite for T {}
