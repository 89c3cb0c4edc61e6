//! `MsgRemoveNode`: the host of an ML node removes it. Its stored records stay.

use gonka_auth::validate_address;
use gonka_proto::inference::MsgRemoveNode;
use gonka_sdk::{Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::validate_node_id;
use crate::{events, InferenceError, InferenceRead, InferenceWrite};
use gonka_sdk::decode_as;

struct RemoveNode(MsgRemoveNode);

/// Decodes and statelessly checks a `MsgRemoveNode`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgRemoveNode>(any).map(|msg| {
        let msg = msg?;
        validate_address("host", &msg.host)?;
        validate_node_id("node_id", &msg.node_id)?;
        Ok(Box::new(RemoveNode(msg)) as Box<dyn Msg>)
    })
}

impl Msg for RemoveNode {
    fn signer(&self) -> &str {
        &self.0.host
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let existing = state.node(&msg.node_id)?.ok_or_else(|| {
            InferenceError::UnknownNode.err(format!("node {} is not registered", msg.node_id))
        })?;
        if existing.host != msg.host {
            return Err(InferenceError::NotNodeHost.err(format!(
                "node {} is hosted by {}, not by {}",
                msg.node_id, existing.host, msg.host
            )));
        }
        state.delete_node(&existing);
        state.emit(events::node_removed(&msg.host, &msg.node_id));
        Ok(())
    }
}
