//! Rewards events. Amounts carry their denom (`123ngnk`), like bank and stake events.

use gonka_proto::rewards::{EpochRewards, ParticipantReward};
use gonka_sdk::Event;

/// `rewards_settled`: how the closing epoch's emission and fees were split.
pub fn settled(rewards: &EpochRewards) -> Event {
    Event::new("rewards_settled")
        .attr("epoch", rewards.epoch)
        .attr("emission", format!("{}ngnk", rewards.emission))
        .attr("fees", format!("{}ngnk", rewards.fees))
        .attr(
            "validation_share",
            format!("{}ngnk", rewards.validation_share),
        )
        .attr("distributed", format!("{}ngnk", rewards.distributed))
        .attr("community", format!("{}ngnk", rewards.community))
        .attr("total_work", rewards.total_work)
}

/// `reward`: what one participant earned for its work in the closing epoch.
pub fn reward(reward: &ParticipantReward) -> Event {
    Event::new("reward")
        .attr("operator", &reward.operator)
        .attr("epoch", reward.epoch)
        .attr("amount", format!("{}ngnk", reward.amount))
        .attr("work", reward.work)
}
