//! `MsgSubmitWorkBatch`: a registered transfer agent reports served inferences.
//!
//! The batch as a whole fails only when its submitter may not submit: not a registered
//! transfer agent, not staked (bonded ≥ `min_stake`, not jailed) at this moment, or a batch
//! that is empty or larger than `max_records_per_batch`. Every record is then judged alone,
//! in batch order: a record that passes is charged, credited and stored; one that fails
//! changes nothing and is reported with its own code and reason in its `inference_record`
//! event (outcome `refused`), so one bad record never costs the others their settlement.
//!
//! A record passes when, cheapest checks first:
//! 1. its fields are well formed (hash lengths, id = hex of `request_hash`, nonce, amounts);
//! 2. it was signed for this transfer agent (`transfer_agent` = the batch's submitter: a
//!    transfer agent that copies another's records cannot collect their commissions);
//! 3. `request_hash` is the request/v2 hash of its terms under this chain's id;
//! 4. it is not stored yet and not earlier in the batch;
//! 5. the model is priced at most the signed `max_price_per_token`, the completion is at
//!    most the signed `max_completion_tokens`, and all tokens at most
//!    `max_tokens_per_record`;
//! 6. the executor node is registered, serves the model, and its host is staked now;
//! 7. the requester's key derives to `requester` and its signature verifies;
//! 8. the executor's receipt/v2 signature (binding the node id and its host) verifies;
//! 9. the requester can pay `(prompt + completion) × price + commission`.
//!
//! It is then charged: the requester pays the cost to the executor's host and the commission
//! to the transfer agent, the host is credited `prompt + completion` work units
//! ([`gonka_stake::credit_work`]) and the record is stored with its epoch and height.

use std::collections::{BTreeMap, BTreeSet};

use gonka_auth::{address_of_pubkey, validate_address};
use gonka_bank::{transfer, BankRead, Coin, NATIVE_DENOM};
use gonka_proto::inference::{MsgSubmitWorkBatch, Params, StoredRecord, WorkRecord};
use gonka_sdk::{
    parse_amount, type_url, Any, Error, ErrorCode, Msg, Result, SdkError, StateWrite, TxContext,
};
use prost::Message;

use super::{parse_amount_as, require_staked, validate_model_id, validate_node_id};
use crate::events;
use crate::{
    inference_id, nonce_ok, signature_ok, InferenceError, InferenceRead, InferenceWrite,
    ReceiptTerms, RequestTerms, MAX_NONCE_LEN,
};

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

/// Decodes a `MsgSubmitWorkBatch`'s transfer agent and checks it. Records are decoded and
/// judged one by one when the batch executes, after the transaction's account, sequence,
/// fee and signature were checked, under its gas meter.
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

/// A record that passed every check, with what it costs.
struct Accepted {
    host: String,
    tokens: u64,
    cost: u128,
    commission: u128,
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
        require_staked(state, ta, "transfer agent submitting work")?;
        let params = state.inference_params()?;
        if records.len() as u64 > params.max_records_per_batch {
            return Err(InferenceError::BatchTooLarge.err(format!(
                "a work batch carries at most {} records, found {}",
                params.max_records_per_batch,
                records.len()
            )));
        }
        let epoch = gonka_epochs::current(state)?;
        let mut judge = Judge {
            chain_id: &ctx.block.chain_id,
            transfer_agent: ta,
            params: &params,
            in_batch: BTreeSet::new(),
            hosts: BTreeMap::new(),
        };
        let (mut stored, mut refused) = (0, 0);
        for (index, record) in records.iter().enumerate() {
            // Both signature verifications of a record are paid before it is judged (a record
            // refused early pays them all the same); running out of gas fails the whole tx.
            ctx.gas.consume_signature_verify("requester signature")?;
            ctx.gas.consume_signature_verify("executor signature")?;
            let accepted = match judge.record(state, index, record) {
                Ok(accepted) => accepted,
                Err(error) => {
                    refused += 1;
                    state.emit(events::refused(record, ta, &error));
                    continue;
                }
            };
            // The balance check made both transfers possible (short of an overflow of a
            // recipient's balance, which fails the whole tx).
            let requester = &record.requester;
            if accepted.cost > 0 {
                transfer(state, requester, &accepted.host, &Coin::ngnk(accepted.cost))?;
            }
            if accepted.commission > 0 {
                transfer(state, requester, ta, &Coin::ngnk(accepted.commission))?;
            }
            gonka_stake::credit_work(state, &accepted.host, accepted.tokens)?;
            state.put_record(&StoredRecord {
                record: Some(record.clone()),
                transfer_agent: ta.clone(),
                executor_host: accepted.host.clone(),
                cost: accepted.cost.to_string(),
                epoch,
                height: ctx.block.height,
                sampled_ppm: 0,
            });
            stored += 1;
            state.emit(events::stored(
                record,
                ta,
                &accepted.host,
                accepted.cost,
                accepted.commission,
            ));
        }
        state.emit(events::batch(ta, stored, refused));
        Ok(())
    }
}

/// The checks of one record, in the order of the module docs.
struct Judge<'a> {
    chain_id: &'a str,
    transfer_agent: &'a str,
    params: &'a Params,
    /// Inference ids met so far in the batch.
    in_batch: BTreeSet<String>,
    /// Whether each host met so far is staked (its bond cannot change within the batch).
    hosts: BTreeMap<String, Result<()>>,
}

fn malformed(index: usize, log: String) -> Error {
    InferenceError::InvalidRecord.err(format!("records[{index}]: {log}"))
}

fn hash_32(index: usize, field: &str, bytes: &[u8]) -> Result<[u8; 32]> {
    bytes.try_into().map_err(|_| {
        malformed(
            index,
            format!("{field} must be 32 bytes, found {}", bytes.len()),
        )
    })
}

impl Judge<'_> {
    fn record(
        &mut self,
        state: &dyn StateWrite,
        index: usize,
        record: &WorkRecord,
    ) -> Result<Accepted> {
        // 1. Well-formed fields.
        validate_address(&format!("records[{index}].requester"), &record.requester)?;
        let request_hash = hash_32(index, "request_hash", &record.request_hash)?;
        let body_hash = hash_32(index, "prompt_hash", &record.prompt_hash)?;
        let output_commitment = hash_32(index, "output_commitment", &record.output_commitment)?;
        let id = &record.inference_id;
        let expected_id = inference_id(&request_hash);
        if *id != expected_id {
            return Err(InferenceError::InvalidInferenceId.err(format!(
                "records[{index}].inference_id is {id:?} but must be the lowercase hex of request_hash, {expected_id}"
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
                malformed(index, format!(
                    "claims {} prompt and {} completion tokens; their sum must be positive and fit in 64 bits",
                    record.prompt_tokens, record.completion_tokens
                ))
            })?;
        let amount = |field: &str, text: &str| {
            parse_amount_as(
                InferenceError::InvalidRecord,
                &format!("records[{index}].{field}"),
                text,
            )
        };
        let commission = amount("commission", &record.commission)?;
        let max_price = amount("max_price_per_token", &record.max_price_per_token)?;
        if !nonce_ok(&record.nonce) {
            return Err(malformed(
                index,
                format!(
                    "nonce must be 1 to {MAX_NONCE_LEN} printable ASCII characters, found {:?}",
                    record.nonce
                ),
            ));
        }
        // 2. Signed for this transfer agent.
        if record.transfer_agent != self.transfer_agent {
            return Err(InferenceError::WrongTransferAgent.err(format!(
                "records[{index}] (inference {id}) was signed for transfer agent {:?}; only that transfer agent may submit it, not {}",
                record.transfer_agent, self.transfer_agent
            )));
        }
        // 3. The request hash is the hash of the signed terms on this chain.
        let terms = RequestTerms {
            chain_id: self.chain_id.to_string(),
            body_hash,
            timestamp: record.timestamp,
            nonce: record.nonce.clone(),
            commission,
            transfer_agent: record.transfer_agent.clone(),
            model: record.model.clone(),
            max_price_per_token: max_price,
            max_completion_tokens: record.max_completion_tokens,
        };
        let signed = terms.hash();
        if request_hash != signed {
            return Err(InferenceError::RequestHashMismatch.err(format!(
                "records[{index}].request_hash is not the request/v2 hash of its terms on chain {} (expected {}); the requester signed different terms",
                self.chain_id,
                inference_id(&signed)
            )));
        }
        // 4. New.
        if let Some(existing) = state.record(id)? {
            return Err(InferenceError::DuplicateRecord.err(format!(
                "records[{index}]: inference {id} was already recorded at height {}",
                existing.height
            )));
        }
        if !self.in_batch.insert(id.clone()) {
            return Err(InferenceError::DuplicateRecord.err(format!(
                "records[{index}]: inference {id} appears earlier in this batch"
            )));
        }
        // 5. Within what the requester signed and the chain allows.
        let model = state.model(&record.model)?.ok_or_else(|| {
            InferenceError::UnknownModel.err(format!(
                "records[{index}] (inference {id}) names model {}, which the chain does not price",
                record.model
            ))
        })?;
        let price = parse_amount("price_per_token", &model.price_per_token)?;
        if price > max_price {
            return Err(InferenceError::PriceAboveSigned.err(format!(
                "records[{index}] (inference {id}): model {} costs {price}ngnk per token but the requester signed for at most {max_price}ngnk",
                record.model
            )));
        }
        if record.completion_tokens > record.max_completion_tokens {
            return Err(InferenceError::TokensAboveSigned.err(format!(
                "records[{index}] (inference {id}) claims {} completion tokens but the requester signed for at most {}",
                record.completion_tokens, record.max_completion_tokens
            )));
        }
        if tokens > self.params.max_tokens_per_record {
            return Err(malformed(
                index,
                format!(
                    "inference {id} claims {tokens} tokens, more than max_tokens_per_record {}",
                    self.params.max_tokens_per_record
                ),
            ));
        }
        // 6. A registered node that serves the model, hosted by a staked participant.
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
        self.hosts
            .entry(node.host.clone())
            .or_insert_with(|| require_staked(state, &node.host, "host paid for work"))
            .clone()?;
        // 7. The requester signed (the expensive checks come last).
        match address_of_pubkey(&record.requester_pubkey) {
            Some(derived) if derived == record.requester => {}
            derived => {
                return Err(InferenceError::RequesterKeyMismatch.err(format!(
                    "records[{index}].requester_pubkey ({} bytes) {}, not to the requester {}",
                    record.requester_pubkey.len(),
                    derived.map_or("is not a secp256k1 public key".into(), |d| format!(
                        "belongs to {d}"
                    )),
                    record.requester
                )))
            }
        }
        if !signature_ok(
            &record.requester_pubkey,
            &request_hash,
            &record.requester_signature,
        ) {
            return Err(InferenceError::InvalidRequesterSignature.err(format!(
                "records[{index}] (inference {id}): the requester signature ({} bytes) does not verify over request_hash with the key of {}",
                record.requester_signature.len(),
                record.requester
            )));
        }
        // 8. The executor's receipt.
        let receipt = ReceiptTerms {
            request_hash,
            output_commitment,
            prompt_tokens: record.prompt_tokens,
            completion_tokens: record.completion_tokens,
            node_id: node.id.clone(),
            host: node.host.clone(),
        };
        if !signature_ok(
            &node.pubkey,
            &receipt.sign_bytes(),
            &record.executor_signature,
        ) {
            return Err(InferenceError::InvalidExecutorSignature.err(format!(
                "records[{index}] (inference {id}): the executor signature ({} bytes) does not verify as node {}'s receipt for host {} with its registered key",
                record.executor_signature.len(),
                node.id,
                node.host
            )));
        }
        // 9. The requester can pay.
        let overflow = || {
            malformed(index, format!(
                "inference {id}: {tokens} tokens at {price}ngnk plus a commission of {commission}ngnk overflows 128 bits"
            ))
        };
        let cost = u128::from(tokens).checked_mul(price).ok_or_else(overflow)?;
        let due = cost.checked_add(commission).ok_or_else(overflow)?;
        let balance = state.balance(&record.requester, NATIVE_DENOM)?;
        if balance < due {
            return Err(InferenceError::InsufficientFunds.err(format!(
                "records[{index}] (inference {id}): requester {} holds {balance}ngnk but owes {due}ngnk ({tokens} tokens x {price}ngnk + {commission}ngnk commission)",
                record.requester
            )));
        }
        Ok(Accepted {
            host: node.host,
            tokens,
            cost,
            commission,
        })
    }
}
