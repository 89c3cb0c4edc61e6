//! `MsgDemandLeaf`: anyone makes the transfer agent publish one leaf of a pending batch, with
//! a deposit. It must come at least `leaf_answer_blocks` before the batch becomes final, and
//! one demand per leaf is open at a time.

use gonka_auth::validate_address;
use gonka_bank::{transfer, Coin};
use gonka_proto::batch::parse_decimal;
use gonka_proto::settlement::{BatchStatus, LeafDemand, MsgDemandLeaf};
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use crate::ledger::settled;
use crate::{events, pool_address, SettlementError, SettlementRead, SettlementWrite};

struct DemandLeaf {
    msg: MsgDemandLeaf,
    deposit: u128,
}

/// Decodes and statelessly checks a `MsgDemandLeaf`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgDemandLeaf>(any).map(|msg| {
        let msg = msg?;
        validate_address("challenger", &msg.challenger)?;
        let deposit = parse_decimal(&msg.deposit).ok_or_else(|| {
            SettlementError::InvalidProof.err(format!(
                "deposit {:?} must be a decimal amount of ngnk",
                msg.deposit
            ))
        })?;
        Ok(Box::new(DemandLeaf { msg, deposit }) as Box<dyn Msg>)
    })
}

impl Msg for DemandLeaf {
    fn signer(&self) -> &str {
        &self.msg.challenger
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let (id, index) = (self.msg.batch_id, self.msg.index);
        let params = state.settlement_params()?;
        let least = parse_decimal(&params.min_leaf_deposit).unwrap_or(u128::MAX);
        if self.deposit < least {
            return Err(SettlementError::InvalidProof.err(format!(
                "a leaf demand deposits at least {least}ngnk, found {}ngnk",
                self.deposit
            )));
        }
        let batch = state
            .batch(id)?
            .ok_or_else(|| SettlementError::UnknownBatch.err(format!("no batch with id {id}")))?;
        let height = ctx.block.height;
        let deadline = height + params.leaf_answer_blocks;
        if batch.status != BatchStatus::Pending as i32 || deadline >= batch.final_at {
            return Err(SettlementError::BatchNotPending.err(format!(
                "batch {id} becomes final at height {}: leaf demands must come {} blocks before it",
                batch.final_at, params.leaf_answer_blocks
            )));
        }
        let count = settled(&batch).record_count;
        if index >= count {
            return Err(SettlementError::InvalidProof.err(format!(
                "batch {id} commits {count} records; there is no leaf {index}"
            )));
        }
        if state.leaf_demand(id, index)?.is_some() {
            return Err(SettlementError::InvalidProof
                .err(format!("leaf {index} of batch {id} is already demanded")));
        }
        transfer(
            state,
            &self.msg.challenger,
            &pool_address(),
            &Coin::ngnk(self.deposit),
        )?;
        let demand = LeafDemand {
            batch_id: id,
            index,
            challenger: self.msg.challenger.clone(),
            deposit: self.deposit.to_string(),
            deadline,
            sampled_ppm: 0,
        };
        state.put_leaf_demand(&demand, Some(&settled(&batch).transfer_agent));
        state.emit(events::demand("leaf_demanded", &demand));
        Ok(())
    }
}
