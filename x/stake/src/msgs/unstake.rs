//! `MsgUnstake`: move bonded stake to unbonding; it is paid back automatically at the end
//! of epoch `current + unbonding_epochs`. At least `min_unstake` unless it unstakes
//! everything left; unstakes completing in the same epoch share one entry, and a participant
//! has at most `max_unbonding_entries` (every slash reads them all).

use gonka_auth::validate_address;
use gonka_bank::{transfer, Coin};
use gonka_proto::stake::{MsgUnstake, UnbondingEntry};
use gonka_sdk::{ErrorCode, Msg, Result, StateWrite, TxContext};

use super::positive_amount;
use crate::state::{bonded, unbonding_amount};
use crate::{
    bonded_pool_address, events, unbonding_pool_address, StakeError, StakeRead, StakeWrite,
};
use gonka_sdk::decode_as;

struct Unstake {
    msg: MsgUnstake,
    amount: u128,
}

/// Decodes and statelessly checks a `MsgUnstake`.
pub fn decode(any: &gonka_sdk::Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgUnstake>(any).map(|msg| {
        let msg = msg?;
        validate_address("operator", &msg.operator)?;
        let amount = positive_amount("amount", &msg.amount)?;
        Ok(Box::new(Unstake { msg, amount }) as Box<dyn Msg>)
    })
}

impl Msg for Unstake {
    fn signer(&self) -> &str {
        &self.msg.operator
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let operator = &self.msg.operator;
        let mut participant = state.existing_participant(operator)?;
        if participant.jailed {
            return Err(StakeError::Jailed.err(format!(
                "participant {operator} is jailed until epoch {}; send MsgUnjail first",
                participant.jailed_until_epoch
            )));
        }
        let current = bonded(&participant)?;
        let remaining = current.checked_sub(self.amount).ok_or_else(|| {
            StakeError::UnstakeExceedsBonded.err(format!(
                "cannot unstake {}ngnk: {operator} has {current}ngnk bonded",
                self.amount
            ))
        })?;
        let params = state.stake_params()?;
        if self.amount < params.min_unstake && remaining > 0 {
            return Err(StakeError::UnstakeBelowMinimum.err(format!(
                "cannot unstake {}ngnk: an unstake is at least {}ngnk (min_unstake) unless it unstakes everything bonded ({current}ngnk)",
                self.amount, params.min_unstake
            )));
        }
        let epoch = gonka_epochs::current(state)?;
        let completes_epoch = epoch + params.unbonding_epochs;
        let entries = state.operator_unbondings(operator)?;
        let joined = entries
            .iter()
            .find(|e| e.completes_epoch == completes_epoch)
            .cloned();
        let entry = match joined {
            Some(mut entry) => {
                entry.amount = (unbonding_amount(&entry)? + self.amount).to_string();
                entry
            }
            None if entries.len() as u64 >= params.max_unbonding_entries => {
                return Err(StakeError::TooManyUnbondings.err(format!(
                    "{operator} already has {} unbonding entries (max_unbonding_entries); the next completes at the end of epoch {}: unstake again after it",
                    entries.len(),
                    entries.iter().map(|e| e.completes_epoch).min().unwrap_or(completes_epoch)
                )));
            }
            None => UnbondingEntry {
                operator: operator.clone(),
                amount: self.amount.to_string(),
                created_epoch: epoch,
                completes_epoch,
                id: state.next_unbonding_id()?,
            },
        };
        transfer(
            state,
            &bonded_pool_address(),
            &unbonding_pool_address(),
            &Coin::ngnk(self.amount),
        )?;
        participant.bonded = remaining.to_string();
        state.put_reduced_participant(&participant)?;
        state.put_unbonding(&entry);
        state.emit(events::unstaked(operator, self.amount, completes_epoch));
        Ok(())
    }
}
