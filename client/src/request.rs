//! Signed inference requests: the headers a requester attaches to an OpenAI request so a
//! transfer agent can authenticate it and the chain can later verify the work record.
//!
//! | header               | format                                                        |
//! |----------------------|---------------------------------------------------------------|
//! | `x-gonka-address`    | the requester's bech32 account address (`gonka1…`)            |
//! | `x-gonka-pubkey`     | hex of the 33-byte compressed secp256k1 public key            |
//! | `x-gonka-timestamp`  | unix seconds (decimal)                                        |
//! | `x-gonka-nonce`      | 1–64 printable ASCII characters, unique per request           |
//! | `x-gonka-commission` | ngnk the requester agrees to pay the transfer agent (decimal, optional, default 0) |
//! | `x-gonka-signature`  | hex of the 64-byte ECDSA signature `r ‖ s`                    |
//!
//! The signed message is the 32-byte [`request_hash`] of SHA-256(body), the timestamp, the
//! commission and the nonce; the signature is ECDSA/secp256k1 over SHA-256 of those 32 bytes
//! (k256's `Signer`), exactly what the chain checks in a work record. The inference id is
//! `hex(request_hash)`.

use anyhow::{anyhow, Result};
pub use gonka_proto::signing::{body_hash, request_hash, MAX_NONCE_LEN};
use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};

use crate::keys::Key;
pub use gonka_proto::address::address_of_pubkey;

/// Header carrying the requester's bech32 address.
pub const HEADER_ADDRESS: &str = "x-gonka-address";
/// Header carrying the hex compressed public key.
pub const HEADER_PUBKEY: &str = "x-gonka-pubkey";
/// Header carrying the unix timestamp in seconds.
pub const HEADER_TIMESTAMP: &str = "x-gonka-timestamp";
/// Header carrying the nonce.
pub const HEADER_NONCE: &str = "x-gonka-nonce";
/// Header carrying the signed commission in ngnk (absent means 0).
pub const HEADER_COMMISSION: &str = "x-gonka-commission";
/// Header carrying the hex signature `r ‖ s`.
pub const HEADER_SIGNATURE: &str = "x-gonka-signature";

/// The authentication headers of one request with `body`, signed by `key`.
pub fn sign_request(
    key: &Key,
    body: &[u8],
    timestamp: u64,
    nonce: &str,
    commission: u128,
) -> Result<Vec<(&'static str, String)>> {
    let hash = request_hash(&body_hash(body), timestamp, commission, nonce);
    let signature = key
        .signing_key()
        .sign(&hash)
        .map_err(|e| anyhow!("signing the request failed: {e}"))?;
    Ok(vec![
        (HEADER_ADDRESS, key.address().to_string()),
        (HEADER_PUBKEY, hex::encode(key.public_key().to_bytes())),
        (HEADER_TIMESTAMP, timestamp.to_string()),
        (HEADER_NONCE, nonce.to_string()),
        (HEADER_COMMISSION, commission.to_string()),
        (HEADER_SIGNATURE, hex::encode(signature.to_bytes())),
    ])
}

/// Why signed headers were refused: a stable `code` and a message naming what was expected
/// and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderAuthError {
    /// `missing_auth_header`, `invalid_auth_header`, `address_mismatch`,
    /// `invalid_signature` or `stale_timestamp`.
    pub code: &'static str,
    /// What was expected and what was found.
    pub message: String,
}

impl std::fmt::Display for HeaderAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for HeaderAuthError {}

fn failure(code: &'static str, message: String) -> HeaderAuthError {
    HeaderAuthError { code, message }
}

/// The trimmed value of header `name` (`header` looks headers up by name), or
/// `missing_auth_header`.
pub fn required_header<'a>(
    header: &impl Fn(&str) -> Option<&'a str>,
    name: &str,
) -> Result<&'a str, HeaderAuthError> {
    header(name).map(str::trim).ok_or_else(|| {
        failure(
            "missing_auth_header",
            format!("the `{name}` header is required (printable ASCII)"),
        )
    })
}

fn hex_header<'a>(
    header: &impl Fn(&str) -> Option<&'a str>,
    name: &str,
    len: usize,
) -> Result<Vec<u8>, HeaderAuthError> {
    let text = required_header(header, name)?;
    match hex::decode(text).ok() {
        Some(bytes) if bytes.len() == len => Ok(bytes),
        _ => Err(failure(
            "invalid_auth_header",
            format!(
                "the `{name}` header must be {len} bytes of hex ({} hex digits) but is `{text}`",
                len * 2
            ),
        )),
    }
}

/// A caller authenticated by its signed `x-gonka-*` headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedCaller {
    /// The caller's address (its public key derives to it).
    pub address: String,
    /// The 33-byte compressed public key.
    pub pubkey: Vec<u8>,
    /// The signed timestamp (unix seconds).
    pub timestamp: u64,
    /// The 32 bytes that were signed.
    pub signed: [u8; 32],
    /// The 64-byte signature `r ‖ s`.
    pub signature: Vec<u8>,
}

/// Checks the identity headers every signed gonka request carries — address, a public key
/// that derives to it, timestamp, and a signature over `signed(timestamp)` (described by
/// `what` in the error) — and that the timestamp is within `max_skew_secs` of `now_secs`.
/// `header` looks a header up by name (`None` if absent or not ASCII).
pub fn verify_signed_headers<'a>(
    header: &impl Fn(&str) -> Option<&'a str>,
    signed: impl FnOnce(u64) -> [u8; 32],
    what: &str,
    now_secs: u64,
    max_skew_secs: u64,
) -> Result<SignedCaller, HeaderAuthError> {
    let address = required_header(header, HEADER_ADDRESS)?;
    let pubkey = hex_header(header, HEADER_PUBKEY, 33)?;
    let key = VerifyingKey::from_sec1_bytes(&pubkey).map_err(|_| {
        failure(
            "invalid_auth_header",
            format!("the `{HEADER_PUBKEY}` header is not a valid compressed secp256k1 key"),
        )
    })?;
    match address_of_pubkey(&pubkey) {
        Some(derived) if derived == address => {}
        derived => {
            return Err(failure(
                "address_mismatch",
                format!(
                    "the `{HEADER_PUBKEY}` key belongs to {}, not to `{address}` named in `{HEADER_ADDRESS}`",
                    derived.unwrap_or_default()
                ),
            ))
        }
    }
    let ts_text = required_header(header, HEADER_TIMESTAMP)?;
    let timestamp: u64 = ts_text.parse().map_err(|_| {
        failure(
            "invalid_auth_header",
            format!("the `{HEADER_TIMESTAMP}` header must be unix seconds but is `{ts_text}`"),
        )
    })?;
    let signature = hex_header(header, HEADER_SIGNATURE, 64)?;
    let parsed = Signature::from_slice(&signature).map_err(|_| {
        failure(
            "invalid_auth_header",
            format!("the `{HEADER_SIGNATURE}` header is not a valid r ‖ s signature"),
        )
    })?;
    let signed = signed(timestamp);
    key.verify(&signed, &parsed).map_err(|_| {
        failure(
            "invalid_signature",
            format!("the signature does not verify for the given public key over {what}"),
        )
    })?;
    if timestamp.abs_diff(now_secs) > max_skew_secs {
        return Err(failure(
            "stale_timestamp",
            format!("the timestamp {timestamp} is more than {max_skew_secs} s away from the server's clock ({now_secs}); sync the clock"),
        ));
    }
    Ok(SignedCaller {
        address: address.to_string(),
        pubkey,
        timestamp,
        signed,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::well_known_mnemonic;
    use k256::ecdsa::signature::Verifier;

    #[test]
    fn headers_verify_and_bind_the_address() {
        let key = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let headers = sign_request(&key, b"{}", 7, "n-1", 3).unwrap();
        let get = |name: &str| headers.iter().find(|(n, _)| *n == name).unwrap().1.clone();
        assert_eq!(get(HEADER_ADDRESS), key.address());
        assert_eq!(get(HEADER_COMMISSION), "3");
        let pubkey = hex::decode(get(HEADER_PUBKEY)).unwrap();
        assert_eq!(address_of_pubkey(&pubkey).as_deref(), Some(key.address()));
        let verifying = k256::ecdsa::VerifyingKey::from_sec1_bytes(&pubkey).unwrap();
        let signature =
            k256::ecdsa::Signature::from_slice(&hex::decode(get(HEADER_SIGNATURE)).unwrap())
                .unwrap();
        let signed = request_hash(&body_hash(b"{}"), 7, 3, "n-1");
        verifying.verify(&signed, &signature).unwrap();
        // A different commission is a different message.
        let raised = request_hash(&body_hash(b"{}"), 7, 4, "n-1");
        assert!(verifying.verify(&raised, &signature).is_err());
        assert_eq!(address_of_pubkey(&[2; 5]), None);
    }
}
