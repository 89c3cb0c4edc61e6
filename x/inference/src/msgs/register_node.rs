//! `MsgRegisterNode`: a staked host registers an ML node under a new, unique id.

use gonka_proto::inference::{MsgRegisterNode, Node};
use gonka_sdk::{Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{check_node, node_from};
use crate::{events, InferenceError, InferenceRead, InferenceWrite};
use gonka_sdk::decode_as;

struct RegisterNode(Node);

/// Decodes and statelessly checks a `MsgRegisterNode`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgRegisterNode>(any).map(|msg| {
        let node = node_from(msg?.node)?;
        Ok(Box::new(RegisterNode(node)) as Box<dyn Msg>)
    })
}

impl Msg for RegisterNode {
    fn signer(&self) -> &str {
        &self.0.host
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let node = &self.0;
        if let Some(existing) = state.node(&node.id)? {
            return Err(InferenceError::DuplicateNode.err(format!(
                "node id {} is already registered by {}; choose another id",
                node.id, existing.host
            )));
        }
        check_node(state, &ctx.block.chain_id, node)?;
        state.put_node(node);
        state.emit(events::node("node_registered", node));
        Ok(())
    }
}
