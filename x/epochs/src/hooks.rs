//! Epoch boundaries.

use gonka_proto::epochs::Epoch;
use gonka_sdk::{BlockContext, Result, StateWrite};

use crate::{events, EpochsRead, EpochsWrite};

/// In an epoch's first block, records its start time and emits `epoch_started`.
pub fn begin_block(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    let mut epoch = state.current_epoch()?;
    if epoch.start_height == ctx.height {
        epoch.start_time = ctx.time_seconds;
        state.put_current_epoch(&epoch);
        state.emit(events::started(&epoch));
    }
    Ok(())
}

/// The epoch that ends with block `height`, if one does.
pub fn ends_at(state: &dyn gonka_sdk::StateRead, height: u64) -> Result<Option<u64>> {
    let epoch = state.current_epoch()?;
    let length = state.epochs_params()?.epoch_length;
    // start_height + length - 1 cannot overflow for any height CometBFT can reach.
    Ok((height == epoch.start_height + length - 1).then_some(epoch.number))
}

/// Closes the running epoch at block `ctx` (after every module's `end_epoch`), stores it in
/// the history and opens the next one at the following height.
pub fn advance(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<Epoch> {
    let mut closed = state.current_epoch()?;
    closed.end_height = ctx.height;
    closed.end_time = ctx.time_seconds;
    state.put_finished_epoch(&closed);
    state.emit(events::ended(&closed));
    let next = Epoch {
        number: closed.number + 1,
        start_height: ctx.height + 1,
        ..Default::default()
    };
    state.put_current_epoch(&next);
    Ok(next)
}
