//! `MsgSettleBatch`: a transfer agent commits a batch of served records.
//!
//! Cheapest checks first. At decode only the transfer agent's address (the tx's signer), so
//! a full batch from an account that cannot pay costs nothing per line. After the ante, in
//! `execute`, statelessly: a 32-byte root, 96 signature bytes, at least one record, requester
//! and host lines strictly ascending, canonical amounts, positive requester totals adding up
//! to `total`, host payouts not above it, host work units adding up to `total_work`, each
//! host's last index inside the batch; then against state: the lines and records within the
//! parameters, no host line claiming more work than its payout buys at the chain's cheapest
//! work (x/inference's `cheapest_work_model`), a registered and staked transfer agent using
//! its next batch number, staked hosts with BLS keys, the gas of the
//! next block's sampling of the claimed record count ([`crate::sampling::sampling_gas`]) and
//! room for those records in this block (`max_block_records`), then the one aggregate
//! signature (a BLS verification's gas first; the point is decompressed only
//! then), then each escrow's balance, open until a later height. Nothing per record is
//! checked here: records are checked off chain by anyone, and a wrong one voids the batch
//! through `MsgChallengeBatch`.

use gonka_auth::validate_address;
use gonka_bls::BlsRead;
use gonka_bls_crypto::{fast_aggregate_verify, PublicKey, Signature, SIGNATURE_LEN};
use gonka_inference::InferenceRead;
use gonka_proto::batch::parse_decimal;
use gonka_proto::settlement::{Batch, BatchStatus, MsgSettleBatch};
use gonka_proto::signing::batch_sign_bytes;
use gonka_sdk::{type_url, Any, ErrorCode, Msg, Result, SdkError, StateWrite, TxContext};
use prost::Message;

use super::require_transfer_agent;
use crate::{escrow_balance, events, SettlementError, SettlementRead, SettlementWrite};

/// The transfer agent of a `MsgSettleBatch` alone: decoding it skips the lines without
/// looking inside, so a batch from an account that cannot pay costs nothing per line.
#[derive(Clone, PartialEq, prost::Message)]
struct BatchHead {
    #[prost(string, tag = "1")]
    transfer_agent: String,
}

struct SettleBatch {
    transfer_agent: String,
    /// The whole message, decoded and checked in `execute`, after the ante.
    encoded: Vec<u8>,
}

fn invalid(log: String) -> gonka_sdk::Error {
    SettlementError::InvalidBatch.err(log)
}

fn bad_signature(len: usize) -> gonka_sdk::Error {
    SettlementError::InvalidHostSignature.err(format!(
        "host_signature must be a {SIGNATURE_LEN}-byte compressed G2 point, found {len} bytes"
    ))
}

fn amount(field: &str, text: &str) -> Result<u128> {
    parse_decimal(text)
        .ok_or_else(|| invalid(format!("{field} {text:?} must be a decimal amount of ngnk")))
}

/// Decodes a `MsgSettleBatch`'s transfer agent and checks it. The rest is decoded and
/// checked when the message executes, after the transaction's account, sequence, fee and
/// signature were checked: a full batch's lines are a thousand addresses and amounts.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    (any.type_url == type_url::<MsgSettleBatch>()).then(|| {
        let head = BatchHead::decode(any.value.as_slice()).map_err(|e| {
            SdkError::Decode.err(format!(
                "{} is not a valid gonka.settlement.v1.MsgSettleBatch: {e}",
                any.type_url
            ))
        })?;
        validate_address("transfer_agent", &head.transfer_agent)?;
        Ok(Box::new(SettleBatch {
            transfer_agent: head.transfer_agent,
            encoded: any.value.clone(),
        }) as Box<dyn Msg>)
    })
}

/// Decodes a whole `MsgSettleBatch` and checks it statelessly (what executing one does
/// first); with each requester line's amount.
pub fn check_batch(encoded: &[u8]) -> Result<(MsgSettleBatch, Vec<u128>)> {
    let msg = MsgSettleBatch::decode(encoded).map_err(|e| {
        SdkError::Decode.err(format!(
            "the lines of a MsgSettleBatch are not valid protobuf: {e}"
        ))
    })?;
    if msg.root.len() != 32 {
        return Err(invalid(format!(
            "root must be 32 bytes, found {}",
            msg.root.len()
        )));
    }
    if msg.record_count == 0 || msg.requesters.is_empty() || msg.hosts.is_empty() {
        return Err(invalid(
            "a batch commits at least one record, with one requester line and one host line".into(),
        ));
    }
    let total = amount("total", &msg.total)?;
    let mut sum = 0u128;
    let mut owed_by_line = Vec::with_capacity(msg.requesters.len());
    for (i, line) in msg.requesters.iter().enumerate() {
        validate_address(&format!("requesters[{i}].requester"), &line.requester)?;
        if i > 0 && msg.requesters[i - 1].requester >= line.requester {
            return Err(invalid(format!(
                "requesters must be strictly ascending by address; requesters[{i}] is {}",
                line.requester
            )));
        }
        let owed = amount(&format!("requesters[{i}].amount"), &line.amount)?;
        if owed == 0 {
            return Err(invalid(format!("requesters[{i}].amount must be positive")));
        }
        sum = sum
            .checked_add(owed)
            .ok_or_else(|| invalid("totals overflow".into()))?;
        owed_by_line.push(owed);
    }
    if sum != total {
        return Err(invalid(format!(
            "the requester totals add up to {sum}ngnk but the batch total is {total}ngnk"
        )));
    }
    let mut paid = 0u128;
    let mut work = 0u64;
    for (i, line) in msg.hosts.iter().enumerate() {
        validate_address(&format!("hosts[{i}].host"), &line.host)?;
        if i > 0 && msg.hosts[i - 1].host >= line.host {
            return Err(invalid(format!(
                "hosts must be strictly ascending by address; hosts[{i}] is {}",
                line.host
            )));
        }
        if line.last_index >= msg.record_count {
            return Err(invalid(format!(
                "hosts[{i}].last_index {} is outside the batch's {} records",
                line.last_index, msg.record_count
            )));
        }
        let payout = amount(&format!("hosts[{i}].payout"), &line.payout)?;
        paid = paid
            .checked_add(payout)
            .ok_or_else(|| invalid("payouts overflow".into()))?;
        work = work
            .checked_add(line.work_units)
            .ok_or_else(|| invalid("work units overflow".into()))?;
    }
    if paid > total {
        return Err(invalid(format!(
            "the host payouts add up to {paid}ngnk, more than the batch total {total}ngnk"
        )));
    }
    if work != msg.total_work {
        return Err(invalid(format!(
            "the host lines add up to {work} work units but the batch's total_work is {}",
            msg.total_work
        )));
    }
    // Only its length here: decompressing the point (a square root and a subgroup check)
    // waits until the BLS check's gas is charged.
    if msg.host_signature.len() != SIGNATURE_LEN {
        return Err(bad_signature(msg.host_signature.len()));
    }
    Ok((msg, owed_by_line))
}

impl Msg for SettleBatch {
    fn signer(&self) -> &str {
        &self.transfer_agent
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        // Its bytes are already paid for: the tx's size gas.
        let (msg, owed) = check_batch(&self.encoded)?;
        let msg = &msg;
        let agent = &msg.transfer_agent;
        let params = state.settlement_params()?;
        let lines = msg.requesters.len().max(msg.hosts.len()) as u64;
        if lines > params.max_batch_lines || msg.record_count > params.max_batch_records {
            return Err(invalid(format!(
                "a batch carries at most {} requester and host lines and {} records; this one has {} requesters, {} hosts and {} records",
                params.max_batch_lines,
                params.max_batch_records,
                msg.requesters.len(),
                msg.hosts.len(),
                msg.record_count
            )));
        }
        let height = ctx.block.height;
        let in_block = state.block_records(height)?;
        if in_block.saturating_add(msg.record_count) > params.max_block_records {
            return Err(SettlementError::BlockRecordsFull.err(format!(
                "the batches settled in block {height} already commit to {in_block} of the {} records a block may hold; this batch's {} records must wait for a later block: submit it again",
                params.max_block_records, msg.record_count
            )));
        }
        require_transfer_agent(state, agent)?;
        gonka_inference::require_staked(state, agent, "transfer agent settling a batch")?;
        let expected = state.batch_number(agent)? + 1;
        if msg.number != expected {
            return Err(SettlementError::WrongBatchNumber.err(format!(
                "batch number {} is not {agent}'s next, {expected}",
                msg.number
            )));
        }
        // No host line claims more work than its payout buys at the cheapest work on chain:
        // every leaf is paid tokens × its model's price and credits tokens × its weight.
        let cheapest = state.cheapest_work_model()?;
        for (i, line) in msg.hosts.iter().enumerate() {
            let payout = parse_decimal(&line.payout).unwrap_or(0);
            if let Some(model) = cheapest.as_ref() {
                if !gonka_inference::work_within(model, line.work_units, payout) {
                    return Err(invalid(format!(
                        "hosts[{i}] claims {} work units for {payout}ngnk, more than the cheapest work on chain buys (model {}: {} work units per token at {}ngnk per token)",
                        line.work_units,
                        model.id,
                        model.work_per_token.max(1),
                        model.price_per_token
                    )));
                }
            }
        }
        let mut keys = Vec::with_capacity(msg.hosts.len());
        for line in &msg.hosts {
            gonka_inference::require_staked(state, &line.host, "host paid by a batch")?;
            let key = state
                .bls_key(&line.host)?
                .and_then(|k| PublicKey::from_bytes(&k.pubkey))
                .ok_or_else(|| {
                    SettlementError::MissingBlsKey.err(format!(
                        "host {} has no registered BLS key to co-sign batches; register one with MsgRegisterBlsKey",
                        line.host
                    ))
                })?;
            keys.push(key);
        }
        // The next block samples every record the batch claims: paid for here, before the
        // signature check.
        let rate = crate::sampling::batch_sample_rate(state, &params, msg)?;
        ctx.gas.consume(
            crate::sampling::sampling_gas(ctx.gas.costs(), msg.record_count, rate),
            "batch leaf sampling",
        )?;
        ctx.gas.consume_bls_verify("batch host signature")?;
        let signature = Signature::from_bytes(&msg.host_signature).ok_or_else(|| {
            SettlementError::InvalidHostSignature
                .err("host_signature is not a compressed G2 point in the signature group")
        })?;
        if !fast_aggregate_verify(
            &keys,
            &batch_sign_bytes(&ctx.block.chain_id, msg),
            &signature,
        ) {
            return Err(SettlementError::InvalidHostSignature.err(format!(
                "host_signature is not the aggregate of the {} hosts' signatures over gonka/batch/v1 of this batch on chain {}",
                keys.len(),
                ctx.block.chain_id
            )));
        }
        for (line, &owed) in msg.requesters.iter().zip(&owed) {
            let mut escrow = state.escrow(&line.requester, agent)?.ok_or_else(|| {
                SettlementError::InsufficientEscrow.err(format!(
                    "requester {} holds no escrow for {agent}: the batch cannot charge it {owed}ngnk",
                    line.requester
                ))
            })?;
            let balance = escrow_balance(&escrow)?;
            if balance < owed {
                return Err(SettlementError::InsufficientEscrow.err(format!(
                    "requester {}'s escrow for {agent} holds {balance}ngnk, less than its {owed}ngnk in this batch",
                    line.requester
                )));
            }
            escrow.balance = (balance - owed).to_string();
            let release = escrow.release_at;
            state.put_escrow(&escrow, Some(release));
        }
        let id = state.next_batch_id()?;
        state.put_next_batch_id(id + 1);
        state.put_batch_number(agent, msg.number);
        state.put_block_records(height, in_block + msg.record_count);
        let batch = Batch {
            id,
            settled: Some(MsgSettleBatch {
                host_signature: Vec::new(),
                ..msg.clone()
            }),
            height,
            final_at: height + params.challenge_window_blocks,
            status: BatchStatus::Pending as i32,
            voided_reason: String::new(),
            time: ctx.block.time_seconds,
        };
        state.put_batch(&batch);
        state.index_batch_number(&batch);
        if params.leaf_sample_ppm > 0 {
            state.set_unsampled(id, true);
        }
        state.emit(events::settled(&batch));
        Ok(())
    }
}
