//! Typed access to epochs state.

use gonka_proto::epochs::{Epoch, Params};
use gonka_sdk::{Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::{default_params, keys};

/// Reads of epochs state.
pub trait EpochsRead: StateRead {
    /// Current parameters.
    fn epochs_params(&self) -> Result<Params> {
        Ok(self
            .get_proto(&keys::params())?
            .unwrap_or_else(default_params))
    }

    /// The running epoch (epoch 0 from height 1 if genesis set none).
    fn current_epoch(&self) -> Result<Epoch> {
        Ok(self.get_proto(&keys::current())?.unwrap_or(Epoch {
            number: 0,
            start_height: 1,
            ..Default::default()
        }))
    }

    /// A finished epoch.
    fn finished_epoch(&self, number: u64) -> Result<Option<Epoch>> {
        self.get_proto(&keys::history(number))
    }
}

impl<T: StateRead + ?Sized> EpochsRead for T {}

/// Writes of epochs state.
pub trait EpochsWrite: StateWrite {
    /// Replaces the parameters.
    fn put_epochs_params(&mut self, params: &Params) {
        self.put_proto(keys::params(), params);
    }

    /// Replaces the running epoch.
    fn put_current_epoch(&mut self, epoch: &Epoch) {
        self.put_proto(keys::current(), epoch);
    }

    /// Stores a finished epoch in the history.
    fn put_finished_epoch(&mut self, epoch: &Epoch) {
        self.put_proto(keys::history(epoch.number), epoch);
    }
}

impl<T: StateWrite + ?Sized> EpochsWrite for T {}

/// Number of the running epoch: what other modules credit work to.
pub fn current(state: &dyn StateRead) -> Result<u64> {
    Ok(state.current_epoch()?.number)
}
