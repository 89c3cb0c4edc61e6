//! Inference messages: one file per message, plus the checks they share.

mod register_node;
mod register_transfer_agent;
mod remove_node;
mod update_node;

use gonka_auth::validate_address;
use gonka_proto::ids::{is_valid_node_id, MAX_NODE_CONCURRENCY, NODE_ID_RULE};
use gonka_proto::inference::Node;
pub(crate) use gonka_sdk::validate_url;
use gonka_sdk::{Any, ErrorCode, Msg, Result, StateRead};
use gonka_stake::StakeRead;

use crate::{node_key_proof_bytes, parse_pubkey, signature_ok, InferenceError, InferenceRead};

/// Decodes an inference message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    register_node::decode(msg)
        .or_else(|| update_node::decode(msg))
        .or_else(|| remove_node::decode(msg))
        .or_else(|| register_transfer_agent::decode(msg))
}

/// Model ids: 1 to 128 printable ASCII characters without spaces (`/` allowed, as in
/// `Qwen/Qwen2.5-7B-Instruct`).
pub fn validate_model_id(field: &str, id: &str) -> Result<()> {
    let ok = !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(InferenceError::UnknownModel.err(format!(
            "{field} {id:?} must be 1 to 128 printable ASCII characters without spaces"
        )))
    }
}

/// Node ids: [`gonka_proto::ids::is_valid_node_id`].
pub fn validate_node_id(field: &str, id: &str) -> Result<()> {
    if is_valid_node_id(id) {
        Ok(())
    } else {
        Err(InferenceError::InvalidNode.err(format!("{field} {id:?} must be {NODE_ID_RULE}")))
    }
}

/// A 33-byte compressed SEC1 secp256k1 public key.
pub(crate) fn validate_pubkey(field: &str, key: &[u8]) -> Result<(), String> {
    if key.len() == 33 && parse_pubkey(key).is_some() {
        Ok(())
    } else {
        Err(format!(
            "{field} must be a 33-byte compressed secp256k1 public key, found {} bytes{}",
            key.len(),
            if key.len() == 33 {
                " that are not a curve point"
            } else {
                ""
            }
        ))
    }
}

/// Stateless checks of the node a `MsgRegisterNode` / `MsgUpdateNode` carries; the node as
/// it would be stored (models sorted).
pub(crate) fn node_from(node: Option<Node>) -> Result<Node> {
    let fields = node.ok_or_else(|| {
        InferenceError::InvalidNode.err("the message carries no node; set its `node` field")
    })?;
    validate_address("host", &fields.host)?;
    validate_node_id("node_id", &fields.id)?;
    if fields.models.is_empty() || fields.models.len() > 64 {
        return Err(InferenceError::InvalidNode.err(format!(
            "node {} must serve 1 to 64 models, found {}",
            fields.id,
            fields.models.len()
        )));
    }
    let mut models = fields.models;
    for model in &models {
        validate_model_id("models[]", model)?;
    }
    models.sort();
    if let Some(pair) = models.windows(2).find(|w| w[0] == w[1]) {
        return Err(InferenceError::InvalidNode.err(format!(
            "node {} lists model {} more than once",
            fields.id, pair[0]
        )));
    }
    if fields.max_concurrency == 0 || fields.max_concurrency > MAX_NODE_CONCURRENCY {
        return Err(InferenceError::InvalidNode.err(format!(
            "node {} must accept 1 to {MAX_NODE_CONCURRENCY} concurrent requests, found \
             max_concurrency {}",
            fields.id, fields.max_concurrency
        )));
    }
    validate_url("endpoint", &fields.endpoint)
        .map_err(|log| InferenceError::InvalidNode.err(log))?;
    validate_pubkey("pubkey", &fields.pubkey)
        .map_err(|log| InferenceError::InvalidNode.err(log))?;
    Ok(Node { models, ..fields })
}

/// Stateful checks of a node: its host is staked, its key is its own (proof of possession on
/// `chain_id`) and no other node's, every model is priced and fits its VRAM.
fn check_node(state: &dyn StateRead, chain_id: &str, node: &Node) -> Result<()> {
    require_staked(state, &node.host, "host of an ML node")?;
    let proof = node_key_proof_bytes(chain_id, &node.host, &node.id, &node.pubkey);
    if !signature_ok(&node.pubkey, &proof, &node.key_proof) {
        return Err(InferenceError::InvalidKeyProof.err(format!(
            "node {}: key_proof ({} bytes) is not the node key's signature over gonka/node-key/v1 (chain {chain_id}, host {}, node {}, its public key); sign it with the node's key",
            node.id,
            node.key_proof.len(),
            node.host,
            node.id
        )));
    }
    check_key_unique(state, node)?;
    for id in &node.models {
        let model = state.model(id)?.ok_or_else(|| {
            InferenceError::UnknownModel.err(format!(
                "node {} serves model {id}, which the chain does not price; see /inference/models",
                node.id
            ))
        })?;
        if node.vram_mib < model.min_vram_mib {
            return Err(InferenceError::InsufficientVram.err(format!(
                "model {id} needs at least {} MiB of VRAM but node {} declares {} MiB",
                model.min_vram_mib, node.id, node.vram_mib
            )));
        }
    }
    Ok(())
}

/// No node other than `node` is registered with `node`'s public key.
pub(crate) fn check_key_unique(state: &dyn StateRead, node: &Node) -> Result<()> {
    match state.node_with_key(&node.pubkey)? {
        Some(other) if other != node.id => Err(InferenceError::DuplicateNodeKey.err(format!(
            "node {}: its public key is already registered for node {other}; every node needs its own key",
            node.id
        ))),
        _ => Ok(()),
    }
}

/// `address` must be a participant, not jailed, with bonded ≥ `min_stake` (error
/// [`InferenceError::NotStaked`] naming `role`).
pub fn require_staked(state: &dyn StateRead, address: &str, role: &str) -> Result<()> {
    let min_stake = state.stake_params()?.min_stake;
    let Some(participant) = state.participant(address)? else {
        return Err(InferenceError::NotStaked.err(format!(
            "{address} is not a participant; the {role} must first stake at least {min_stake}ngnk"
        )));
    };
    if participant.jailed {
        return Err(InferenceError::NotStaked.err(format!(
            "participant {address} is jailed until epoch {} and cannot act as {role}",
            participant.jailed_until_epoch
        )));
    }
    let bonded = gonka_stake::bonded(&participant)?;
    if bonded < min_stake {
        return Err(InferenceError::NotStaked.err(format!(
            "participant {address} has {bonded}ngnk bonded but the {role} needs at least {min_stake}ngnk"
        )));
    }
    Ok(())
}
