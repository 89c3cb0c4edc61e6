//! x/rewards (being written).

use gonka_sdk::{Any, HookOutput, Module, Msg, Result, StateRead, StateWrite};

/// The rewards module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rewards;

impl Module for Rewards {
    fn name(&self) -> &'static str {
        "rewards"
    }
    fn init_genesis(&self, _: &mut dyn StateWrite, _: Option<&serde_json::Value>) -> Result<HookOutput> {
        Ok(HookOutput::default())
    }
    fn decode_msg(&self, _: &Any) -> Option<Result<Box<dyn Msg>>> {
        None
    }
    fn query(&self, _: &str, _: &[u8], _: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        None
    }
}
