//! Epochs events.

use gonka_proto::epochs::Epoch;
use gonka_sdk::Event;

/// `epoch_started`: emitted by the epoch's first block.
pub fn started(epoch: &Epoch) -> Event {
    Event::new("epoch_started")
        .attr("epoch", epoch.number)
        .attr("start_height", epoch.start_height)
        .attr("start_time", epoch.start_time)
}

/// `epoch_ended`: emitted by the epoch's last block, after every `end_epoch` hook.
pub fn ended(epoch: &Epoch) -> Event {
    Event::new("epoch_ended")
        .attr("epoch", epoch.number)
        .attr("start_height", epoch.start_height)
        .attr("end_height", epoch.end_height)
}
