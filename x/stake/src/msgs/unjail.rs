//! `MsgUnjail`: end a jailing once `jailed_until_epoch` is reached.

use gonka_auth::validate_address;
use gonka_proto::stake::MsgUnjail;
use gonka_sdk::{ErrorCode, Msg, Result, StateWrite, TxContext};

use crate::{events, StakeError, StakeRead, StakeWrite};
use gonka_sdk::decode_as;

struct Unjail {
    msg: MsgUnjail,
}

/// Decodes and statelessly checks a `MsgUnjail`.
pub fn decode(any: &gonka_sdk::Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgUnjail>(any).map(|msg| {
        let msg = msg?;
        validate_address("operator", &msg.operator)?;
        Ok(Box::new(Unjail { msg }) as Box<dyn Msg>)
    })
}

impl Msg for Unjail {
    fn signer(&self) -> &str {
        &self.msg.operator
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let operator = &self.msg.operator;
        let mut participant = state.existing_participant(operator)?;
        let epoch = gonka_epochs::current(state)?;
        if !participant.jailed {
            return Err(
                StakeError::NotUnjailable.err(format!("participant {operator} is not jailed"))
            );
        }
        if participant.tombstoned {
            return Err(StakeError::Tombstoned.err(format!(
                "participant {operator} double signed and is jailed for good"
            )));
        }
        if epoch < participant.jailed_until_epoch {
            return Err(StakeError::NotUnjailable.err(format!(
                "participant {operator} is jailed until epoch {}; the current epoch is {epoch}",
                participant.jailed_until_epoch
            )));
        }
        participant.jailed = false;
        state.put_participant(&participant);
        state.emit(events::jailed(operator, false, epoch));
        Ok(())
    }
}
