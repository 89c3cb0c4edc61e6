//! `MsgSubmitWorkBatch`: a registered transfer agent reports served inferences.
//!
//! Per record, in batch order: the requester pays `(prompt + completion tokens) × price`
//! to the executor node's host and the commission to the transfer agent, the host is
//! credited `prompt + completion` work units (`gonka_stake::credit_work`), and the record is
//! stored with its epoch and height. A record whose requester cannot pay both is refused
//! alone (event outcome `refused_insufficient_funds`, nothing stored, nothing charged).
//! Anything else wrong with any record — a malformed field, a forged or malformed
//! signature, an unknown model or node, a model the node does not serve, a duplicate id —
//! is the transfer agent's misbehaviour and fails the whole transaction.

use std::collections::BTreeSet;

use gonka_auth::{address_of_pubkey, validate_address};
use gonka_bank::{transfer, BankRead, Coin, NATIVE_DENOM};
use gonka_proto::inference::{MsgSubmitWorkBatch, StoredRecord, WorkRecord};
use gonka_sdk::{parse_amount, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{parse_amount_as, validate_model_id, validate_node_id};
use crate::events::{self, Outcome};
use crate::{
    executor_signature_ok, inference_id, request_hash, request_signature_ok, InferenceError,
    InferenceRead, InferenceWrite, MAX_NONCE_LEN,
};
use gonka_sdk::decode_as;

/// A record that passed its stateless checks.
struct Checked {
    record: WorkRecord,
    tokens: u64,
    commission: u128,
}

struct SubmitWorkBatch {
    transfer_agent: String,
    records: Vec<Checked>,
}

/// Decodes a `MsgSubmitWorkBatch` and runs every stateless check, including the requester
/// signatures (they need no state).
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgSubmitWorkBatch>(any).map(|msg| {
        let msg = msg?;
        validate_address("transfer_agent", &msg.transfer_agent)?;
        if msg.records.is_empty() {
            return Err(
                InferenceError::BatchTooLarge.err("a work batch must carry at least 1 record")
            );
        }
        let mut ids = BTreeSet::new();
        let mut records = Vec::with_capacity(msg.records.len());
        for (index, record) in msg.records.into_iter().enumerate() {
            let checked = check_record(index, record)?;
            if !ids.insert(checked.record.inference_id.clone()) {
                return Err(InferenceError::DuplicateRecord.err(format!(
                    "records[{index}]: inference id {} appears twice in the batch",
                    checked.record.inference_id
                )));
            }
            records.push(checked);
        }
        Ok(Box::new(SubmitWorkBatch {
            transfer_agent: msg.transfer_agent,
            records,
        }) as Box<dyn Msg>)
    })
}

fn hash_32(index: usize, field: &str, bytes: &[u8]) -> Result<()> {
    if bytes.len() == 32 {
        Ok(())
    } else {
        Err(InferenceError::InvalidRecord.err(format!(
            "records[{index}].{field} must be 32 bytes, found {}",
            bytes.len()
        )))
    }
}

fn check_record(index: usize, record: WorkRecord) -> Result<Checked> {
    validate_address(&format!("records[{index}].requester"), &record.requester)?;
    hash_32(index, "request_hash", &record.request_hash)?;
    hash_32(index, "prompt_hash", &record.prompt_hash)?;
    hash_32(index, "response_hash", &record.response_hash)?;
    let expected_id = inference_id(&record.request_hash);
    if record.inference_id != expected_id {
        return Err(InferenceError::InvalidInferenceId.err(format!(
            "records[{index}].inference_id is {:?} but must be the lowercase hex of request_hash, {expected_id}",
            record.inference_id
        )));
    }
    validate_model_id(&format!("records[{index}].model"), &record.model)?;
    validate_node_id(
        &format!("records[{index}].executor_node"),
        &record.executor_node,
    )?;
    let tokens = record
        .prompt_tokens
        .checked_add(record.completion_tokens)
        .filter(|t| *t > 0)
        .ok_or_else(|| {
            InferenceError::InvalidRecord.err(format!(
                "records[{index}] claims {} prompt and {} completion tokens; their sum must be positive and fit in 64 bits",
                record.prompt_tokens, record.completion_tokens
            ))
        })?;
    let commission = parse_amount_as(
        InferenceError::InvalidRecord,
        &format!("records[{index}].commission"),
        &record.commission,
    )?;
    if record.nonce.is_empty()
        || record.nonce.len() > MAX_NONCE_LEN
        || !record.nonce.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(InferenceError::InvalidRecord.err(format!(
            "records[{index}].nonce must be 1 to {MAX_NONCE_LEN} printable ASCII characters, found {:?}",
            record.nonce
        )));
    }
    let signed = request_hash(
        &record.prompt_hash,
        record.timestamp,
        commission,
        &record.nonce,
    );
    if record.request_hash != signed {
        return Err(InferenceError::RequestHashMismatch.err(format!(
            "records[{index}].request_hash does not match its prompt_hash, timestamp {}, commission {commission}ngnk and nonce {:?} (expected {}); the requester signed different terms",
            record.timestamp,
            record.nonce,
            inference_id(&signed)
        )));
    }
    match address_of_pubkey(&record.requester_pubkey) {
        Some(derived) if derived == record.requester => {}
        Some(derived) => {
            return Err(InferenceError::RequesterKeyMismatch.err(format!(
                "records[{index}].requester_pubkey belongs to {derived}, not to the requester {}",
                record.requester
            )))
        }
        None => {
            return Err(InferenceError::RequesterKeyMismatch.err(format!(
                "records[{index}].requester_pubkey ({} bytes) is not a secp256k1 public key",
                record.requester_pubkey.len()
            )))
        }
    }
    if !request_signature_ok(
        &record.requester_pubkey,
        &record.request_hash,
        &record.requester_signature,
    ) {
        return Err(InferenceError::InvalidRequesterSignature.err(format!(
            "records[{index}] (inference {}): the requester signature ({} bytes) does not verify over request_hash with the key of {}",
            record.inference_id,
            record.requester_signature.len(),
            record.requester
        )));
    }
    Ok(Checked {
        record,
        tokens,
        commission,
    })
}

impl Msg for SubmitWorkBatch {
    fn signer(&self) -> &str {
        &self.transfer_agent
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let ta = &self.transfer_agent;
        if state.transfer_agent(ta)?.is_none() {
            return Err(InferenceError::NotTransferAgent.err(format!(
                "{ta} is not a registered transfer agent; register with MsgRegisterTransferAgent"
            )));
        }
        let params = state.inference_params()?;
        if self.records.len() as u64 > params.max_records_per_batch {
            return Err(InferenceError::BatchTooLarge.err(format!(
                "a work batch carries at most {} records, found {}",
                params.max_records_per_batch,
                self.records.len()
            )));
        }
        let epoch = gonka_epochs::current(state)?;
        let (mut stored, mut refused) = (0, 0);
        for (index, checked) in self.records.iter().enumerate() {
            let record = &checked.record;
            let id = &record.inference_id;
            if checked.tokens > params.max_tokens_per_record {
                return Err(InferenceError::InvalidRecord.err(format!(
                    "records[{index}] (inference {id}) claims {} tokens, more than max_tokens_per_record {}",
                    checked.tokens, params.max_tokens_per_record
                )));
            }
            if let Some(existing) = state.record(id)? {
                return Err(InferenceError::DuplicateRecord.err(format!(
                    "records[{index}]: inference {id} was already recorded at height {}",
                    existing.height
                )));
            }
            let model = state.model(&record.model)?.ok_or_else(|| {
                InferenceError::UnknownModel.err(format!(
                    "records[{index}] (inference {id}) names model {}, which the chain does not price",
                    record.model
                ))
            })?;
            let node = state.node(&record.executor_node)?.ok_or_else(|| {
                InferenceError::UnknownNode.err(format!(
                    "records[{index}] (inference {id}) names executor node {}, which is not registered",
                    record.executor_node
                ))
            })?;
            if !node.models.contains(&record.model) {
                return Err(InferenceError::ModelNotServed.err(format!(
                    "records[{index}] (inference {id}): node {} does not serve model {}; it serves {}",
                    node.id,
                    record.model,
                    node.models.join(", ")
                )));
            }
            if !executor_signature_ok(
                &node.pubkey,
                &record.request_hash,
                &record.response_hash,
                &record.model,
                record.prompt_tokens,
                record.completion_tokens,
                &record.executor_signature,
            ) {
                return Err(InferenceError::InvalidExecutorSignature.err(format!(
                    "records[{index}] (inference {id}): the executor signature ({} bytes) does not verify with node {}'s registered key",
                    record.executor_signature.len(),
                    node.id
                )));
            }
            let price = parse_amount("price_per_token", &model.price_per_token)?;
            let overflow = || {
                InferenceError::InvalidRecord.err(format!(
                    "records[{index}] (inference {id}): {} tokens at {price}ngnk plus a commission of {}ngnk overflows 128 bits",
                    checked.tokens, checked.commission
                ))
            };
            let cost = u128::from(checked.tokens)
                .checked_mul(price)
                .ok_or_else(overflow)?;
            let due = cost.checked_add(checked.commission).ok_or_else(overflow)?;
            if state.balance(&record.requester, NATIVE_DENOM)? < due {
                // The requester's failure, not the transfer agent's: refuse this record alone.
                refused += 1;
                state.emit(events::record(
                    record,
                    ta,
                    &node.host,
                    cost,
                    checked.commission,
                    Outcome::RefusedInsufficientFunds,
                ));
                continue;
            }
            // The balance check above makes both transfers succeed (short of an overflow of
            // a recipient's balance, which fails the whole tx).
            if cost > 0 {
                transfer(state, &record.requester, &node.host, &Coin::ngnk(cost))?;
            }
            if checked.commission > 0 {
                transfer(
                    state,
                    &record.requester,
                    ta,
                    &Coin::ngnk(checked.commission),
                )?;
            }
            gonka_stake::credit_work(state, &node.host, checked.tokens)?;
            state.put_record(&StoredRecord {
                record: Some(record.clone()),
                transfer_agent: ta.clone(),
                executor_host: node.host.clone(),
                cost: cost.to_string(),
                epoch,
                height: ctx.block.height,
            });
            stored += 1;
            state.emit(events::record(
                record,
                ta,
                &node.host,
                cost,
                checked.commission,
                Outcome::Stored,
            ));
        }
        state.emit(events::batch(ta, stored, refused));
        Ok(())
    }
}
