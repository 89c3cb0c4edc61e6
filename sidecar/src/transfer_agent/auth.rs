//! Request authentication for the transfer agent.
//!
//! Every chat request carries five headers:
//!
//! | header              | format                                                        |
//! |---------------------|---------------------------------------------------------------|
//! | `x-gonka-address`   | the requester's bech32 account address (`gonka1…`)            |
//! | `x-gonka-pubkey`    | hex of the 33-byte compressed secp256k1 public key            |
//! | `x-gonka-timestamp` | unix seconds (decimal)                                        |
//! | `x-gonka-nonce`     | 1–64 printable ASCII characters, unique per request           |
//! | `x-gonka-signature` | hex of the 64-byte ECDSA signature `r ‖ s`                    |
//!
//! The signed message is the 32-byte [`request_hash`]:
//! `SHA-256("gonka/request/v1" ‖ SHA-256(body) ‖ timestamp as u64 big-endian ‖ nonce bytes)`,
//! and the signature is ECDSA/secp256k1 over SHA-256 of those 32 bytes (k256's `Signer` /
//! `Verifier`), as the chain verifies work records. The inference id is `hex(request_hash)`.
//!
//! The TA checks: headers present and well-formed, signature valid for the given pubkey,
//! timestamp within ±`max_skew` of its clock, and nonce not seen before within the skew window.
//!
//! **Address binding is deferred to the chain**: the TA does not check that the pubkey derives
//! to `x-gonka-address` (that needs RIPEMD-160 + bech32, which this crate does not carry). The
//! chain checks that `requester_pubkey` derives to `requester` when the work record lands, so a
//! request with a mismatched address can be served but never settles.

use std::collections::BTreeSet;

use axum::http::{HeaderMap, StatusCode};
use k256::ecdsa::signature::{Signer, Verifier};
use k256::ecdsa::{Signature, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::ml_node::ApiError;

/// Header carrying the requester's bech32 address.
pub const HEADER_ADDRESS: &str = "x-gonka-address";
/// Header carrying the hex compressed public key.
pub const HEADER_PUBKEY: &str = "x-gonka-pubkey";
/// Header carrying the unix timestamp in seconds.
pub const HEADER_TIMESTAMP: &str = "x-gonka-timestamp";
/// Header carrying the nonce.
pub const HEADER_NONCE: &str = "x-gonka-nonce";
/// Header carrying the hex signature `r ‖ s`.
pub const HEADER_SIGNATURE: &str = "x-gonka-signature";
/// Domain separator of the request hash.
pub const REQUEST_DOMAIN: &[u8] = b"gonka/request/v1";
/// Longest nonce accepted, in bytes.
pub const MAX_NONCE_LEN: usize = 64;

/// `SHA-256("gonka/request/v1" ‖ SHA-256(body) ‖ timestamp_be ‖ nonce)`.
pub fn request_hash(body: &[u8], timestamp: u64, nonce: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(REQUEST_DOMAIN);
    h.update(Sha256::digest(body));
    h.update(timestamp.to_be_bytes());
    h.update(nonce.as_bytes());
    h.finalize().into()
}

/// The five authentication headers for a request, signed with `key` (for clients and tests).
pub fn sign_request(
    key: &SigningKey,
    address: &str,
    body: &[u8],
    timestamp: u64,
    nonce: &str,
) -> Vec<(&'static str, String)> {
    let hash = request_hash(body, timestamp, nonce);
    let signature: Signature = key.sign(&hash);
    let pubkey = key.verifying_key().to_encoded_point(true);
    vec![
        (HEADER_ADDRESS, address.to_string()),
        (HEADER_PUBKEY, hex::encode(pubkey.as_bytes())),
        (HEADER_TIMESTAMP, timestamp.to_string()),
        (HEADER_NONCE, nonce.to_string()),
        (HEADER_SIGNATURE, hex::encode(signature.to_bytes())),
    ]
}

/// A request that passed authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The claimed requester address (binding to the pubkey is checked on chain).
    pub address: String,
    /// The 33-byte compressed public key.
    pub pubkey: Vec<u8>,
    /// The signed 32-byte request hash.
    pub request_hash: [u8; 32],
    /// The 64-byte signature `r ‖ s`.
    pub signature: Vec<u8>,
    /// The signed timestamp (unix seconds).
    pub timestamp: u64,
    /// The signed nonce.
    pub nonce: String,
}

impl Authenticated {
    /// `inference_id` = lowercase hex of the request hash.
    pub fn inference_id(&self) -> String {
        hex::encode(self.request_hash)
    }
}

/// Bounded replay cache: `(timestamp, address, nonce)` seen within the skew window.
#[derive(Debug, Default, Clone)]
pub struct ReplayCache {
    seen: BTreeSet<(u64, String, String)>,
}

impl ReplayCache {
    /// Forget entries older than `oldest` (they would fail the timestamp check anyway).
    pub fn prune(&mut self, oldest: u64) {
        self.seen = self.seen.split_off(&(oldest, String::new(), String::new()));
    }

    /// Record the triple; false if it was already seen.
    pub fn insert(&mut self, timestamp: u64, address: &str, nonce: &str) -> bool {
        self.seen
            .insert((timestamp, address.to_string(), nonce.to_string()))
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// 401 with an OpenAI-style body naming the problem.
pub fn unauthorized(code: &'static str, message: String) -> ApiError {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        message,
        kind: "authentication_error",
        code,
        retry_after_secs: None,
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<&'a str, ApiError> {
    let value = headers.get(name).ok_or_else(|| {
        unauthorized(
            "missing_auth_header",
            format!("the `{name}` header is required"),
        )
    })?;
    value.to_str().map(str::trim).map_err(|_| {
        unauthorized(
            "invalid_auth_header",
            format!("the `{name}` header must be printable ASCII"),
        )
    })
}

fn hex_header(headers: &HeaderMap, name: &str, len: usize) -> Result<Vec<u8>, ApiError> {
    let text = header(headers, name)?;
    match hex::decode(text) {
        Ok(bytes) if bytes.len() == len => Ok(bytes),
        _ => Err(unauthorized(
            "invalid_auth_header",
            format!(
                "the `{name}` header must be {len} bytes of hex ({} hex digits) but is `{text}`",
                len * 2
            ),
        )),
    }
}

/// Authenticates a request: well-formed headers, valid signature, fresh timestamp (within
/// `max_skew_secs` of `now_secs`), unseen nonce. Records the nonce in `cache` on success.
pub fn authenticate(
    headers: &HeaderMap,
    body: &[u8],
    now_secs: u64,
    max_skew_secs: u64,
    cache: &mut ReplayCache,
) -> Result<Authenticated, ApiError> {
    let address = header(headers, HEADER_ADDRESS)?;
    if !address.starts_with("gonka1") || address.len() < 7 || address.len() > 90 {
        return Err(unauthorized(
            "invalid_auth_header",
            format!("the `{HEADER_ADDRESS}` header must be a bech32 `gonka1…` address but is `{address}`"),
        ));
    }
    let pubkey = hex_header(headers, HEADER_PUBKEY, 33)?;
    let verifying_key = VerifyingKey::from_sec1_bytes(&pubkey).map_err(|_| {
        unauthorized(
            "invalid_auth_header",
            format!("the `{HEADER_PUBKEY}` header is not a valid compressed secp256k1 key"),
        )
    })?;
    let ts_text = header(headers, HEADER_TIMESTAMP)?;
    let timestamp: u64 = ts_text.parse().map_err(|_| {
        unauthorized(
            "invalid_auth_header",
            format!("the `{HEADER_TIMESTAMP}` header must be unix seconds but is `{ts_text}`"),
        )
    })?;
    let nonce = header(headers, HEADER_NONCE)?;
    if nonce.is_empty()
        || nonce.len() > MAX_NONCE_LEN
        || !nonce.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(unauthorized(
            "invalid_auth_header",
            format!("the `{HEADER_NONCE}` header must be 1 to {MAX_NONCE_LEN} printable ASCII characters"),
        ));
    }
    let sig_bytes = hex_header(headers, HEADER_SIGNATURE, 64)?;
    let signature = Signature::from_slice(&sig_bytes).map_err(|_| {
        unauthorized(
            "invalid_auth_header",
            format!("the `{HEADER_SIGNATURE}` header is not a valid r ‖ s signature"),
        )
    })?;
    let hash = request_hash(body, timestamp, nonce);
    verifying_key.verify(&hash, &signature).map_err(|_| {
        unauthorized(
            "invalid_signature",
            "the signature does not verify for the given public key over the request hash \
             SHA-256(\"gonka/request/v1\" ‖ SHA-256(body) ‖ timestamp_be ‖ nonce)"
                .to_string(),
        )
    })?;
    if timestamp.abs_diff(now_secs) > max_skew_secs {
        return Err(unauthorized(
            "stale_timestamp",
            format!("the timestamp {timestamp} is more than {max_skew_secs} s away from the transfer agent's clock ({now_secs})"),
        ));
    }
    cache.prune(now_secs.saturating_sub(max_skew_secs));
    if !cache.insert(timestamp, address, nonce) {
        return Err(unauthorized(
            "replayed_nonce",
            format!("the nonce `{nonce}` was already used with this timestamp and address"),
        ));
    }
    Ok(Authenticated {
        address: address.to_string(),
        pubkey,
        request_hash: hash,
        signature: sig_bytes,
        timestamp,
        nonce: nonce.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn key() -> SigningKey {
        SigningKey::from_slice(&[7u8; 32]).unwrap()
    }

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const ADDR: &str = "gonka1qqqsyqcyq5rqwzqfpg9scrgwpugpzysnzs23v";

    #[test]
    fn round_trip_and_replay() {
        let body = br#"{"model":"m"}"#;
        let h = headers(&sign_request(&key(), ADDR, body, 1000, "n1"));
        let mut cache = ReplayCache::default();
        let a = authenticate(&h, body, 1010, 60, &mut cache).unwrap();
        assert_eq!(
            a.inference_id(),
            hex::encode(request_hash(body, 1000, "n1"))
        );
        let e = authenticate(&h, body, 1010, 60, &mut cache).unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::UNAUTHORIZED, "replayed_nonce")
        );
        // Entries older than the window are pruned.
        let h2 = headers(&sign_request(&key(), ADDR, body, 2000, "n1"));
        authenticate(&h2, body, 2000, 60, &mut cache).unwrap();
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn rejects_tampering_and_skew() {
        let body = b"{}";
        let mut cache = ReplayCache::default();
        let h = headers(&sign_request(&key(), ADDR, body, 1000, "n"));
        let e = authenticate(&h, b"{ }", 1000, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "invalid_signature");
        let e = authenticate(&h, body, 1061, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "stale_timestamp");
        let e = authenticate(&h, body, 939, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "stale_timestamp");
        let mut missing = h.clone();
        missing.remove(HEADER_NONCE);
        let e = authenticate(&missing, body, 1000, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "missing_auth_header");
        let mut bad = h.clone();
        bad.insert(HEADER_PUBKEY, HeaderValue::from_static("abcd"));
        let e = authenticate(&bad, body, 1000, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "invalid_auth_header");
        authenticate(&h, body, 1000, 60, &mut cache).unwrap();
    }

    #[test]
    fn signature_matches_chain_convention() {
        // ECDSA over SHA-256 of the 32-byte hash, as k256's Verifier checks it.
        let hash = request_hash(b"x", 1, "n");
        let h = sign_request(&key(), ADDR, b"x", 1, "n");
        let sig = Signature::from_slice(&hex::decode(&h[4].1).unwrap()).unwrap();
        key().verifying_key().verify(&hash, &sig).unwrap();
    }
}
