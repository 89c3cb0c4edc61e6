//! Bytes that off-chain parties sign and the chain checks, defined once here so the chain
//! (`gonka-inference`), the client library and the sidecar cannot drift apart.

use sha2::{Digest, Sha256};

/// Domain separator of the executor's signed bytes.
pub const EXECUTOR_DOMAIN: &[u8] = b"gonka/executor/v1";

/// The inference id of a request: the lowercase hex of its 32-byte `request_hash`.
pub fn inference_id(request_hash: &[u8]) -> String {
    request_hash.iter().map(|b| format!("{b:02x}")).collect()
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
