//! x/bls: participants' BLS12-381 keys, the base of the threshold group keys, the randomness
//! beacon and the epoch certificates (see `gonka_bls_crypto` for the scheme: min-pk, the
//! IETF `_POP_` ciphersuite).
//!
//! ## Keys (`MsgRegisterBlsKey`)
//! - Any stake participant registers one BLS key: hosts need it to co-sign settlement
//!   batches, and validators to take part in the distributed key generation.
//! - The key comes with a proof of possession: its signature under the `_POP_` DST over
//!   `gonka/bls-pop/v1` (chain id, address, key; [`gonka_proto::signing::bls_pop_bytes`]).
//!   Possession stops rogue-key attacks on aggregated signatures; binding the address stops
//!   anyone from registering a key copied out of another participant's registration first.
//! - A key belongs to one participant (disputes nothing: a second registrant is refused).
//! - **Rotation**: registering again replaces the participant's key and frees the old one.
//!   A distributed key generation uses the keys registered when it starts, so a rotation
//!   takes effect from the next one.
//! - The cheap checks (stateless encoding, participant, uniqueness) run before the pairing
//!   check, which is charged `sig_verify_cost_bls12_381` gas first.
//!
//! Queries: `/bls/key`, `/bls/keys`. Error codes: [`BlsError`].

mod errors;
mod events;
mod genesis;
mod keys;
mod msgs;
mod query;
mod state;

pub use errors::BlsError;
pub use state::{BlsRead, BlsWrite};

use gonka_sdk::{Any, Module, Msg, Result, StateRead};

/// Module name: key namespace, codespace, query prefix and genesis section.
pub const NAME: &str = "bls";

/// The bls module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Bls;

impl Module for Bls {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
