//! x/epochs: the chain's clock of work.
//!
//! Epoch 0 starts with block 1; every epoch lasts `epoch_length` blocks. In the last block
//! of an epoch the app runs every module's `end_epoch` hook in module order (see
//! `gonka_app::modules`) while [`current`] still names the closing epoch, then calls
//! [`advance`], which records the closed epoch in the history, opens the next one and emits
//! `epoch_ended`. The next epoch's first block records its start time and emits
//! `epoch_started`.

mod errors;
mod events;
mod genesis;
mod hooks;
mod keys;
mod params;
mod query;
mod state;

pub use errors::EpochsError;
pub use hooks::{advance, ends_at};
pub use params::{default_params, validate_params};
pub use state::{current, EpochsRead, EpochsWrite};

use gonka_sdk::{BlockContext, Module, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace and genesis section.
pub const NAME: &str = "epochs";

/// The epochs module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Epochs;

impl Module for Epochs {
    fn begin_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
        hooks::begin_block(ctx, state)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
