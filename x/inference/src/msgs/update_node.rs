//! `MsgUpdateNode`: the host of an ML node replaces its models, capacity, endpoint or key.

use gonka_proto::inference::{MsgUpdateNode, Node};
use gonka_sdk::{Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{check_node, node_from};
use crate::{events, InferenceError, InferenceRead, InferenceWrite};
use gonka_sdk::decode_as;

struct UpdateNode(Node);

/// Decodes and statelessly checks a `MsgUpdateNode`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgUpdateNode>(any).map(|msg| {
        let node = node_from(msg?.node)?;
        Ok(Box::new(UpdateNode(node)) as Box<dyn Msg>)
    })
}

impl Msg for UpdateNode {
    fn signer(&self) -> &str {
        &self.0.host
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let node = &self.0;
        let existing = state.node(&node.id)?.ok_or_else(|| {
            InferenceError::UnknownNode.err(format!(
                "node {} is not registered; register it with MsgRegisterNode",
                node.id
            ))
        })?;
        if existing.host != node.host {
            return Err(InferenceError::NotNodeHost.err(format!(
                "node {} is hosted by {}, not by {}",
                node.id, existing.host, node.host
            )));
        }
        check_node(state, &ctx.block.chain_id, node)?;
        state.delete_node(&existing);
        state.put_node(node);
        state.emit(events::node("node_updated", node));
        Ok(())
    }
}
