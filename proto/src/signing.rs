//! Bytes that off-chain parties sign and the chain checks, defined once here so the chain
//! (`gonka-inference`), the client library and the sidecar cannot drift apart.

use sha2::{Digest, Sha256};

/// Longest nonce a request may carry, in bytes (printable ASCII).
pub const MAX_NONCE_LEN: usize = 64;

/// Domain separator of the request hash.
pub const REQUEST_DOMAIN: &[u8] = b"gonka/request/v1";

/// Domain separator of the executor's signed bytes.
pub const EXECUTOR_DOMAIN: &[u8] = b"gonka/executor/v1";

/// The inference id of a request: the lowercase hex of its 32-byte `request_hash`.
pub fn inference_id(request_hash: &[u8]) -> String {
    request_hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a request body: a work record's `prompt_hash`.
pub fn body_hash(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// The 32 bytes a requester signs for one request: SHA-256(`"gonka/request/v1"` ‖ body_hash ‖
/// timestamp (u64 big-endian, unix seconds) ‖ commission (u128 big-endian, ngnk) ‖ nonce
/// (UTF-8)). The commission the requester agrees to pay the transfer agent is part of it, so a
/// transfer agent cannot charge more than was signed; the nonce comes last, after the
/// fixed-width fields, so the encoding is unambiguous. The chain recomputes it from a work
/// record's `prompt_hash`, `timestamp`, `commission` and `nonce`.
pub fn request_hash(body_hash: &[u8], timestamp: u64, commission: u128, nonce: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(REQUEST_DOMAIN);
    hasher.update(body_hash);
    hasher.update(timestamp.to_be_bytes());
    hasher.update(commission.to_be_bytes());
    hasher.update(nonce.as_bytes());
    hasher.finalize().into()
}

/// What the executor ML node signs: SHA-256(`"gonka/executor/v1"` ‖ request_hash ‖
/// response_hash ‖ model (UTF-8) ‖ prompt_tokens (u64 big-endian) ‖ completion_tokens (u64
/// big-endian)). The hashes are 32 bytes each on chain; the fixed-width suffix after the model
/// keeps the encoding unambiguous.
pub fn executor_sign_bytes(
    request_hash: &[u8],
    response_hash: &[u8],
    model: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(EXECUTOR_DOMAIN);
    hasher.update(request_hash);
    hasher.update(response_hash);
    hasher.update(model.as_bytes());
    hasher.update(prompt_tokens.to_be_bytes());
    hasher.update(completion_tokens.to_be_bytes());
    hasher.finalize().into()
}
