//! `MsgStake`: bond GNK; the first stake creates the participant.

use base64::Engine as _;
use gonka_auth::validate_address;
use gonka_bank::{transfer, Coin};
use gonka_proto::stake::{MsgStake, Participant};
use gonka_sdk::{ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{positive_amount, validate_consensus_key, validate_moniker};
use crate::state::bonded;
use crate::{bonded_pool_address, events, StakeError, StakeRead, StakeWrite};
use gonka_sdk::decode_as;

/// Consensus keys are shown in base64, as CometBFT's `/validators` and key files show them.
fn base64(key: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(key)
}

struct Stake {
    msg: MsgStake,
    amount: u128,
}

/// Decodes and statelessly checks a `MsgStake`.
pub fn decode(any: &gonka_sdk::Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgStake>(any).map(|msg| {
        let msg = msg?;
        validate_address("operator", &msg.operator)?;
        validate_moniker(&msg.moniker)?;
        if !msg.consensus_pubkey.is_empty() {
            validate_consensus_key(&msg.consensus_pubkey)?;
        }
        let amount = positive_amount("amount", &msg.amount)?;
        Ok(Box::new(Stake { msg, amount }) as Box<dyn Msg>)
    })
}

impl Msg for Stake {
    fn signer(&self) -> &str {
        &self.msg.operator
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.msg;
        let params = state.stake_params()?;
        let min_stake = params.min_stake;
        let mut participant = match state.participant(&msg.operator)? {
            Some(existing) => {
                if existing.jailed {
                    return Err(StakeError::Jailed.err(format!(
                        "participant {} is jailed until epoch {}; send MsgUnjail first",
                        msg.operator, existing.jailed_until_epoch
                    )));
                }
                existing
            }
            None => {
                if self.amount < min_stake {
                    return Err(StakeError::BelowMinStake.err(format!(
                        "a first stake must be at least {min_stake}ngnk, found {}ngnk",
                        self.amount
                    )));
                }
                Participant {
                    operator: msg.operator.clone(),
                    bonded: "0".into(),
                    ..Default::default()
                }
            }
        };
        if !msg.consensus_pubkey.is_empty() && msg.consensus_pubkey != participant.consensus_pubkey
        {
            if !participant.consensus_pubkey.is_empty() {
                return Err(StakeError::InvalidConsensusKey.err(format!(
                    "participant {} already has consensus key {}; it cannot be changed",
                    msg.operator,
                    base64(&participant.consensus_pubkey)
                )));
            }
            if let Some(owner) = state.consensus_key_owner(&msg.consensus_pubkey)? {
                return Err(StakeError::ConsensusKeyInUse.err(format!(
                    "consensus key {} is already used by participant {owner}",
                    base64(&msg.consensus_pubkey)
                )));
            }
            participant.consensus_pubkey = msg.consensus_pubkey.clone();
        }
        if !msg.moniker.is_empty() {
            participant.moniker = msg.moniker.clone();
        }
        transfer(
            state,
            &msg.operator,
            &bonded_pool_address(),
            &Coin::ngnk(self.amount),
        )?;
        let total = bonded(&participant)? + self.amount;
        participant.bonded = total.to_string();
        state.put_participant(&participant);
        state.emit(events::staked(&msg.operator, self.amount, total));
        Ok(())
    }
}
