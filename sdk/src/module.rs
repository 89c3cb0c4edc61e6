//! The interface every chain module implements.

use crate::{Any, BlockContext, GenesisJson, Result, StateRead, StateWrite, TxContext};

/// A decoded, statelessly validated message, ready to execute.
pub trait Msg: Send {
    /// Bech32 address that must have signed the transaction carrying this message.
    fn signer(&self) -> &str;
    /// Stateful checks then execution. Runs in a fork of the block state: an error
    /// discards every write made here. Every read and write of `state` is charged to the
    /// tx's gas; other costly work (a signature check) is charged with `ctx.gas` before it
    /// runs, and after the cheap checks that can refuse the message.
    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()>;
    /// Whether this is a duty: work the chain asked of its sender by a deadline, which it
    /// is punished for missing (a reveal, a vote, a validation, a demanded leaf, a DKG
    /// message, a checkpoint or its verification). A proposer puts transactions of duties
    /// only first in its block, so stuffing blocks cannot make their senders miss deadlines.
    fn is_duty(&self) -> bool {
        false
    }
}

/// A change of one validator's voting power, returned to CometBFT at the end of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatorUpdate {
    /// Ed25519 consensus public key.
    pub ed25519_pub_key: [u8; 32],
    /// New voting power; zero removes the validator.
    pub power: i64,
}

/// What a module's genesis import, `end_block` or `end_epoch` hands back to the app besides
/// state writes and events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutput {
    /// Validator power changes for CometBFT.
    pub validator_updates: Vec<ValidatorUpdate>,
}

/// A chain module. The app calls modules in the fixed order it registers them in
/// (see `gonka_app::modules`), for every hook. Its name and genesis come from its
/// [`crate::Genesis`] implementation.
pub trait Module: GenesisJson + Send + Sync {
    /// Decodes and statelessly validates `msg` if its type URL belongs to this module;
    /// `None` if it does not (the default, for modules without messages).
    fn decode_msg(&self, _msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        None
    }

    /// Runs before the block's transactions.
    fn begin_block(&self, _ctx: &BlockContext, _state: &mut dyn StateWrite) -> Result<()> {
        Ok(())
    }

    /// Runs after the block's transactions.
    fn end_block(&self, _ctx: &BlockContext, _state: &mut dyn StateWrite) -> Result<HookOutput> {
        Ok(HookOutput::default())
    }

    /// Runs in the last block of epoch `epoch`, after `end_block` of every module and
    /// before the next epoch starts (so "the current epoch" is still `epoch`).
    fn end_epoch(
        &self,
        _ctx: &BlockContext,
        _epoch: u64,
        _state: &mut dyn StateWrite,
    ) -> Result<HookOutput> {
        Ok(HookOutput::default())
    }

    /// Answers `path` (e.g. `/bank/balance` or a `/cosmos.bank.v1beta1.Query/...` path) with
    /// protobuf `data`; `None` if the path is not this module's.
    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>>;
}
