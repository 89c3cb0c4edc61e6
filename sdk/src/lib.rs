//! gonka-sdk: what every chain module is written against.
//!
//! - [`Module`] and [`Msg`]: the module interface the app drives (block hooks, messages,
//!   queries, and `end_epoch` for the epoch machinery); [`Genesis`]: its typed genesis
//!   section, imported and exported.
//! - [`StateRead`] / [`StateWrite`] and their typed extensions: the only way modules touch
//!   state; [`Delta`] forks state so a failing transaction changes nothing.
//! - [`GasMeter`] / [`GasState`]: what a transaction's bytes, signature checks and state
//!   access cost, held to the tx's gas limit.
//! - [`paginate`] / [`Pager`]: one bounded page of a list query, read by a range scan.
//! - [`Event`]: typed events with indexed attributes, surfaced to CometBFT.
//! - [`Error`] / [`ErrorCode`]: one error type with code, codespace and a readable log.

mod context;
mod error;
mod events;
mod gas;
mod genesis;
mod module;
mod page;
mod query;
mod state;

pub use context::{BlockContext, CommitVote, Misbehavior, TxContext};
pub use error::{Error, ErrorCode, Result, SdkError};
pub use events::{Event, EventAttribute};
pub use gas::{GasCosts, GasMeter, GasState};
pub use genesis::{Genesis, GenesisJson};
pub use gonka_proto::query::Query;
pub use module::{HookOutput, Module, Msg, ValidatorUpdate};
pub use page::{assert_pages, paginate, paginate_proto, walk_pages, Page, Pager};
pub use query::QueryRouter;
pub use state::{
    Delta, MemoryState, Overlay, StateRead, StateReadExt, StateWrite, StateWriteExt, StoreAt,
};

/// The Any type used in transactions and queries (shared with cosmrs and tendermint-proto).
pub use tendermint_proto::google::protobuf::Any;

/// Parses a decimal u128 amount, naming the field in the error.
pub fn parse_amount(field: &str, text: &str) -> Result<u128> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SdkError::InvalidAmount.err(format!(
            "{field} must be a non-negative decimal integer, found {text:?}"
        )));
    }
    text.parse::<u128>().map_err(|_| {
        SdkError::AmountOverflow.err(format!(
            "{field} {text} does not fit in 128 bits (max {})",
            u128::MAX
        ))
    })
}

/// An `http://` or `https://` URL of at most 256 printable characters (an endpoint a module
/// stores for others to call); the error names `field`.
pub fn validate_url(field: &str, url: &str) -> std::result::Result<(), String> {
    let scheme = url.starts_with("http://") || url.starts_with("https://");
    if scheme && url.len() <= 256 && url.bytes().all(|b| b.is_ascii_graphic()) && url.len() > 8 {
        Ok(())
    } else {
        Err(format!(
            "{field} {url:?} must be an http:// or https:// URL of at most 256 printable characters"
        ))
    }
}

/// The Cosmos-style type URL of a message, `/<package>.<Name>` (no domain).
pub fn type_url<M: prost::Name>() -> String {
    format!("/{}", M::full_name())
}

/// Decodes `msg` as `M` if its type URL is `M`'s; `None` if it is another message type.
pub fn decode_as<M: prost::Message + Default + prost::Name>(msg: &Any) -> Option<Result<M>> {
    (msg.type_url == type_url::<M>()).then(|| {
        M::decode(msg.value.as_slice()).map_err(|e| {
            SdkError::Decode.err(format!(
                "{} is not a valid {}: {e}",
                msg.type_url,
                M::full_name()
            ))
        })
    })
}

/// Parts per million: the unit of every fraction in params (`slash_fraction_ppm`, ...).
pub const PPM: u64 = 1_000_000;
