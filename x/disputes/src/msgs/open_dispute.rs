//! `MsgOpenDispute`: the requester of a work record disputes it, escrowing a deposit of at
//! least `min_deposit`; a committee decides.

use gonka_bank::{transfer, Coin};
use gonka_inference::InferenceRead;
use gonka_proto::disputes::{Dispute, MsgOpenDispute};
use gonka_proto::inference::{StoredRecord, WorkRecord};
use gonka_sdk::{parse_amount, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{check_address, check_inference_id};
use crate::settle::{self, Opening};
use crate::state::escrow_address;
use crate::{kind, min_deposit, DisputesError, DisputesRead};
use gonka_sdk::decode_as;

struct OpenDispute {
    msg: MsgOpenDispute,
    deposit: u128,
}

/// Decodes and statelessly checks a `MsgOpenDispute`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgOpenDispute>(any).map(|msg| {
        let msg = msg?;
        check_address("requester", &msg.requester)?;
        check_inference_id(&msg.inference_id)?;
        let deposit = parse_amount("deposit", &msg.deposit)
            .map_err(|e| DisputesError::InvalidMsg.err(e.log))?;
        Ok(Box::new(OpenDispute { msg, deposit }) as Box<dyn Msg>)
    })
}

impl Msg for OpenDispute {
    fn signer(&self) -> &str {
        &self.msg.requester
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let id = &self.msg.inference_id;
        let stored = state.record(id)?.ok_or_else(|| {
            DisputesError::UnknownRecord.err(format!(
                "no work record with inference id {id}: a leaf nobody sampled or demanded is disputed with its proof from the transfer agent (MsgDisputeLeaf)"
            ))
        })?;
        open_user_dispute(
            state,
            ctx.block.height,
            &self.msg.requester,
            &stored,
            self.deposit,
            stored.height,
        )
        .map(|_| ())
    }
}

/// Only `record`'s requester may dispute it.
pub fn require_requester(record: Option<&WorkRecord>, requester: &str) -> Result<()> {
    let id = record.map_or("", |r| r.inference_id.as_str());
    let owner = record.map_or("", |r| r.requester.as_str());
    if owner != requester {
        return Err(DisputesError::NotRequester.err(format!(
            "only the requester {owner} may dispute record {id}, not {requester}"
        )));
    }
    Ok(())
}

/// Opens `requester`'s dispute of the stored record `stored`, moving `deposit` to the
/// disputes escrow: what MsgOpenDispute does, and x/settlement's MsgDisputeLeaf once it
/// stored the proven leaf's record. Only the record's requester may, once per record, with at
/// least `min_deposit`, until `dispute_window_blocks` after `settled_height` (the height its
/// work was settled on chain).
pub fn open_user_dispute(
    state: &mut dyn StateWrite,
    height: u64,
    requester: &str,
    stored: &StoredRecord,
    deposit: u128,
    settled_height: u64,
) -> Result<Dispute> {
    require_requester(stored.record.as_ref(), requester)?;
    let id = stored
        .record
        .as_ref()
        .map_or("", |r| r.inference_id.as_str());
    let params = state.disputes_params()?;
    let window = params.dispute_window_blocks;
    let last = settled_height.saturating_add(window);
    if height > last {
        return Err(DisputesError::DisputeWindowClosed.err(format!(
            "record {id} was settled at height {settled_height} and could be disputed until height {last} (dispute_window_blocks {window}); this is height {height}"
        )));
    }
    if let Some(existing) = state.record_dispute(id)? {
        let status = state
            .dispute(existing)?
            .map(|d| d.status)
            .unwrap_or_default();
        return Err(DisputesError::AlreadyDisputed.err(format!(
            "record {id} already has dispute {existing} ({status}); a record is disputed once"
        )));
    }
    let least = min_deposit(&params)?;
    if deposit < least {
        return Err(DisputesError::DepositTooLow.err(format!(
            "a dispute deposit must be at least {least}ngnk, found {deposit}ngnk"
        )));
    }
    transfer(state, requester, &escrow_address(), &Coin::ngnk(deposit))?;
    settle::open(
        state,
        height,
        stored,
        Opening {
            kind: kind::USER,
            accuser: requester,
            accuser_commitment: Vec::new(),
            deposit,
        },
    )
}
