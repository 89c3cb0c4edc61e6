//! Genesis import and export for settlement: parameters, escrows, batches still in their
//! window, batch numbers. Escrowed money and pending debits sit in the module's pool, whose
//! balance bank's genesis carries; import checks the two agree.

use gonka_bank::{BankRead, NATIVE_DENOM};
use gonka_epochs::EpochsRead;
use gonka_inference::InferenceRead;
use gonka_proto::settlement::{Batch, BatchNumber, BatchStatus, Escrow, GenesisState, LeafDemand};
use gonka_sdk::{parse_amount, ErrorCode, Genesis, HookOutput, Result, StateRead, StateWrite};
use gonka_stake::StakeRead;

use crate::ledger::settled;
use crate::{
    default_params, escrow_balance, pool_address, validate_params, Settlement, SettlementError,
    SettlementRead, SettlementWrite, NAME,
};

fn invalid(log: String) -> gonka_sdk::Error {
    SettlementError::InvalidParams.err(log)
}

impl Genesis for Settlement {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Validates the parameters, also against inference's payload retention and stake's
    /// unbonding, then stores them, every escrow, pending batch and open leaf demand (whose
    /// money must be the pool's), and the batch numbers.
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = genesis.params.unwrap_or_else(default_params);
        validate_params(&params)?;
        let window = params.challenge_window_blocks;
        let retention = state.inference_params()?.payload_retention_blocks;
        if window > retention {
            return Err(invalid(format!(
                "app_state.settlement.params.challenge_window_blocks ({window}) must not exceed app_state.inference.params.payload_retention_blocks ({retention}): a batch's leaves must stay available while it can be challenged"
            )));
        }
        let unbonding = state
            .stake_params()?
            .unbonding_epochs
            .saturating_mul(state.epochs_params()?.epoch_length);
        if window >= unbonding {
            return Err(invalid(format!(
                "app_state.settlement.params.challenge_window_blocks ({window}) must be shorter than stake's unbonding ({unbonding} blocks): a cheat could otherwise unbond before its batch can be challenged"
            )));
        }
        state.put_settlement_params(&params);
        let mut held = 0u128;
        for escrow in &genesis.escrows {
            held += escrow_balance(escrow)?;
            state.put_escrow(escrow, None);
        }
        for batch in &genesis.batches {
            if batch.status != BatchStatus::Pending as i32 || batch.settled.is_none() {
                return Err(invalid(format!(
                    "app_state.settlement.batches[] holds pending batches with their message; batch {} is not one",
                    batch.id
                )));
            }
            for line in &settled(batch).requesters {
                held += parse_amount("requester total", &line.amount)?;
            }
            state.put_batch(batch);
            state.index_batch_number(batch);
        }
        // Indexed under their batch's transfer agent; a demand on a voided batch (export
        // keeps only pending ones) merely waits to return its deposit, unindexed.
        for demand in &genesis.demands {
            held += parse_amount("leaf demand deposit", &demand.deposit)?;
            let agent = state
                .batch(demand.batch_id)?
                .map(|batch| settled(&batch).transfer_agent.clone());
            state.put_leaf_demand(demand, agent.as_deref());
        }
        let pool = state.balance(&pool_address(), NATIVE_DENOM)?;
        if pool != held {
            return Err(invalid(format!(
                "the settlement pool {} holds {pool}ngnk but its escrows and pending batches hold {held}ngnk",
                pool_address()
            )));
        }
        for number in &genesis.batch_numbers {
            state.put_batch_number(&number.transfer_agent, number.number);
        }
        state.put_next_batch_id(genesis.next_batch_id.max(1));
        Ok(HookOutput::default())
    }

    /// Heights restart like epochs: the new chain's block 1 stands for the first block of the
    /// current epoch, so every expiry, release and final height moves down by the heights
    /// before it (module state does not know the exact last height; windows only grow).
    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        let pending = BatchStatus::Pending as i32;
        let now = state.current_epoch()?.start_height.saturating_sub(1);
        Ok(GenesisState {
            params: Some(state.settlement_params()?),
            escrows: state
                .escrows()?
                .into_iter()
                .map(|e| Escrow {
                    expires_at: e.expires_at.saturating_sub(now),
                    release_at: e.release_at.saturating_sub(now).max(1),
                    ..e
                })
                .collect(),
            batches: state
                .batches()?
                .into_iter()
                .filter(|b| b.status == pending)
                .map(|b| Batch {
                    height: b.height.saturating_sub(now),
                    final_at: b.final_at.saturating_sub(now).max(1),
                    ..b
                })
                .collect(),
            batch_numbers: state
                .batch_numbers()?
                .into_iter()
                .map(|(transfer_agent, number)| BatchNumber {
                    transfer_agent,
                    number,
                })
                .collect(),
            next_batch_id: state.next_batch_id()?,
            demands: state
                .leaf_demands()?
                .into_iter()
                .map(|d| LeafDemand {
                    deadline: d.deadline.saturating_sub(now).max(1),
                    ..d
                })
                .collect(),
        })
    }
}
