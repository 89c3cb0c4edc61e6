//! What each kind of challenge proves. Every function checks the proofs against the batch's
//! committed root first (an invalid proof is [`SettlementError::InvalidProof`]), then
//! returns `Ok(Some(fault))` when the batch is wrong, `Ok(None)` when the proven leaves show
//! no fault. Gas: one hash per proof node, charged before the hashing.

use gonka_auth::address_of_pubkey;
use gonka_inference::{inference_id, signature_ok, InferenceRead, ReceiptTerms, RequestTerms};
use gonka_proto::batch::{
    leaf_charge, leaf_hash, leaf_node, leaf_work, parent_hash, parse_decimal, siblings_from_proto,
    verify_path, Committed, SumNode,
};
use gonka_proto::settlement::{
    Batch, BatchLeaf, HostMismatch, LeafProof, RequesterMismatch, SumMismatch, UnsortedLeaves,
};
use gonka_sdk::{ErrorCode, GasMeter, Result, StateRead};

use crate::ledger::settled;
use crate::{SettlementError, SettlementRead};

/// Gas per hash of a proof (a leaf's hash counts as one per 64 bytes).
pub const GAS_PER_HASH: u64 = 30;

/// A fault the challenge proved, and the host to slash with the transfer agent: one whose
/// own receipt is on the bad leaf (it executed that record and co-signed the batch), never
/// a host a transfer agent merely named on a leaf it made up.
pub struct Fault {
    /// What was wrong, for the `batch_voided` event and the batch's `voided_reason`.
    pub reason: String,
    /// A host to slash along with the transfer agent.
    pub host: Option<String>,
}

/// A leaf proven to be at `index` of its batch, with its charge and prefix.
pub struct Proven<'a> {
    pub index: u64,
    pub leaf: &'a BatchLeaf,
    pub charge: u128,
    /// The work units the leaf credits its host, at the `work_per_token` it carries (which
    /// an `invalid_leaf` challenge holds to the model table's).
    pub work: u64,
    pub prefix: u128,
}

impl Proven<'_> {
    fn requester(&self) -> &str {
        self.leaf
            .record
            .as_ref()
            .map_or("", |r| r.requester.as_str())
    }

    fn id(&self) -> &str {
        self.leaf
            .record
            .as_ref()
            .map_or("", |r| r.inference_id.as_str())
    }

    fn host(&self) -> &str {
        &self.leaf.executor_host
    }
}

fn bad_proof(log: String) -> gonka_sdk::Error {
    SettlementError::InvalidProof.err(log)
}

/// Checks a node proof: gas, then the path to `batch`'s root; the node's prefix.
fn check_path(
    gas: &GasMeter,
    batch: &Batch,
    level: u32,
    index: u64,
    node: SumNode,
    siblings: &[gonka_proto::settlement::SumNode],
) -> Result<u128> {
    gas.consume(GAS_PER_HASH * (siblings.len() as u64 + 1), "batch proof")?;
    let msg = settled(batch);
    let siblings = siblings_from_proto(siblings)
        .ok_or_else(|| bad_proof("a proof node is malformed or the proof is too long".into()))?;
    let committed = Committed::of(msg).ok_or_else(|| bad_proof("stored root or total".into()))?;
    verify_path(&committed, level, index, node, &siblings).ok_or_else(|| {
        bad_proof(format!(
            "the node at level {level}, index {index} does not lead to batch {}'s root through the given siblings",
            batch.id
        ))
    })
}

/// Checks a leaf proof against `batch`.
pub fn prove<'a>(gas: &GasMeter, batch: &Batch, proof: &'a LeafProof) -> Result<Proven<'a>> {
    let leaf = proof
        .leaf
        .as_ref()
        .ok_or_else(|| bad_proof(format!("leaf proof {} carries no leaf", proof.index)))?;
    let encoded = prost::Message::encoded_len(leaf) as u64;
    gas.consume(GAS_PER_HASH * encoded.div_ceil(64), "batch leaf hash")?;
    let node = leaf_node(leaf).ok_or_else(|| {
        bad_proof(format!(
            "leaf {}'s charge is malformed or its work overflows; challenge its node with sum_mismatch",
            proof.index
        ))
    })?;
    if leaf.record.is_none() {
        return Err(bad_proof(format!("leaf {} carries no record", proof.index)));
    }
    let prefix = check_path(gas, batch, 0, proof.index, node, &proof.siblings)?;
    Ok(Proven {
        index: proof.index,
        leaf,
        charge: node.sum,
        work: node.work,
        prefix,
    })
}

fn optional<'a>(
    gas: &GasMeter,
    batch: &Batch,
    proof: &'a Option<LeafProof>,
) -> Result<Option<Proven<'a>>> {
    proof.as_ref().map(|p| prove(gas, batch, p)).transpose()
}

/// The leaf's host if the leaf carries that host's receipt: its executor node is registered
/// to the host and the executor signature verifies with the node's key (one signature's gas).
fn signing_host(gas: &GasMeter, state: &dyn StateRead, leaf: &BatchLeaf) -> Result<Option<String>> {
    let Some(record) = leaf.record.as_ref() else {
        return Ok(None);
    };
    let Some(node) = state.node(&record.executor_node)? else {
        return Ok(None);
    };
    let (Ok(request_hash), Ok(output_commitment)) = (
        <[u8; 32]>::try_from(record.request_hash.as_slice()),
        <[u8; 32]>::try_from(record.output_commitment.as_slice()),
    ) else {
        return Ok(None);
    };
    if node.host != leaf.executor_host {
        return Ok(None);
    }
    gas.consume_signature_verify("challenged executor receipt")?;
    let receipt = ReceiptTerms {
        request_hash,
        output_commitment,
        prompt_tokens: record.prompt_tokens,
        completion_tokens: record.completion_tokens,
        node_id: node.id,
        host: node.host.clone(),
    };
    let signed = signature_ok(
        &node.pubkey,
        &receipt.sign_bytes(),
        &record.executor_signature,
    );
    Ok(signed.then_some(node.host))
}

/// A leaf that breaks a rule of its own (see `MsgChallengeBatch.invalid_leaf`).
pub fn invalid_leaf(
    gas: &GasMeter,
    state: &dyn StateRead,
    chain_id: &str,
    batch: &Batch,
    proof: &LeafProof,
) -> Result<Option<Fault>> {
    let proven = prove(gas, batch, proof)?;
    gas.consume_signature_verify("challenged requester signature")?;
    let agent = &settled(batch).transfer_agent;
    let age = state.settlement_params()?.max_record_age_secs;
    let fault = |reason: String, host: Option<String>| {
        Ok(Some(Fault {
            reason: format!("leaf {}: {reason}", proven.index),
            host,
        }))
    };
    if let Some(reason) = signed_fault(chain_id, agent, proven.leaf) {
        return fault(reason, signing_host(gas, state, proven.leaf)?);
    }
    // When a batch lands is its transfer agent's choice alone: a TA that holds a host's
    // co-signed leaves until they are too old voids its own batch, never the host.
    if let Some(reason) = age_fault(batch.time, age, proven.leaf) {
        return fault(reason, None);
    }
    match priced_fault(state, proven.leaf)? {
        Some(reason) => fault(reason, signing_host(gas, state, proven.leaf)?),
        None => Ok(None),
    }
}

/// The rules of a leaf against the chain's model prices and `max_tokens_per_record`: its
/// model is priced, it claims at most `max_tokens_per_record` tokens, and its cost is its
/// tokens at the model's price, so the work a leaf credits is bounded and always paid for at
/// the chain's rate (a transfer agent and a host cannot credit a million tokens for one
/// ngnk). Both are set at genesis and never change, so a leaf judged now is judged as at its
/// batch's settlement; a host checks the same of its own leaves before it co-signs.
fn priced_fault(state: &dyn StateRead, leaf: &BatchLeaf) -> Result<Option<String>> {
    // leaf_fault found a record with token counts that add up and a canonical cost.
    let (Some(record), Some(cost)) = (leaf.record.as_ref(), parse_decimal(&leaf.cost)) else {
        return Ok(None);
    };
    let tokens = record
        .prompt_tokens
        .saturating_add(record.completion_tokens);
    let most = state.inference_params()?.max_tokens_per_record;
    if tokens > most {
        return Ok(Some(format!(
            "{tokens} tokens, above max_tokens_per_record {most}"
        )));
    }
    let Some(model) = state.model(&record.model)? else {
        return Ok(Some(format!(
            "model {:?} is not priced on chain",
            record.model
        )));
    };
    if leaf.work_per_token != model.work_per_token {
        return Ok(Some(format!(
            "work_per_token {} is not model {}'s {}",
            leaf.work_per_token, record.model, model.work_per_token
        )));
    }
    let price = parse_decimal(&model.price_per_token).unwrap_or(u128::MAX);
    let due = u128::from(tokens).checked_mul(price);
    Ok((due != Some(cost)).then(|| {
        format!(
            "cost {cost}ngnk is not its {tokens} tokens at model {}'s price of {price}ngnk",
            record.model
        )
    }))
}

/// The first rule `leaf` breaks on its own, if any, in a batch of `agent` on `chain_id` whose
/// block time is `time`, where requests are at most `age` seconds away from it: the rules
/// an `invalid_leaf` challenge proves broken ([`signed_fault`], then [`age_fault`]), and that
/// a host checks of its own leaves before it co-signs a batch (a bad leaf with its receipt
/// would slash it; a stale one would void the batch it is paid by).
pub fn leaf_fault(
    chain_id: &str,
    agent: &str,
    time: i64,
    age: u64,
    leaf: &BatchLeaf,
) -> Option<String> {
    signed_fault(chain_id, agent, leaf).or_else(|| age_fault(time, age, leaf))
}

/// A leaf's request signed more than `age` seconds away from `time`, its batch's block time.
pub fn age_fault(time: i64, age: u64, leaf: &BatchLeaf) -> Option<String> {
    let record = leaf.record.as_ref()?;
    let distance = (i128::from(time) - i128::from(record.timestamp)).unsigned_abs();
    (distance > u128::from(age)).then(|| {
        format!(
            "request timestamp {} is {distance} s from the batch's block time {time}, more than max_record_age_secs {age}",
            record.timestamp
        )
    })
}

/// The first rule of what was signed that `leaf` breaks, in a batch of `agent` on
/// `chain_id`: its record, request hash and requester signature, and the charge within the
/// signed terms.
fn signed_fault(chain_id: &str, agent: &str, leaf: &BatchLeaf) -> Option<String> {
    let Some(record) = leaf.record.as_ref() else {
        return Some("the leaf carries no record".into());
    };
    if record.transfer_agent != agent {
        return Some(format!(
            "signed for transfer agent {:?}, not {agent}",
            record.transfer_agent
        ));
    }
    let (Ok(request_hash), Ok(body_hash)) = (
        <[u8; 32]>::try_from(record.request_hash.as_slice()),
        <[u8; 32]>::try_from(record.prompt_hash.as_slice()),
    ) else {
        return Some("request_hash or prompt_hash is not 32 bytes".into());
    };
    if record.inference_id != inference_id(&request_hash) {
        return Some("inference_id is not the hex of request_hash".into());
    }
    let (Some(commission), Some(max_price), Some(cost)) = (
        parse_decimal(&record.commission),
        parse_decimal(&record.max_price_per_token),
        parse_decimal(&leaf.cost),
    ) else {
        return Some("an amount is not a canonical decimal".into());
    };
    let terms = RequestTerms {
        chain_id: chain_id.to_string(),
        body_hash,
        timestamp: record.timestamp,
        nonce: record.nonce.clone(),
        commission,
        transfer_agent: record.transfer_agent.clone(),
        model: record.model.clone(),
        max_price_per_token: max_price,
        max_completion_tokens: record.max_completion_tokens,
        max_prompt_tokens: record.max_prompt_tokens,
    };
    if terms.hash() != request_hash {
        return Some("request_hash is not the request/v3 hash of the leaf's terms".into());
    }
    if address_of_pubkey(&record.requester_pubkey).as_deref() != Some(record.requester.as_str()) {
        return Some("requester_pubkey does not derive to the requester".into());
    }
    if !signature_ok(
        &record.requester_pubkey,
        &request_hash,
        &record.requester_signature,
    ) {
        return Some("the requester signature does not verify".into());
    }
    if record.prompt_tokens > record.max_prompt_tokens {
        return Some(format!(
            "{} prompt tokens, above the signed {}",
            record.prompt_tokens, record.max_prompt_tokens
        ));
    }
    if record.completion_tokens > record.max_completion_tokens {
        return Some(format!(
            "{} completion tokens, above the signed {}",
            record.completion_tokens, record.max_completion_tokens
        ));
    }
    let Some(tokens) = record.prompt_tokens.checked_add(record.completion_tokens) else {
        return Some("token counts overflow".into());
    };
    if u128::from(tokens)
        .checked_mul(max_price)
        .is_none_or(|most| cost > most)
    {
        return Some(format!(
            "cost {cost}ngnk is above {tokens} tokens at the signed {max_price}ngnk"
        ));
    }
    None
}

/// Two adjacent leaves out of (requester, inference id) order.
pub fn unsorted(gas: &GasMeter, batch: &Batch, pair: &UnsortedLeaves) -> Result<Option<Fault>> {
    let (Some(first), Some(second)) = (&pair.first, &pair.second) else {
        return Err(bad_proof("unsorted needs both leaves".into()));
    };
    let (first, second) = (prove(gas, batch, first)?, prove(gas, batch, second)?);
    if second.index != first.index + 1 {
        return Err(bad_proof("unsorted leaves must be adjacent".into()));
    }
    let in_order = (first.requester(), first.id()) < (second.requester(), second.id());
    Ok((!in_order).then(|| Fault {
        reason: format!(
            "leaves {} and {} are not in strictly ascending (requester, inference id) order",
            first.index, second.index
        ),
        host: None,
    }))
}

/// A node whose recorded sum is not its children's (or its leaf's charge).
pub fn sum_mismatch(gas: &GasMeter, batch: &Batch, claim: &SumMismatch) -> Result<Option<Fault>> {
    let proof = claim
        .node
        .as_ref()
        .ok_or_else(|| bad_proof("sum_mismatch carries no node".into()))?;
    let node = proof
        .node
        .as_ref()
        .and_then(SumNode::from_proto)
        .ok_or_else(|| bad_proof("the node is malformed".into()))?;
    check_path(gas, batch, proof.level, proof.index, node, &proof.siblings)?;
    let at = format!("the node at level {}, index {}", proof.level, proof.index);
    if proof.level == 0 {
        let leaf = claim
            .leaf
            .as_ref()
            .ok_or_else(|| bad_proof("a leaf-level sum_mismatch carries the leaf".into()))?;
        gas.consume(
            GAS_PER_HASH * (prost::Message::encoded_len(leaf) as u64).div_ceil(64),
            "batch leaf hash",
        )?;
        if leaf_hash(leaf) != node.hash {
            return Err(bad_proof(format!("the leaf given is not {at}")));
        }
        if leaf_charge(leaf) != Some(node.sum) {
            return Ok(Some(Fault {
                reason: format!("{at} records {}ngnk, not its leaf's charge", node.sum),
                host: None,
            }));
        }
        return Ok((leaf_work(leaf) != Some(node.work)).then(|| Fault {
            reason: format!("{at} records {} work units, not its leaf's", node.work),
            host: None,
        }));
    }
    let children = claim.left.as_ref().zip(claim.right.as_ref());
    let (left, right) = children
        .and_then(|(l, r)| Some((SumNode::from_proto(l)?, SumNode::from_proto(r)?)))
        .ok_or_else(|| bad_proof("an inner sum_mismatch carries both children".into()))?;
    gas.consume(GAS_PER_HASH, "batch node hash")?;
    if parent_hash(&left, &right) != node.hash {
        return Err(bad_proof(format!("the children given are not {at}'s")));
    }
    if left.sum.checked_add(right.sum) != Some(node.sum) {
        return Ok(Some(Fault {
            reason: format!(
                "{at} records {}ngnk but its children hold {} and {}",
                node.sum, left.sum, right.sum
            ),
            host: None,
        }));
    }
    Ok(
        (left.work.checked_add(right.work) != Some(node.work)).then(|| Fault {
            reason: format!(
                "{at} records {} work units but its children hold {} and {}",
                node.work, left.work, right.work
            ),
            host: None,
        }),
    )
}

/// A requester line that is not the sum of that requester's leaves.
pub fn requester_mismatch(
    gas: &GasMeter,
    batch: &Batch,
    claim: &RequesterMismatch,
) -> Result<Option<Fault>> {
    let msg = settled(batch);
    let requester = claim.requester.as_str();
    let line = msg
        .requesters
        .iter()
        .find(|l| l.requester == requester)
        .map(|l| parse_decimal(&l.amount).unwrap_or(0))
        .unwrap_or(0);
    let last_index = msg.record_count - 1;
    let first = optional(gas, batch, &claim.first)?;
    let last = optional(gas, batch, &claim.last)?;
    let before = optional(gas, batch, &claim.before)?;
    let after = optional(gas, batch, &claim.after)?;
    let real = match (first, last) {
        (Some(first), Some(last)) => {
            if first.requester() != requester
                || last.requester() != requester
                || first.index > last.index
            {
                return Err(bad_proof(format!(
                    "first and last must be leaves of {requester}, first not after last"
                )));
            }
            let bounded_before = match &before {
                None => first.index == 0,
                Some(b) => b.index + 1 == first.index && b.requester() != requester,
            };
            let bounded_after = match &after {
                None => last.index == last_index,
                Some(a) => a.index == last.index + 1 && a.requester() != requester,
            };
            if !bounded_before || !bounded_after {
                return Err(bad_proof(format!(
                    "before and after must be the adjacent leaves of other requesters (unset only at the batch's ends) around {requester}'s leaves"
                )));
            }
            (last.prefix + last.charge)
                .checked_sub(first.prefix)
                .ok_or_else(|| bad_proof("prefixes out of order".into()))?
        }
        (None, None) => {
            let between = match (&before, &after) {
                (Some(b), Some(a)) => {
                    a.index == b.index + 1 && b.requester() < requester && requester < a.requester()
                }
                (None, Some(a)) => a.index == 0 && requester < a.requester(),
                (Some(b), None) => b.index == last_index && b.requester() < requester,
                (None, None) => false,
            };
            if !between {
                return Err(bad_proof(format!(
                    "without leaves of {requester}, before and after must be the adjacent leaves it would sort between"
                )));
            }
            0
        }
        _ => return Err(bad_proof("give both first and last, or neither".into())),
    };
    Ok((real != line).then(|| Fault {
        reason: format!(
            "requester {requester}'s leaves add up to {real}ngnk but its line says {line}ngnk"
        ),
        host: None,
    }))
}

/// A leaf whose host chain or host line is wrong.
///
/// Only a host whose signed line disagrees with the running totals of a leaf carrying its
/// own receipt is slashed with the transfer agent: every other fault of a host chain is the
/// transfer agent's construction.
pub fn host_mismatch(
    gas: &GasMeter,
    state: &dyn StateRead,
    batch: &Batch,
    claim: &HostMismatch,
) -> Result<Option<Fault>> {
    let proof = claim
        .leaf
        .as_ref()
        .ok_or_else(|| bad_proof("host_mismatch carries no leaf".into()))?;
    let leaf = prove(gas, batch, proof)?;
    let other = optional(gas, batch, &claim.other)?;
    let msg = settled(batch);
    let host = leaf.host();
    let line = msg.hosts.iter().find(|l| l.host == host);
    let fault = |reason: String| {
        Some(Fault {
            reason: format!("leaf {}: {reason}", leaf.index),
            host: None,
        })
    };
    // The line whose last leaf this is must be this leaf's host's.
    if let Some(owner) = msg.hosts.iter().find(|l| l.last_index == leaf.index) {
        if owner.host != host {
            return Ok(fault(format!(
                "host {}'s last leaf is a leaf of {host}",
                owner.host
            )));
        }
    }
    let Some(line) = line else {
        return Ok(fault(format!("host {host} has no line in the batch")));
    };
    let work = leaf.leaf.host_work;
    let own_work = leaf.work;
    let (Some(payout), Some(cost)) = (
        parse_decimal(&leaf.leaf.host_payout),
        parse_decimal(&leaf.leaf.cost),
    ) else {
        return Ok(fault("host_payout or cost is malformed".into()));
    };
    if leaf.index > line.last_index {
        return Ok(fault(format!(
            "{host}'s line ends at leaf {}",
            line.last_index
        )));
    }
    if leaf.index == line.last_index
        && (work != line.work_units || parse_decimal(&line.payout) != Some(payout))
    {
        return Ok(Some(Fault {
            reason: format!(
                "leaf {}: {host}'s running totals are not its line's",
                leaf.index
            ),
            host: signing_host(gas, state, leaf.leaf)?,
        }));
    }
    let previous = leaf.leaf.host_previous;
    if previous == 0 && (work != own_work || payout != cost) {
        return Ok(fault(
            "a host's first leaf must hold its own work and cost".into(),
        ));
    }
    if previous > leaf.index {
        return Ok(fault("host_previous points at or after the leaf".into()));
    }
    if let Some(other) = other {
        if previous > 0 && other.index + 1 == previous {
            let adds_up = other.host() == host
                && other.leaf.host_work.checked_add(own_work) == Some(work)
                && parse_decimal(&other.leaf.host_payout).and_then(|p| p.checked_add(cost))
                    == Some(payout);
            if !adds_up {
                return Ok(fault(format!(
                    "its running totals do not follow leaf {}'s",
                    other.index
                )));
            }
        } else if other.host() == host
            && other.index != leaf.index
            && other.leaf.host_previous == previous
        {
            return Ok(fault(format!(
                "leaf {} names the same previous leaf",
                other.index
            )));
        }
    }
    Ok(None)
}

/// The inference id of `proven` in batch `other` too.
pub fn duplicate(
    gas: &GasMeter,
    batch: &Batch,
    proof: &LeafProof,
    other_batch: &Batch,
    other: &LeafProof,
) -> Result<Option<Fault>> {
    let leaf = prove(gas, batch, proof)?;
    let other = prove(gas, other_batch, other)?;
    Ok((leaf.id() == other.id()).then(|| Fault {
        reason: format!(
            "leaf {} repeats inference {} of batch {}",
            leaf.index,
            leaf.id(),
            other_batch.id
        ),
        host: None,
    }))
}
