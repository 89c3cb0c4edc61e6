//! Inference events. Amounts carry their denom (`123ngnk`), like bank and stake events.

use gonka_proto::inference::{Node, TransferAgent};
use gonka_sdk::Event;

/// `node_registered` / `node_updated`.
pub fn node(kind: &str, node: &Node) -> Event {
    Event::new(kind)
        .attr("node_id", &node.id)
        .attr("host", &node.host)
        .attr("models", node.models.join(","))
}

/// `node_removed`.
pub fn node_removed(host: &str, node_id: &str) -> Event {
    Event::new("node_removed")
        .attr("node_id", node_id)
        .attr("host", host)
}

/// `host_deregistered`: `operator`'s bond fell below `min_stake`, so its nodes and its
/// transfer agent registration were removed.
pub fn deregistered(operator: &str, nodes: &[String], transfer_agent: bool) -> Event {
    Event::new("host_deregistered")
        .attr("operator", operator)
        .attr("nodes", nodes.join(","))
        .attr("transfer_agent", transfer_agent)
}

/// `transfer_agent_registered`.
pub fn transfer_agent(agent: &TransferAgent) -> Event {
    Event::new("transfer_agent_registered")
        .attr("address", &agent.address)
        .attr("url", &agent.url)
}
