//! `MsgOpenDispute`: the requester of a work record disputes it, escrowing a deposit of at
//! least `min_deposit`; a committee decides.

use gonka_bank::{transfer, Coin};
use gonka_inference::InferenceRead;
use gonka_proto::disputes::MsgOpenDispute;
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
            DisputesError::UnknownRecord.err(format!("no work record with inference id {id}"))
        })?;
        let requester = stored
            .record
            .as_ref()
            .map(|r| r.requester.as_str())
            .unwrap_or_default();
        if requester != self.msg.requester {
            return Err(DisputesError::NotRequester.err(format!(
                "only the requester {requester} may dispute record {id}, not {}",
                self.msg.requester
            )));
        }
        let window = state.disputes_params()?.dispute_window_blocks;
        let last = stored.height.saturating_add(window);
        if ctx.block.height > last {
            return Err(DisputesError::DisputeWindowClosed.err(format!(
                "record {id} was settled at height {} and could be disputed until height {last} (dispute_window_blocks {window}); this is height {}",
                stored.height, ctx.block.height
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
        let least = min_deposit(&state.disputes_params()?)?;
        if self.deposit < least {
            return Err(DisputesError::DepositTooLow.err(format!(
                "a dispute deposit must be at least {least}ngnk, found {}ngnk",
                self.deposit
            )));
        }
        transfer(
            state,
            &self.msg.requester,
            &escrow_address(),
            &Coin::ngnk(self.deposit),
        )?;
        settle::open(
            state,
            ctx.block.height,
            &stored,
            Opening {
                kind: kind::USER,
                accuser: &self.msg.requester,
                accuser_commitment: Vec::new(),
                deposit: self.deposit,
            },
        )?;
        Ok(())
    }
}
