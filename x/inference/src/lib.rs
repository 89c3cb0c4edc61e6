//! x/inference: the registry of ML nodes, transfer agents and models, and the work records
//! transfer agents submit. (Being written.)

use gonka_sdk::{Any, HookOutput, Module, Msg, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace and genesis section.
pub const NAME: &str = "inference";

/// The inference module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Inference;

impl Module for Inference {
    fn name(&self) -> &'static str {
        NAME
    }

    fn init_genesis(
        &self,
        _state: &mut dyn StateWrite,
        _genesis: Option<&serde_json::Value>,
    ) -> Result<HookOutput> {
        Ok(HookOutput::default())
    }

    fn decode_msg(&self, _msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        None
    }

    fn query(&self, _path: &str, _data: &[u8], _state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        None
    }
}
