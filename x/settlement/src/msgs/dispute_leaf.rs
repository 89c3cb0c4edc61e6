//! `MsgDisputeLeaf`: the requester of an answer that is not on chain as a work record (most
//! leaves are never sampled or demanded) disputes it with the leaf and proof its transfer
//! agent serves. The proof is checked against the batch's root, the leaf's record is stored
//! in x/inference (not queued for sampling: its dispute's committee judges it) and
//! x/disputes opens the user dispute, as `MsgOpenDispute` does for a stored record.

use gonka_auth::validate_address;
use gonka_inference::{InferenceRead, InferenceWrite};
use gonka_proto::settlement::{BatchStatus, MsgDisputeLeaf};
use gonka_sdk::{decode_as, parse_amount, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::provide_leaf::leaf_record;
use crate::challenge::prove;
use crate::ledger::settled;
use crate::{SettlementError, SettlementRead};

struct DisputeLeaf {
    msg: MsgDisputeLeaf,
    deposit: u128,
}

/// Decodes and statelessly checks a `MsgDisputeLeaf`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgDisputeLeaf>(any).map(|msg| {
        let msg = msg?;
        validate_address("requester", &msg.requester)?;
        let deposit = parse_amount("deposit", &msg.deposit)?;
        let carries_record = msg
            .proof
            .as_ref()
            .and_then(|p| p.leaf.as_ref())
            .is_some_and(|leaf| leaf.record.is_some());
        if !carries_record {
            return Err(SettlementError::InvalidProof
                .err("MsgDisputeLeaf carries no leaf with its record and proof"));
        }
        Ok(Box::new(DisputeLeaf { msg, deposit }) as Box<dyn Msg>)
    })
}

impl Msg for DisputeLeaf {
    fn signer(&self) -> &str {
        &self.msg.requester
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let id = self.msg.batch_id;
        let proof = self.msg.proof.as_ref().expect("checked at decode");
        let leaf = proof.leaf.as_ref().expect("checked at decode");
        let record = leaf.record.as_ref().expect("checked at decode");
        // The cheap checks first: who may dispute, and whether the record is already there.
        gonka_disputes::require_requester(Some(record), &self.msg.requester)?;
        if state.record(&record.inference_id)?.is_some() {
            return Err(SettlementError::RecordOnChain.err(format!(
                "record {} is on chain already: dispute it with MsgOpenDispute",
                record.inference_id
            )));
        }
        let batch = state
            .batch(id)?
            .ok_or_else(|| SettlementError::UnknownBatch.err(format!("no batch with id {id}")))?;
        if batch.status == BatchStatus::Voided as i32 {
            return Err(SettlementError::BatchVoided.err(format!(
                "batch {id} was voided ({}): its requesters were refunded, its leaves are not disputed",
                batch.voided_reason
            )));
        }
        prove(ctx.gas, &batch, proof)?;
        let agent = settled(&batch).transfer_agent.clone();
        let stored = leaf_record(state, leaf, agent, ctx.block.height, 0)?;
        state.put_record_unsampled(&stored);
        gonka_disputes::open_user_dispute(
            state,
            ctx.block.height,
            &self.msg.requester,
            &stored,
            self.deposit,
            batch.height,
        )?;
        Ok(())
    }
}
