//! `MsgRegisterTransferAgent`: a staked participant registers (or updates) itself as a
//! transfer agent with its public URL and key.

use gonka_auth::validate_address;
use gonka_proto::inference::{MsgRegisterTransferAgent, TransferAgent};
use gonka_sdk::{Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{require_staked, validate_pubkey, validate_url};
use crate::{events, InferenceError, InferenceWrite};
use gonka_sdk::decode_as;

struct RegisterTransferAgent(TransferAgent);

/// Decodes and statelessly checks a `MsgRegisterTransferAgent`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgRegisterTransferAgent>(any).map(|msg| {
        let msg = msg?;
        validate_address("address", &msg.address)?;
        validate_url("url", &msg.url)
            .and_then(|()| validate_pubkey("pubkey", &msg.pubkey))
            .map_err(|log| InferenceError::InvalidTransferAgent.err(log))?;
        Ok(Box::new(RegisterTransferAgent(TransferAgent {
            address: msg.address,
            url: msg.url,
            pubkey: msg.pubkey,
        })) as Box<dyn Msg>)
    })
}

impl Msg for RegisterTransferAgent {
    fn signer(&self) -> &str {
        &self.0.address
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        require_staked(state, &self.0.address, "transfer agent")?;
        state.put_transfer_agent(&self.0);
        state.emit(events::transfer_agent(&self.0));
        Ok(())
    }
}
