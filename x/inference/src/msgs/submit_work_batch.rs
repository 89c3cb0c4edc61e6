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
//!
//! Decoding reads only the transfer agent (the records field is skipped unread). The records
//! are decoded and checked in `execute`, and above all their two signature verifications
//! each: after the ante has found the signer's account, sequence and fee in order, and after
//! the cheap stateful checks (a registered transfer agent, 1 to `max_records_per_batch`
//! records), with each verification charged to the tx's gas. So a batch from an account
//! that cannot pay costs the chain nothing per record, and no signature check at all.

use std::collections::BTreeSet;

use gonka_auth::{address_of_pubkey, validate_address};
use gonka_bank::{transfer, BankRead, Coin, NATIVE_DENOM};
use gonka_proto::inference::{MsgSubmitWorkBatch, StoredRecord, WorkRecord};
use gonka_sdk::{
    parse_amount, type_url, Any, ErrorCode, GasMeter, Msg, Result, SdkError, StateWrite, TxContext,
};
use prost::Message;

use super::{parse_amount_as, validate_model_id, validate_node_id};
use crate::events::{self, Outcome};
use crate::{
    executor_signature_ok, inference_id, request_hash, request_signature_ok, InferenceError,
    InferenceRead, InferenceWrite, MAX_NONCE_LEN,
};

/// What the stateless checks of one record computed.
struct Checked {
    tokens: u64,
    commission: u128,
}

/// The transfer agent of a `MsgSubmitWorkBatch` alone: decoding it skips the records field
/// without looking inside, so a batch costs nothing per record before the ante has run.
#[derive(Clone, PartialEq, prost::Message)]
struct BatchHead {
    #[prost(string, tag = "1")]
    transfer_agent: String,
}

struct SubmitWorkBatch {
    transfer_agent: String,
    /// The whole message, decoded with its records in `execute`.
    encoded: Vec<u8>,
}

/// Decodes a `MsgSubmitWorkBatch`'s transfer agent and checks it; the records are decoded
/// and checked in `execute`, under the tx's gas meter.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    (any.type_url == type_url::<MsgSubmitWorkBatch>()).then(|| {
        let head = BatchHead::decode(any.value.as_slice()).map_err(|e| {
            SdkError::Decode.err(format!(
                "{} is not a valid gonka.inference.v1.MsgSubmitWorkBatch: {e}",
                any.type_url
            ))
        })?;
        validate_address("transfer_agent", &head.transfer_agent)?;
        Ok(Box::new(SubmitWorkBatch {
            transfer_agent: head.transfer_agent,
            encoded: any.value.clone(),
        }) as Box<dyn Msg>)
    })
}

/// The stateless checks of every record, in order, with the duplicate-id check across the
/// batch; each requester signature verification is charged to `gas` before it runs.
fn check_records(records: &[WorkRecord], gas: &GasMeter) -> Result<Vec<Checked>> {
    let mut ids = BTreeSet::new();
    let mut checked = Vec::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        checked.push(check_record(index, record, gas)?);
        if !ids.insert(record.inference_id.as_str()) {
            return Err(InferenceError::DuplicateRecord.err(format!(
                "records[{index}]: inference id {} appears twice in the batch",
                record.inference_id
            )));
        }
    }
    Ok(checked)
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

fn check_record(index: usize, record: &WorkRecord, gas: &GasMeter) -> Result<Checked> {
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
    // The key's decompression and the verification are the expensive part: paid as gas.
    gas.consume_signature_verify("requester signature")?;
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
    Ok(Checked { tokens, commission })
}

impl Msg for SubmitWorkBatch {
    fn signer(&self) -> &str {
        &self.transfer_agent
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let ta = &self.transfer_agent;
        // Its bytes are already paid for: the tx's size gas.
        let records = MsgSubmitWorkBatch::decode(self.encoded.as_slice())
            .map_err(|e| {
                SdkError::Decode.err(format!(
                    "the records of a MsgSubmitWorkBatch are not valid protobuf: {e}"
                ))
            })?
            .records;
        if records.is_empty() {
            return Err(
                InferenceError::BatchTooLarge.err("a work batch must carry at least 1 record")
            );
        }
        if state.transfer_agent(ta)?.is_none() {
            return Err(InferenceError::NotTransferAgent.err(format!(
                "{ta} is not a registered transfer agent; register with MsgRegisterTransferAgent"
            )));
        }
        let params = state.inference_params()?;
        if records.len() as u64 > params.max_records_per_batch {
            return Err(InferenceError::BatchTooLarge.err(format!(
                "a work batch carries at most {} records, found {}",
                params.max_records_per_batch,
                records.len()
            )));
        }
        let checked_records = check_records(&records, ctx.gas)?;
        let epoch = gonka_epochs::current(state)?;
        let (mut stored, mut refused) = (0, 0);
        for (index, (record, checked)) in records.iter().zip(&checked_records).enumerate() {
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
            ctx.gas.consume_signature_verify("executor signature")?;
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
