//! x/inference: the registry of ML nodes, transfer agents and models, and the stored work
//! records.
//!
//! - Models are priced in genesis (`id`, `price_per_token` in ngnk, `min_vram_mib`), or
//!   published by x/pol when a training job completes (`gonka_proto::ids::TRAINED_MODEL_PREFIX`, with the
//!   SHA-256 of the weights its ML nodes load). Each says how its work is validated
//!   ([`Validation`]): by exact answers, or by top-k log-probabilities for inexact models,
//!   and what a token of it weighs (`work_per_token`: its compute per token, a reference-model
//!   token being 1; 0 counts as 1), which the work a settled record credits is multiplied by.
//! - A staked host (a participant, not jailed, bonded ≥ stake's `min_stake`) registers ML
//!   nodes (`MsgRegisterNode`, `MsgUpdateNode`, `MsgRemoveNode`): a globally unique id, the
//!   models served (each priced, each fitting the node's VRAM), capacity, endpoint and the
//!   node's secp256k1 key, which signs its responses. A staked participant registers as a
//!   transfer agent (`MsgRegisterTransferAgent`: public URL and key).
//! - Transfer agents settle served requests in committed batches (x/settlement); a leaf of a
//!   batch provided on chain (sampled, or demanded by someone) is stored here
//!   ([`InferenceWrite::put_record`]) for x/disputes to validate and its requester to dispute.
//!   `max_tokens_per_record` and the model prices bound what one leaf may claim and charge
//!   (x/settlement's `invalid_leaf` challenge).
//! - A participant whose bond falls below `min_stake` (unstake, slash) loses its nodes and its
//!   transfer agent registration at the end of that block (`hooks.rs`, event
//!   `host_deregistered`); until then a batch paying it or settled by it is already refused.
//!
//! ## Signed bytes
//! Defined once in [`gonka_proto::signing`]: the requester signs [`RequestTerms::hash`]
//! (request/v3: chain id, body hash, timestamp, commission, transfer agent, model, max price
//! per token, max completion tokens, max prompt tokens, nonce), which a challenge recomputes from the record and
//! the chain id; the executor ML node signs [`ReceiptTerms::sign_bytes`] (receipt/v2:
//! request hash, salted output commitment, token counts, node id, host) with its registered
//! key, whose possession the host proved at registration ([`node_key_proof_bytes`]).
//!
//! Queries: `/inference/models`, `/inference/nodes`, `/inference/node`,
//! `/inference/transfer_agents`, `/inference/record`, `/inference/records` (by epoch, or by
//! executor node within an epoch), `/inference/params`. Error codes: [`InferenceError`].

mod errors;
mod events;
mod genesis;
mod hooks;
mod keys;
mod msgs;
mod params;
mod query;
mod signing;
mod state;

pub use errors::InferenceError;
pub use msgs::{require_staked, validate_model_id, validate_node_id};
pub use params::{default_params, validate_params};
pub use signing::{
    body_hash, inference_id, node_key_proof_bytes, opens, parse_pubkey, response_hash,
    result_commitment, result_matches, signature_ok, text_output_commitment, ReceiptTerms,
    RequestTerms,
};
pub use state::{work_within, InferenceRead, InferenceWrite};

use gonka_proto::inference::Model;
use gonka_sdk::{Any, BlockContext, HookOutput, Module, Msg, Result, StateRead, StateWrite};

/// How a re-execution of a model's work is compared with the executor's answer
/// (`Model.validation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validation {
    /// `"exact"` (or empty): the SHA-256 of the answer text must be equal; for the bit-exact
    /// reference runtime.
    Exact,
    /// `"logprobs"`: an inexact model; both sides' top-k log-probabilities of the executor's
    /// tokens are compared per position against `logprob_threshold` ([`gonka_proto::scored`]).
    Logprobs,
}

/// The validation of `model`; `None` for a value the chain does not know (refused in
/// genesis).
pub fn validation_of(model: &Model) -> Option<Validation> {
    match model.validation.as_str() {
        "" | "exact" => Some(Validation::Exact),
        "logprobs" => Some(Validation::Logprobs),
        _ => None,
    }
}

/// Module name: key namespace, codespace and genesis section.
pub const NAME: &str = "inference";

/// The inference module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Inference;

impl Module for Inference {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    fn end_block(&self, _ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<HookOutput> {
        hooks::end_block(state)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
