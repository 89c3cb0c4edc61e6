//! Inference events. Amounts carry their denom (`123ngnk`), like bank and stake events.

use gonka_proto::inference::{Node, TransferAgent, WorkRecord};
use gonka_sdk::{Error, Event};

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

/// `inference_record` of a record that was charged, credited and stored (outcome `stored`).
pub fn stored(
    record: &WorkRecord,
    transfer_agent: &str,
    executor_host: &str,
    cost: u128,
    commission: u128,
) -> Event {
    Event::new("inference_record")
        .attr("id", &record.inference_id)
        .attr("requester", &record.requester)
        .attr("executor", &record.executor_node)
        .attr("executor_host", executor_host)
        .attr("transfer_agent", transfer_agent)
        .attr("model", &record.model)
        .attr(
            "tokens",
            record
                .prompt_tokens
                .saturating_add(record.completion_tokens),
        )
        .attr("cost", format!("{cost}ngnk"))
        .attr("commission", format!("{commission}ngnk"))
        .attr("outcome", "stored")
}

/// `inference_record` of a record refused alone (outcome `refused`): nothing of it changed
/// state; `codespace`, `code` and `reason` say why.
pub fn refused(record: &WorkRecord, transfer_agent: &str, error: &Error) -> Event {
    Event::new("inference_record")
        .attr("id", &record.inference_id)
        .attr("requester", &record.requester)
        .attr("executor", &record.executor_node)
        .attr("transfer_agent", transfer_agent)
        .attr("outcome", "refused")
        .attr("codespace", error.codespace)
        .attr("code", error.code)
        .attr("reason", &error.log)
}

/// `work_batch`: how many records of a batch were stored and refused.
pub fn batch(transfer_agent: &str, stored: usize, refused: usize) -> Event {
    Event::new("work_batch")
        .attr("transfer_agent", transfer_agent)
        .attr("stored", stored)
        .attr("refused", refused)
}
