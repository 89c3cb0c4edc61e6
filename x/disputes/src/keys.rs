//! The disputes key schema: the only place disputes storage keys are formed.
//!
//! Inference ids are lowercase hex and addresses bech32, so neither contains `/`; numbers
//! are zero-padded so keys sort numerically.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"disputes/params".to_vec()
}

/// Prefix of the records already seen by the sampler in `epoch`.
pub fn seen_in_epoch(epoch: u64) -> Vec<u8> {
    format!("disputes/seen/{epoch:020}/").into_bytes()
}

/// Marker: record `inference_id` of `epoch` was seen by the sampler.
pub fn seen(epoch: u64, inference_id: &str) -> Vec<u8> {
    let mut key = seen_in_epoch(epoch);
    key.extend_from_slice(inference_id.as_bytes());
    key
}

/// Prefix of the records stored in the last block, to be sampled in the next one.
pub fn to_sample_queue() -> Vec<u8> {
    b"disputes/to_sample/".to_vec()
}

/// Queue entry of one record awaiting sampling.
pub fn to_sample(inference_id: &str) -> Vec<u8> {
    let mut key = to_sample_queue();
    key.extend_from_slice(inference_id.as_bytes());
    key
}

/// The validation of a sampled record.
pub fn validation(inference_id: &str) -> Vec<u8> {
    format!("disputes/validation/{inference_id}").into_bytes()
}

/// Prefix of the pending validations assigned to `validator`.
pub fn pending_of(validator: &str) -> Vec<u8> {
    format!("disputes/pending/{validator}/").into_bytes()
}

/// Index entry: `validator` owes the validation of `inference_id`.
pub fn pending(validator: &str, inference_id: &str) -> Vec<u8> {
    let mut key = pending_of(validator);
    key.extend_from_slice(inference_id.as_bytes());
    key
}

/// Prefix of the validation deadline index.
pub fn validation_deadlines() -> Vec<u8> {
    b"disputes/validation_deadline/".to_vec()
}

/// Index entry: the validation of `inference_id` is due by `height`.
pub fn validation_deadline(height: u64, inference_id: &str) -> Vec<u8> {
    let mut key = validation_deadlines();
    key.extend_from_slice(format!("{height:020}/{inference_id}").as_bytes());
    key
}

/// Counter of dispute ids.
pub fn next_dispute_id() -> Vec<u8> {
    b"disputes/next_dispute_id".to_vec()
}

/// Prefix of every dispute.
pub fn disputes() -> Vec<u8> {
    b"disputes/dispute/".to_vec()
}

/// One dispute, by id.
pub fn dispute(id: u64) -> Vec<u8> {
    let mut key = disputes();
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of the disputes with `status`.
pub fn disputes_with_status(status: &str) -> Vec<u8> {
    format!("disputes/status/{status}/").into_bytes()
}

/// Index entry: dispute `id` has `status`.
pub fn dispute_status(status: &str, id: u64) -> Vec<u8> {
    let mut key = disputes_with_status(status);
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of the disputes `address` takes part in.
pub fn disputes_of(address: &str) -> Vec<u8> {
    format!("disputes/participant/{address}/").into_bytes()
}

/// Index entry: `address` takes part in dispute `id`.
pub fn participant_dispute(address: &str, id: u64) -> Vec<u8> {
    let mut key = disputes_of(address);
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of the dispute deadline index.
pub fn dispute_deadlines() -> Vec<u8> {
    b"disputes/dispute_deadline/".to_vec()
}

/// Index entry: dispute `id` is decided at the latest after `height`.
pub fn dispute_deadline(height: u64, id: u64) -> Vec<u8> {
    let mut key = dispute_deadlines();
    key.extend_from_slice(format!("{height:020}/{id:020}").as_bytes());
    key
}

/// The dispute on record `inference_id` (value: the dispute id).
pub fn record_dispute(inference_id: &str) -> Vec<u8> {
    format!("disputes/record_dispute/{inference_id}").into_bytes()
}

/// Sampling statistics of executor host `host`.
pub fn executor_stats(host: &str) -> Vec<u8> {
    format!("disputes/executor/{host}").into_bytes()
}

/// Reputation of `validator`.
pub fn reputation(validator: &str) -> Vec<u8> {
    format!("disputes/reputation/{validator}").into_bytes()
}

/// The zero-padded height at the start of a deadline index key's suffix.
pub fn deadline_height(suffix: &[u8]) -> Option<u64> {
    std::str::from_utf8(suffix.get(..20)?).ok()?.parse().ok()
}
