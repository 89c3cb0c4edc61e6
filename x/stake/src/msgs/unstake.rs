//! `MsgUnstake`: move bonded stake to unbonding; it is paid back automatically at the end
//! of epoch `current + unbonding_epochs`.

use gonka_auth::validate_address;
use gonka_bank::{transfer, Coin};
use gonka_proto::stake::{MsgUnstake, UnbondingEntry};
use gonka_sdk::{ErrorCode, Msg, Result, StateWrite, TxContext};

use super::positive_amount;
use crate::state::bonded;
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
        let epoch = gonka_epochs::current(state)?;
        let completes_epoch = epoch + state.stake_params()?.unbonding_epochs;
        transfer(
            state,
            &bonded_pool_address(),
            &unbonding_pool_address(),
            &Coin::ngnk(self.amount),
        )?;
        participant.bonded = remaining.to_string();
        state.put_reduced_participant(&participant)?;
        let entry = UnbondingEntry {
            operator: operator.clone(),
            amount: self.amount.to_string(),
            created_epoch: epoch,
            completes_epoch,
            id: state.next_unbonding_id()?,
        };
        state.put_unbonding(&entry);
        state.emit(events::unstaked(operator, self.amount, completes_epoch));
        Ok(())
    }
}
