//! Typed genesis sections. A module states its section's type and how to import and export
//! it ([`Genesis`]); the JSON of `app_state` is parsed and written here, once, for every
//! module ([`GenesisJson`]).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{ErrorCode, HookOutput, Result, SdkError, StateRead, StateWrite};

/// A module's typed genesis section.
///
/// Export gives a genesis a new chain can start from (a "zero-height" export): whatever the
/// section's type can carry of the current state. Importing an export and exporting again
/// gives the same section.
pub trait Genesis {
    /// The module's name: its section of `app_state`.
    const NAME: &'static str;
    /// The section's type (the module's protobuf `GenesisState`; absent fields default).
    type State: Serialize + DeserializeOwned + Default;

    /// Validates and imports the section. Validator updates returned here form the initial
    /// validator set given to CometBFT.
    fn init_genesis(&self, state: &mut dyn StateWrite, genesis: Self::State) -> Result<HookOutput>;

    /// The section for a new chain that continues from `state`.
    fn export_genesis(&self, state: &dyn StateRead) -> Result<Self::State>;
}

/// Implements [`Genesis`] for a module without state of its own to import or export (its
/// section is `null`): `gonka_sdk::impl_no_genesis!(WorkOracle, "work_oracle");`.
#[macro_export]
macro_rules! impl_no_genesis {
    ($module:ty, $name:literal) => {
        impl $crate::Genesis for $module {
            const NAME: &'static str = $name;
            type State = ();

            fn init_genesis(
                &self,
                _state: &mut dyn $crate::StateWrite,
                _genesis: (),
            ) -> $crate::Result<$crate::HookOutput> {
                Ok($crate::HookOutput::default())
            }

            fn export_genesis(&self, _state: &dyn $crate::StateRead) -> $crate::Result<()> {
                Ok(())
            }
        }
    };
}

/// The JSON face of [`Genesis`], which the app drives through `dyn Module`; every
/// [`Genesis`] implements it.
pub trait GenesisJson {
    /// Module name: key namespace, codespace, query path prefix and genesis section.
    fn name(&self) -> &'static str;

    /// Imports the module's section of genesis `app_state` (`None` if absent: the defaults).
    fn init_genesis_json(
        &self,
        state: &mut dyn StateWrite,
        section: Option<&serde_json::Value>,
    ) -> Result<HookOutput>;

    /// Exports the module's section of `app_state`.
    fn export_genesis_json(&self, state: &dyn StateRead) -> Result<serde_json::Value>;
}

impl<G: Genesis> GenesisJson for G {
    fn name(&self) -> &'static str {
        G::NAME
    }

    fn init_genesis_json(
        &self,
        state: &mut dyn StateWrite,
        section: Option<&serde_json::Value>,
    ) -> Result<HookOutput> {
        let genesis = match section {
            None => G::State::default(),
            Some(value) => serde::Deserialize::deserialize(value).map_err(|e| {
                SdkError::InvalidGenesis.err(format!("app_state.{} is malformed: {e}", G::NAME))
            })?,
        };
        self.init_genesis(state, genesis)
    }

    fn export_genesis_json(&self, state: &dyn StateRead) -> Result<serde_json::Value> {
        serde_json::to_value(self.export_genesis(state)?)
            .map_err(|e| SdkError::Internal.err(format!("exporting app_state.{}: {e}", G::NAME)))
    }
}
