//! `MsgProvideLeaf`: the answer to a leaf demand, the leaf with its proof (anyone holding it
//! may send it). The deposit goes to the batch's transfer agent, and the leaf's record is
//! stored in x/inference (unless a record with its inference id is already there), where
//! x/disputes samples it for re-execution and its requester may dispute it: at the
//! executor's rate divided by the demand's `sampled_ppm` for a leaf the chain sampled
//! ([`crate::sampling`]), at the executor's rate for a leaf someone demanded.

use gonka_auth::validate_address;
use gonka_bank::{transfer, Coin};
use gonka_proto::settlement::{BatchLeaf, MsgProvideLeaf};
use gonka_sdk::{decode_as, parse_amount, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use gonka_inference::{InferenceRead, InferenceWrite};
use gonka_proto::inference::StoredRecord;

use crate::challenge::prove;
use crate::ledger::settled;
use crate::{events, pool_address, SettlementError, SettlementRead, SettlementWrite};

struct ProvideLeaf(MsgProvideLeaf);

/// Decodes and statelessly checks a `MsgProvideLeaf`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgProvideLeaf>(any).map(|msg| {
        let msg = msg?;
        validate_address("sender", &msg.sender)?;
        if msg.proof.is_none() {
            return Err(SettlementError::InvalidProof.err("MsgProvideLeaf carries no proof"));
        }
        Ok(Box::new(ProvideLeaf(msg)) as Box<dyn Msg>)
    })
}

impl Msg for ProvideLeaf {
    fn signer(&self) -> &str {
        &self.0.sender
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let id = self.0.batch_id;
        let proof = self.0.proof.as_ref().expect("checked at decode");
        let demand = state.leaf_demand(id, proof.index)?.ok_or_else(|| {
            SettlementError::InvalidProof
                .err(format!("nobody demands leaf {} of batch {id}", proof.index))
        })?;
        let batch = state
            .batch(id)?
            .ok_or_else(|| SettlementError::UnknownBatch.err(format!("no batch with id {id}")))?;
        prove(ctx.gas, &batch, proof)?;
        let agent = settled(&batch).transfer_agent.clone();
        let deposit = parse_amount("deposit", &demand.deposit)?;
        if deposit > 0 {
            transfer(state, &pool_address(), &agent, &Coin::ngnk(deposit))?;
        }
        state.delete_leaf_demand(&demand, Some(&agent));
        state.emit(events::demand("leaf_provided", &demand));
        let leaf = proof.leaf.as_ref().expect("proven");
        let Some(record) = leaf.record.as_ref() else {
            return Ok(());
        };
        if state.record(&record.inference_id)?.is_none() {
            let stored = leaf_record(state, leaf, agent, ctx.block.height, demand.sampled_ppm)?;
            state.put_record(&stored);
        }
        Ok(())
    }
}

/// The work record a proven `leaf` of a batch of `transfer_agent` becomes at `height` (what
/// x/inference stores for a provided or disputed leaf); `sampled_ppm` as a demand has it.
pub(super) fn leaf_record(
    state: &dyn StateWrite,
    leaf: &BatchLeaf,
    transfer_agent: String,
    height: u64,
    sampled_ppm: u64,
) -> Result<StoredRecord> {
    Ok(StoredRecord {
        record: leaf.record.clone(),
        transfer_agent,
        executor_host: leaf.executor_host.clone(),
        cost: leaf.cost.clone(),
        epoch: gonka_epochs::current(state)?,
        height,
        sampled_ppm,
    })
}
