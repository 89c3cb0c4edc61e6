//! Signed calls to an ML node: how the node knows who is asking it to compute. A registered
//! transfer agent forwarding a requester's signed request, or the node's own host (its
//! validation worker re-executing a record), signs each call on top of whatever the body
//! carries; an ML node registered on chain serves nobody else.
//!
//! | header                     | format                                               |
//! |----------------------------|------------------------------------------------------|
//! | `x-gonka-caller-address`   | the caller's bech32 account address                  |
//! | `x-gonka-caller-pubkey`    | hex of its 33-byte compressed secp256k1 public key   |
//! | `x-gonka-caller-timestamp` | unix seconds (decimal)                               |
//! | `x-gonka-caller-signature` | hex of the 64-byte ECDSA signature `r ‖ s`           |
//!
//! The signed message is [`gonka_proto::signing::node_call_bytes`]`(node id, request hash
//! (zeros for an unreceipted call), SHA-256(body), timestamp)` (`gonka/node-call/v1`): a
//! signature is good for one node, one body and one request only.

use anyhow::{anyhow, Result};
use gonka_proto::signing::{body_hash, node_call_bytes};

use crate::request::{verify_identity, HeaderAuthError, IdentityHeaders, SignedCaller};
use crate::{sig, Key};

/// The caller's identity headers.
pub const CALLER_HEADERS: IdentityHeaders = IdentityHeaders {
    address: "x-gonka-caller-address",
    pubkey: "x-gonka-caller-pubkey",
    timestamp: "x-gonka-caller-timestamp",
    signature: "x-gonka-caller-signature",
};

/// The caller headers of a call of node `node_id` with `body` (for the request with
/// `request_hash`, if receipted), signed by `key` at `timestamp`.
pub fn sign_node_call(
    key: &Key,
    node_id: &str,
    request_hash: Option<[u8; 32]>,
    body: &[u8],
    timestamp: u64,
) -> Result<Vec<(&'static str, String)>> {
    sign_node_call_hashed(key, node_id, request_hash, &body_hash(body), timestamp)
}

/// [`sign_node_call`] for a caller that already holds `body_hash`, SHA-256 of the body
/// ([`gonka_proto::signing::body_hash`]; a transfer agent has it from the request's terms),
/// so a large body is not hashed again. Signed on libsecp256k1 ([`crate::sig::sign`]), byte
/// for byte k256's signature.
pub fn sign_node_call_hashed(
    key: &Key,
    node_id: &str,
    request_hash: Option<[u8; 32]>,
    body_hash: &[u8; 32],
    timestamp: u64,
) -> Result<Vec<(&'static str, String)>> {
    let signed = node_call_bytes(
        node_id,
        &request_hash.unwrap_or([0; 32]),
        body_hash,
        timestamp,
    );
    let signature = sig::sign(&key.secret_bytes(), &signed).ok_or_else(|| {
        anyhow!("signing the node call failed: the account key is not a valid secp256k1 secret key")
    })?;
    Ok(vec![
        (CALLER_HEADERS.address, key.address().to_string()),
        (
            CALLER_HEADERS.pubkey,
            hex::encode(key.public_key().to_bytes()),
        ),
        (CALLER_HEADERS.timestamp, timestamp.to_string()),
        (CALLER_HEADERS.signature, hex::encode(signature)),
    ])
}

/// Checks the caller headers of a call of node `node_id` with `body` (and `request_hash`,
/// if receipted) against the node's clock; returns the authenticated caller.
pub fn verify_node_call<'a>(
    header: &impl Fn(&str) -> Option<&'a str>,
    node_id: &str,
    request_hash: Option<[u8; 32]>,
    body: &[u8],
    now_secs: u64,
    max_skew_secs: u64,
) -> Result<SignedCaller, HeaderAuthError> {
    let request_hash = request_hash.unwrap_or([0; 32]);
    let body_hash = body_hash(body);
    verify_identity(
        &CALLER_HEADERS,
        header,
        |timestamp| node_call_bytes(node_id, &request_hash, &body_hash, timestamp),
        "the gonka/node-call/v1 bytes of this node, request and body",
        now_secs,
        max_skew_secs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::well_known_mnemonic;
    use crate::request::lookup;

    #[test]
    fn a_call_signature_is_good_for_one_node_request_and_body() {
        let key = Key::from_mnemonic(&well_known_mnemonic("ta")).unwrap();
        let headers = sign_node_call(&key, "n1", Some([1; 32]), b"body", 100).unwrap();
        let caller = verify_node_call(&lookup(&headers), "n1", Some([1; 32]), b"body", 100, 60);
        assert_eq!(caller.unwrap().address, key.address());
        for (node, hash, body) in [
            ("n2", Some([1; 32]), &b"body"[..]),
            ("n1", Some([2; 32]), b"body"),
            ("n1", None, b"body"),
            ("n1", Some([1; 32]), b"other"),
        ] {
            let e = verify_node_call(&lookup(&headers), node, hash, body, 100, 60).unwrap_err();
            assert_eq!(e.code, "invalid_signature", "{node} {hash:?}");
        }
        let e =
            verify_node_call(&lookup(&headers), "n1", Some([1; 32]), b"body", 200, 60).unwrap_err();
        assert_eq!(e.code, "stale_timestamp");
        let e = verify_node_call(&lookup(&[]), "n1", None, b"body", 100, 60).unwrap_err();
        assert_eq!(e.code, "missing_auth_header");
    }

    /// The libsecp256k1 signature is k256's, byte for byte, and the hashed form signs alike.
    #[test]
    fn call_signatures_are_those_of_k256() {
        let key = Key::from_mnemonic(&well_known_mnemonic("ta")).unwrap();
        let body = br#"{"model":"m"}"#;
        for (node, hash, at) in [("n1", Some([1; 32]), 100), ("node-2", None, 1_700_000_000)] {
            let headers = sign_node_call(&key, node, hash, body, at).unwrap();
            let signed = node_call_bytes(node, &hash.unwrap_or([0; 32]), &body_hash(body), at);
            let theirs = key.signing_key().sign(&signed).unwrap();
            let ours = lookup(&headers)(CALLER_HEADERS.signature).unwrap();
            assert_eq!(ours, hex::encode(theirs.to_bytes()));
            assert_eq!(
                sign_node_call_hashed(&key, node, hash, &body_hash(body), at).unwrap(),
                headers
            );
            let caller = verify_node_call(&lookup(&headers), node, hash, body, at, 60).unwrap();
            assert_eq!(caller.address, key.address());
        }
    }
}
