//! The inference key schema: the only place inference storage keys are formed.
//!
//! Node ids are restricted to `[A-Za-z0-9._-]` and inference ids to lowercase hex, so
//! neither can contain the `/` separator of the index keys.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"inference/params".to_vec()
}

/// Prefix of every model.
pub fn models() -> Vec<u8> {
    b"inference/model/".to_vec()
}

/// The id of the model whose work costs the fewest ngnk per unit.
pub fn cheapest_work_model() -> Vec<u8> {
    b"inference/cheapest_work_model".to_vec()
}

/// One model, by id.
pub fn model(id: &str) -> Vec<u8> {
    let mut key = models();
    key.extend_from_slice(id.as_bytes());
    key
}

/// Prefix of every ML node.
pub fn nodes() -> Vec<u8> {
    b"inference/node/".to_vec()
}

/// One ML node, by id.
pub fn node(id: &str) -> Vec<u8> {
    let mut key = nodes();
    key.extend_from_slice(id.as_bytes());
    key
}

/// Prefix of the index of `host`'s nodes (value: empty; the node id ends the key).
pub fn nodes_of_host(host: &str) -> Vec<u8> {
    format!("inference/host_node/{host}/").into_bytes()
}

/// Index entry: node `id` is hosted by `host`.
pub fn node_of_host(host: &str, id: &str) -> Vec<u8> {
    let mut key = nodes_of_host(host);
    key.extend_from_slice(id.as_bytes());
    key
}

/// A node's public key (hex) → the id of the node registered with it: keys are unique.
pub fn node_key(pubkey: &[u8]) -> Vec<u8> {
    let mut key = b"inference/node_key/".to_vec();
    key.extend_from_slice(hex::encode(pubkey).as_bytes());
    key
}

/// Prefix of every transfer agent.
pub fn transfer_agents() -> Vec<u8> {
    b"inference/transfer_agent/".to_vec()
}

/// One transfer agent, by address.
pub fn transfer_agent(address: &str) -> Vec<u8> {
    let mut key = transfer_agents();
    key.extend_from_slice(address.as_bytes());
    key
}

/// One stored work record, by inference id.
pub fn record(inference_id: &str) -> Vec<u8> {
    format!("inference/record/{inference_id}").into_bytes()
}

/// Prefix of the index of records stored in `epoch` (value: the inference id).
pub fn records_of_epoch(epoch: u64) -> Vec<u8> {
    format!("inference/record_epoch/{epoch:020}/").into_bytes()
}

/// Index entry: `inference_id` was stored in `epoch`.
pub fn record_in_epoch(epoch: u64, inference_id: &str) -> Vec<u8> {
    let mut key = records_of_epoch(epoch);
    key.extend_from_slice(inference_id.as_bytes());
    key
}

/// Prefix of the queue of records stored since the disputes sampler last drained it (once
/// per block), so per-block sampling work follows that block's records, not the epoch's.
pub fn new_records() -> Vec<u8> {
    b"inference/new_record/".to_vec()
}

/// Queue entry: record `inference_id` was stored and awaits sampling.
pub fn new_record(inference_id: &str) -> Vec<u8> {
    let mut key = new_records();
    key.extend_from_slice(inference_id.as_bytes());
    key
}

/// The inference id of a [`new_record`] key.
pub fn parse_new_record(key: &[u8]) -> Option<String> {
    let id = key.strip_prefix(new_records().as_slice())?;
    String::from_utf8(id.to_vec()).ok()
}

/// Prefix of the index of records executed by `node` in `epoch` (value: the inference id).
pub fn records_of_executor(node: &str, epoch: u64) -> Vec<u8> {
    format!("inference/record_executor/{node}/{epoch:020}/").into_bytes()
}

/// Index entry: `inference_id` was executed by `node` in `epoch`.
pub fn record_of_executor(node: &str, epoch: u64, inference_id: &str) -> Vec<u8> {
    let mut key = records_of_executor(node, epoch);
    key.extend_from_slice(inference_id.as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "ab12";

    #[test]
    fn fixed_keys() {
        assert_eq!(params(), b"inference/params");
        assert_eq!(record(ID), b"inference/record/ab12");
    }

    #[test]
    fn registry_entries_group_under_their_prefix() {
        assert_eq!(model("org/m-1"), b"inference/model/org/m-1");
        assert!(model("org/m-1").starts_with(&models()));
        assert_eq!(node("n-1"), b"inference/node/n-1");
        assert!(node("n-1").starts_with(&nodes()));
        assert_eq!(node_key(&[0xab, 1]), b"inference/node_key/ab01");
        assert_eq!(
            node_of_host("gonka1h", "n-1"),
            b"inference/host_node/gonka1h/n-1"
        );
        assert!(node_of_host("gonka1h", "n-1").starts_with(&nodes_of_host("gonka1h")));
        assert!(!nodes_of_host("gonka1h").starts_with(&nodes()));
        assert!(!node_key(&[0xab]).starts_with(&nodes()));
        assert_eq!(
            transfer_agent("gonka1ta"),
            b"inference/transfer_agent/gonka1ta"
        );
        assert!(transfer_agent("gonka1ta").starts_with(&transfer_agents()));
    }

    #[test]
    fn new_record_queue_keys_parse_back() {
        assert_eq!(new_record(ID), b"inference/new_record/ab12");
        assert!(new_record(ID).starts_with(&new_records()));
        assert_eq!(parse_new_record(&new_record(ID)).as_deref(), Some(ID));
        assert_eq!(parse_new_record(&record(ID)), None);
    }

    #[test]
    fn record_indexes_sort_by_epoch() {
        let key = record_in_epoch(7, ID);
        assert_eq!(key, b"inference/record_epoch/00000000000000000007/ab12");
        assert!(key.starts_with(&records_of_epoch(7)));
        assert!(record_in_epoch(9, ID) < record_in_epoch(10, ID));
        let key = record_of_executor("n-1", 7, ID);
        assert_eq!(
            key,
            b"inference/record_executor/n-1/00000000000000000007/ab12"
        );
        assert!(key.starts_with(&records_of_executor("n-1", 7)));
    }
}
