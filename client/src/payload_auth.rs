//! Signed payload fetches: how a validator (or a dispute committee member) proves its
//! identity to a transfer agent when it asks for the request body of a work record it must
//! re-execute (`GET /v1/payloads/{inference_id}`).
//!
//! | header               | format                                                 |
//! |----------------------|--------------------------------------------------------|
//! | `x-gonka-address`    | the caller's bech32 account address (`gonka1…`)        |
//! | `x-gonka-pubkey`     | hex of the 33-byte compressed secp256k1 public key     |
//! | `x-gonka-timestamp`  | unix seconds (decimal)                                 |
//! | `x-gonka-signature`  | hex of the 64-byte ECDSA signature `r ‖ s`             |
//!
//! The signed message is [`payload_hash`] = SHA-256(`"gonka/payload/v1"` ‖ inference_id
//! (UTF-8) ‖ timestamp (u64 big-endian)); the signature is ECDSA/secp256k1 over SHA-256 of
//! those 32 bytes (k256's `Signer`), like a signed request. The public key must derive to the
//! address and the timestamp must be within [`MAX_SKEW_SECS`] of the server's clock. Whether
//! the address may read the payload is the server's business (the chain's assignments).
//!
//! The answer to a fetch of a "logprobs" model's record also carries the executor's output
//! tokens ([`HEADER_OUTPUT_TOKENS`], decimal ids separated by commas) and the salted seal over
//! its log-probabilities ([`HEADER_OUTPUT_SEAL`], hex): the validator scores those tokens
//! after checking that they open the record's commitment ([`output_from_headers`]).

use anyhow::{anyhow, Result};
use sha2::{Digest, Sha256};

pub use crate::request::HeaderAuthError;
use crate::request::{verify_signed_headers, SignedCaller};
pub use crate::request::{HEADER_ADDRESS, HEADER_PUBKEY, HEADER_SIGNATURE, HEADER_TIMESTAMP};
use crate::Key;

/// Domain separator of the payload-fetch signature.
pub const PAYLOAD_DOMAIN: &[u8] = b"gonka/payload/v1";

/// Largest accepted difference between the signed timestamp and the server's clock, seconds.
pub const MAX_SKEW_SECS: u64 = 60;

/// Response header of a payload fetch: a "logprobs" record's output tokens.
pub const HEADER_OUTPUT_TOKENS: &str = "x-gonka-output-tokens";
/// Response header of a payload fetch: the salted seal over the executor's log-probabilities.
pub const HEADER_OUTPUT_SEAL: &str = "x-gonka-output-seal";

/// The two output headers of a "logprobs" record's payload.
pub fn output_headers(tokens: &[u32], seal: &[u8; 32]) -> [(&'static str, String); 2] {
    let tokens = tokens
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    [
        (HEADER_OUTPUT_TOKENS, tokens),
        (HEADER_OUTPUT_SEAL, hex::encode(seal)),
    ]
}

/// The output tokens a payload answer carries (`get` reads a response header), checked
/// against the record's `output_commitment`: `Ok(None)` without the headers, an error when
/// they are malformed or do not open the commitment (the transfer agent served tokens the
/// executor never committed to).
pub fn output_from_headers<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
    output_commitment: &[u8],
) -> Result<Option<Vec<u32>>> {
    let (Some(tokens), Some(seal)) = (get(HEADER_OUTPUT_TOKENS), get(HEADER_OUTPUT_SEAL)) else {
        return Ok(None);
    };
    let tokens = tokens
        .split(',')
        .map(str::parse::<u32>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| anyhow!("{HEADER_OUTPUT_TOKENS} is not a list of token ids"))?;
    let seal: [u8; 32] = hex::decode(seal)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| anyhow!("{HEADER_OUTPUT_SEAL} is not 32 bytes of hex"))?;
    let tokens_hash = gonka_proto::scored::tokens_hash(tokens.iter().copied());
    if gonka_proto::scored::commitment_of(&tokens_hash, &seal).as_slice() != output_commitment {
        return Err(anyhow!(
            "the output tokens and seal the transfer agent served do not open the record's output commitment"
        ));
    }
    Ok(Some(tokens))
}

/// The 32 bytes a caller signs to fetch the payload of `inference_id` at `timestamp`.
pub fn payload_hash(inference_id: &str, timestamp: u64) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(PAYLOAD_DOMAIN);
    hasher.update(inference_id.as_bytes());
    // Fixed width after the only variable-length field keeps the encoding unambiguous.
    hasher.update(timestamp.to_be_bytes());
    hasher.finalize().into()
}

/// The authentication headers of a fetch of `inference_id`'s payload, signed by `key` at
/// `timestamp` (unix seconds).
pub fn sign_payload_request(
    key: &Key,
    inference_id: &str,
    timestamp: u64,
) -> Result<Vec<(&'static str, String)>> {
    let signature = key
        .signing_key()
        .sign(&payload_hash(inference_id, timestamp))
        .map_err(|e| anyhow!("signing the payload request failed: {e}"))?;
    Ok(vec![
        (HEADER_ADDRESS, key.address().to_string()),
        (HEADER_PUBKEY, hex::encode(key.public_key().to_bytes())),
        (HEADER_TIMESTAMP, timestamp.to_string()),
        (HEADER_SIGNATURE, hex::encode(signature.to_bytes())),
    ])
}

/// Checks the headers of a fetch of `inference_id`'s payload (`header` looks a header up by
/// name) against the server's clock `now_secs`; returns the authenticated caller (its
/// timestamp and signature let the server refuse a replay of the same fetch).
pub fn verify_payload_request<'a>(
    header: impl Fn(&str) -> Option<&'a str>,
    inference_id: &str,
    now_secs: u64,
) -> Result<SignedCaller, HeaderAuthError> {
    verify_signed_headers(
        &header,
        |timestamp| payload_hash(inference_id, timestamp),
        &format!("SHA-256(\"gonka/payload/v1\" ‖ {inference_id:?} ‖ timestamp u64 BE)"),
        now_secs,
        MAX_SKEW_SECS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::well_known_mnemonic;

    fn key(label: &str) -> Key {
        Key::from_mnemonic(&well_known_mnemonic(label)).unwrap()
    }

    fn verify(
        headers: &[(&'static str, String)],
        id: &str,
        now: u64,
    ) -> Result<String, HeaderAuthError> {
        verify_payload_request(crate::request::lookup(headers), id, now)
            .map(|caller| caller.address)
    }

    fn replace(
        headers: &[(&'static str, String)],
        name: &str,
        value: String,
    ) -> Vec<(&'static str, String)> {
        headers
            .iter()
            .map(|(n, v)| (*n, if *n == name { value.clone() } else { v.clone() }))
            .collect()
    }

    #[test]
    fn signature_binds_the_id_and_the_timestamp() {
        let alice = key("alice");
        let headers = sign_payload_request(&alice, "ab12", 1000).unwrap();
        assert_eq!(verify(&headers, "ab12", 1000).unwrap(), alice.address());
        let e = verify(&headers, "ab13", 1000).unwrap_err();
        assert_eq!(e.code, "invalid_signature");
        let later = replace(&headers, HEADER_TIMESTAMP, "1001".into());
        assert_eq!(
            verify(&later, "ab12", 1000).unwrap_err().code,
            "invalid_signature"
        );
        let garbage = replace(&headers, HEADER_SIGNATURE, "zz".into());
        assert_eq!(
            verify(&garbage, "ab12", 1000).unwrap_err().code,
            "invalid_auth_header"
        );
        let missing: Vec<_> = headers
            .iter()
            .filter(|(n, _)| *n != HEADER_SIGNATURE)
            .cloned()
            .collect();
        assert_eq!(
            verify(&missing, "ab12", 1000).unwrap_err().code,
            "missing_auth_header"
        );
    }

    #[test]
    fn timestamps_beyond_the_skew_are_stale() {
        let headers = sign_payload_request(&key("alice"), "id", 1000).unwrap();
        assert!(verify(&headers, "id", 1000 + MAX_SKEW_SECS).is_ok());
        assert!(verify(&headers, "id", 1000 - MAX_SKEW_SECS).is_ok());
        for now in [1000 + MAX_SKEW_SECS + 1, 1000 - MAX_SKEW_SECS - 1] {
            assert_eq!(
                verify(&headers, "id", now).unwrap_err().code,
                "stale_timestamp"
            );
        }
    }

    #[test]
    fn the_pubkey_must_derive_to_the_address() {
        let headers = sign_payload_request(&key("alice"), "id", 1000).unwrap();
        let claimed = replace(&headers, HEADER_ADDRESS, key("bob").address().to_string());
        assert_eq!(
            verify(&claimed, "id", 1000).unwrap_err().code,
            "address_mismatch"
        );
        // Bob's key with Alice's signature: bound to Bob's address but does not verify.
        let bob = sign_payload_request(&key("bob"), "id", 1000).unwrap();
        let mixed = replace(
            &bob,
            HEADER_SIGNATURE,
            headers
                .iter()
                .find(|(n, _)| *n == HEADER_SIGNATURE)
                .unwrap()
                .1
                .clone(),
        );
        assert_eq!(
            verify(&mixed, "id", 1000).unwrap_err().code,
            "invalid_signature"
        );
    }
}
