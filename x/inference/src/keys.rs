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
