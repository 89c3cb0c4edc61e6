//! Inference hooks: hosts whose bond fell below `min_stake` lose their registrations.

use gonka_sdk::{HookOutput, Result, StateWrite};

use crate::{events, InferenceRead, InferenceWrite};

/// Removes the nodes and the transfer agent registration of every participant whose bond
/// fell below stake's `min_stake` in this block ([`gonka_stake::take_fallen_below_min`]):
/// they could neither be paid nor submit work any more, and routing to them would only
/// waste requests. They register again after staking again. Work proportional to this
/// block's unstakes and slashes.
pub fn end_block(state: &mut dyn StateWrite) -> Result<HookOutput> {
    for operator in gonka_stake::take_fallen_below_min(state)? {
        let nodes = state.nodes_of_host(&operator)?;
        for node in &nodes {
            state.delete_node(node);
        }
        let transfer_agent = state.transfer_agent(&operator)?.is_some();
        if transfer_agent {
            state.delete_transfer_agent(&operator);
        }
        if transfer_agent || !nodes.is_empty() {
            let ids: Vec<String> = nodes.into_iter().map(|n| n.id).collect();
            state.emit(events::deregistered(&operator, &ids, transfer_agent));
        }
    }
    Ok(HookOutput::default())
}
