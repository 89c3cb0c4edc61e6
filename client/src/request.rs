//! Signed inference requests: the headers a requester attaches to an OpenAI request so a
//! transfer agent and the ML node can authenticate it and the chain can later verify the
//! work record. Every term the chain reads is an explicit, signed header (request/v3, see
//! [`gonka_proto::signing::RequestTerms`]); the body's own `model` and `max_tokens` must
//! agree with them ([`body_agrees`]).
//!
//! | header                    | format                                                   |
//! |---------------------------|----------------------------------------------------------|
//! | `x-gonka-address`         | the requester's bech32 account address (`gonka1…`)       |
//! | `x-gonka-pubkey`          | hex of the 33-byte compressed secp256k1 public key       |
//! | `x-gonka-timestamp`       | unix seconds (decimal)                                   |
//! | `x-gonka-nonce`           | 1–64 printable ASCII characters, unique per request      |
//! | `x-gonka-chain-id`        | the chain id (a request signed for one chain is void on another) |
//! | `x-gonka-transfer-agent`  | address of the transfer agent that may submit the record and earn the commission |
//! | `x-gonka-model`           | the model id; the body's `model` must be the same        |
//! | `x-gonka-max-price`       | most ngnk per token the requester pays (decimal)         |
//! | `x-gonka-max-tokens`      | most completion tokens it pays for; the body's `max_tokens` (or `max_completion_tokens`), if any, must be the same |
//! | `x-gonka-max-prompt-tokens` | most prompt tokens it pays for (the chat-formatted prompt as the model tokenizes it); the body's length in bytes bounds every prompt of it |
//! | `x-gonka-commission`      | ngnk the requester pays the transfer agent (decimal, optional, default 0) |
//! | `x-gonka-signature`       | hex of the 64-byte ECDSA signature `r ‖ s`               |
//!
//! The signed message is the 32-byte request hash [`RequestTerms::hash`]; the signature is
//! ECDSA/secp256k1 over SHA-256 of those 32 bytes (k256's `Signer`), exactly what the chain
//! checks in a work record. The inference id is `hex(request hash)`. Servers check it on
//! libsecp256k1 under k256's rules ([`crate::sig`]).

use anyhow::{anyhow, Result};
pub use gonka_proto::signing::{
    body_hash, nonce_ok, prompt_token_bound, RequestTerms, MAX_NONCE_LEN,
};
use k256::ecdsa::Signature;
use serde::Deserialize;

use crate::keys::Key;
use crate::sig::{KeyCache, KnownKey};
pub use gonka_proto::address::address_of_pubkey;

/// Header carrying the requester's bech32 address.
pub const HEADER_ADDRESS: &str = "x-gonka-address";
/// Header carrying the hex compressed public key.
pub const HEADER_PUBKEY: &str = "x-gonka-pubkey";
/// Header carrying the unix timestamp in seconds.
pub const HEADER_TIMESTAMP: &str = "x-gonka-timestamp";
/// Header carrying the nonce.
pub const HEADER_NONCE: &str = "x-gonka-nonce";
/// Header carrying the chain id.
pub const HEADER_CHAIN_ID: &str = "x-gonka-chain-id";
/// Header carrying the address of the transfer agent the request is for.
pub const HEADER_TRANSFER_AGENT: &str = "x-gonka-transfer-agent";
/// Header carrying the model id.
pub const HEADER_MODEL: &str = "x-gonka-model";
/// Header carrying the most ngnk per token the requester pays.
pub const HEADER_MAX_PRICE: &str = "x-gonka-max-price";
/// Header carrying the most completion tokens the requester pays for.
pub const HEADER_MAX_TOKENS: &str = "x-gonka-max-tokens";
/// Header carrying the most prompt tokens the requester pays for.
pub const HEADER_MAX_PROMPT_TOKENS: &str = "x-gonka-max-prompt-tokens";
/// Header carrying the signed commission in ngnk (absent means 0).
pub const HEADER_COMMISSION: &str = "x-gonka-commission";
/// Header carrying the hex signature `r ‖ s`.
pub const HEADER_SIGNATURE: &str = "x-gonka-signature";

/// Every header of a signed request, in the order [`sign_request`] writes them: what a
/// transfer agent forwards to the ML node so the node can check the request itself.
pub const REQUEST_HEADERS: [&str; 12] = [
    HEADER_ADDRESS,
    HEADER_PUBKEY,
    HEADER_TIMESTAMP,
    HEADER_NONCE,
    HEADER_CHAIN_ID,
    HEADER_TRANSFER_AGENT,
    HEADER_MODEL,
    HEADER_MAX_PRICE,
    HEADER_MAX_TOKENS,
    HEADER_MAX_PROMPT_TOKENS,
    HEADER_COMMISSION,
    HEADER_SIGNATURE,
];

/// The authentication headers of one request with `body` on the `terms` given (their
/// `body_hash` is set from `body`), signed by `key`.
pub fn sign_request(
    key: &Key,
    body: &[u8],
    mut terms: RequestTerms,
) -> Result<Vec<(&'static str, String)>> {
    terms.body_hash = body_hash(body);
    let signature = key
        .signing_key()
        .sign(&terms.hash())
        .map_err(|e| anyhow!("signing the request failed: {e}"))?;
    Ok(vec![
        (HEADER_ADDRESS, key.address().to_string()),
        (HEADER_PUBKEY, hex::encode(key.public_key().to_bytes())),
        (HEADER_TIMESTAMP, terms.timestamp.to_string()),
        (HEADER_NONCE, terms.nonce),
        (HEADER_CHAIN_ID, terms.chain_id),
        (HEADER_TRANSFER_AGENT, terms.transfer_agent),
        (HEADER_MODEL, terms.model),
        (HEADER_MAX_PRICE, terms.max_price_per_token.to_string()),
        (HEADER_MAX_TOKENS, terms.max_completion_tokens.to_string()),
        (
            HEADER_MAX_PROMPT_TOKENS,
            terms.max_prompt_tokens.to_string(),
        ),
        (HEADER_COMMISSION, terms.commission.to_string()),
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

/// The names of the four identity headers of a signed call: the requester's
/// ([`IDENTITY_HEADERS`]) or those of a caller signing on top of them
/// ([`crate::node_call::CALLER_HEADERS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityHeaders {
    /// Header of the bech32 address.
    pub address: &'static str,
    /// Header of the hex compressed public key.
    pub pubkey: &'static str,
    /// Header of the unix timestamp.
    pub timestamp: &'static str,
    /// Header of the hex signature.
    pub signature: &'static str,
}

/// The identity headers of requests and payload fetches.
pub const IDENTITY_HEADERS: IdentityHeaders = IdentityHeaders {
    address: HEADER_ADDRESS,
    pubkey: HEADER_PUBKEY,
    timestamp: HEADER_TIMESTAMP,
    signature: HEADER_SIGNATURE,
};

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
    verify_identity(
        &IDENTITY_HEADERS,
        header,
        signed,
        what,
        now_secs,
        max_skew_secs,
    )
}

/// [`verify_signed_headers`] over the identity headers named by `names`.
pub fn verify_identity<'a>(
    names: &IdentityHeaders,
    header: &impl Fn(&str) -> Option<&'a str>,
    signed: impl FnOnce(u64) -> [u8; 32],
    what: &str,
    now_secs: u64,
    max_skew_secs: u64,
) -> Result<SignedCaller, HeaderAuthError> {
    let IdentityHeaders {
        address: address_header,
        pubkey: pubkey_header,
        timestamp: timestamp_header,
        signature: signature_header,
    } = *names;
    let address = required_header(header, address_header)?;
    let pubkey = hex_header(header, pubkey_header, 33)?;
    // Parsed once, by k256's rules, and remembered (`crate::sig`).
    let Some(KnownKey {
        key,
        address: derived,
    }) = KeyCache::shared().get(&pubkey)
    else {
        return Err(failure(
            "invalid_auth_header",
            format!("the `{pubkey_header}` header is not a valid compressed secp256k1 key"),
        ));
    };
    if derived != address {
        return Err(failure(
            "address_mismatch",
            format!(
                "the `{pubkey_header}` key belongs to {derived}, not to `{address}` named in `{address_header}`"
            ),
        ));
    }
    let ts_text = required_header(header, timestamp_header)?;
    let timestamp: u64 = ts_text.parse().map_err(|_| {
        failure(
            "invalid_auth_header",
            format!("the `{timestamp_header}` header must be unix seconds but is `{ts_text}`"),
        )
    })?;
    let signature = hex_header(header, signature_header, 64)?;
    let parsed = Signature::from_slice(&signature).map_err(|_| {
        failure(
            "invalid_auth_header",
            format!("the `{signature_header}` header is not a valid r ‖ s signature"),
        )
    })?;
    let signed = signed(timestamp);
    if !key.verifies(&signed, &parsed) {
        return Err(failure(
            "invalid_signature",
            format!("the signature does not verify for the given public key over {what}"),
        ));
    }
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

/// A request whose signed headers verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRequest {
    /// Who signed it.
    pub caller: SignedCaller,
    /// What was signed (`caller.signed` is `terms.hash()`).
    pub terms: RequestTerms,
}

fn decimal<'a, T: std::str::FromStr>(
    header: &impl Fn(&str) -> Option<&'a str>,
    name: &str,
    what: &str,
) -> Result<T, HeaderAuthError> {
    let text = required_header(header, name)?;
    text.parse().map_err(|_| {
        failure(
            "invalid_auth_header",
            format!("the `{name}` header must be {what} but is `{text}`"),
        )
    })
}

/// Checks a signed request: every header of the module table present and well formed, the
/// key derives to the address, the signature verifies over the request hash of `body` and
/// the signed terms, and the timestamp is within `max_skew_secs` of `now_secs`. Whether the
/// terms suit the server (its chain, its address, its model and price) is the caller's
/// business. `header` looks headers up by name.
pub fn verify_request<'a>(
    header: &impl Fn(&str) -> Option<&'a str>,
    body: &[u8],
    now_secs: u64,
    max_skew_secs: u64,
) -> Result<SignedRequest, HeaderAuthError> {
    let nonce = required_header(header, HEADER_NONCE)?;
    if !nonce_ok(nonce) {
        return Err(failure(
            "invalid_auth_header",
            format!("the `{HEADER_NONCE}` header must be 1 to {MAX_NONCE_LEN} printable ASCII characters"),
        ));
    }
    let commission = match header(HEADER_COMMISSION).map(str::trim) {
        None => 0,
        Some(_) => decimal(header, HEADER_COMMISSION, "a decimal amount of ngnk")?,
    };
    let mut terms = RequestTerms {
        chain_id: required_header(header, HEADER_CHAIN_ID)?.to_string(),
        body_hash: body_hash(body),
        timestamp: 0,
        nonce: nonce.to_string(),
        commission,
        transfer_agent: required_header(header, HEADER_TRANSFER_AGENT)?.to_string(),
        model: required_header(header, HEADER_MODEL)?.to_string(),
        max_price_per_token: decimal(header, HEADER_MAX_PRICE, "a decimal amount of ngnk")?,
        max_completion_tokens: decimal(header, HEADER_MAX_TOKENS, "a decimal token count")?,
        max_prompt_tokens: decimal(header, HEADER_MAX_PROMPT_TOKENS, "a decimal token count")?,
    };
    let caller = verify_signed_headers(
        header,
        |timestamp| {
            terms.timestamp = timestamp;
            terms.hash()
        },
        "the request/v3 hash of the body and the signed x-gonka-* terms",
        now_secs,
        max_skew_secs,
    )?;
    Ok(SignedRequest { caller, terms })
}

/// The fields of a chat body that signed terms bind.
#[derive(Deserialize)]
struct BoundFields {
    model: String,
    #[serde(default)]
    max_tokens: Option<i64>,
    #[serde(default)]
    max_completion_tokens: Option<i64>,
}

/// Checks that a chat `body` agrees with the signed `terms`: the same `model`, and a
/// `max_tokens` (or `max_completion_tokens`), when given, equal to the signed
/// `max_completion_tokens`. Returns the completion budget, which is always the signed one.
/// Refusals carry the code `terms_mismatch` (or `invalid_json`).
pub fn body_agrees(body: &[u8], terms: &RequestTerms) -> Result<u64, HeaderAuthError> {
    let fields: BoundFields = serde_json::from_slice(body).map_err(|e| {
        failure(
            "invalid_json",
            format!("expected a JSON chat completion request {{model, messages, ...}}: {e}"),
        )
    })?;
    if fields.model != terms.model {
        return Err(failure(
            "terms_mismatch",
            format!(
                "the body asks for model `{}` but `{HEADER_MODEL}` signs `{}`; they must be the same",
                fields.model, terms.model
            ),
        ));
    }
    match fields.max_tokens.or(fields.max_completion_tokens) {
        Some(n) if u64::try_from(n).ok() != Some(terms.max_completion_tokens) => Err(failure(
            "terms_mismatch",
            format!(
                "the body's max_tokens is {n} but `{HEADER_MAX_TOKENS}` signs {}; they must be the same (or leave max_tokens out)",
                terms.max_completion_tokens
            ),
        )),
        _ => Ok(terms.max_completion_tokens),
    }
}

/// FOR TESTS: looks headers up by name in the `(name, value)` pairs a signer returns.
#[cfg(test)]
pub(crate) fn lookup<'h>(
    headers: &'h [(&'static str, String)],
) -> impl Fn(&str) -> Option<&'h str> {
    move |name| {
        headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::well_known_mnemonic;

    fn terms() -> RequestTerms {
        RequestTerms {
            chain_id: "chain-1".into(),
            body_hash: [0; 32],
            timestamp: 7,
            nonce: "n-1".into(),
            commission: 3,
            transfer_agent: "gonka1ta".into(),
            model: "m".into(),
            max_price_per_token: 10,
            max_completion_tokens: 16,
            max_prompt_tokens: 300,
        }
    }

    #[test]
    fn headers_verify_and_bind_every_term() {
        let key = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let body = br#"{"model":"m","messages":[]}"#;
        let headers = sign_request(&key, body, terms()).unwrap();
        let names: Vec<&str> = headers.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, REQUEST_HEADERS);
        let verified = verify_request(&lookup(&headers), body, 7, 60).unwrap();
        assert_eq!(verified.caller.address, key.address());
        let expected = RequestTerms {
            body_hash: body_hash(body),
            ..terms()
        };
        assert_eq!(verified.terms, expected);
        assert_eq!(verified.caller.signed, expected.hash());
        // Any term changed in transit no longer verifies.
        for name in [
            HEADER_CHAIN_ID,
            HEADER_TRANSFER_AGENT,
            HEADER_MODEL,
            HEADER_MAX_PRICE,
            HEADER_MAX_TOKENS,
            HEADER_MAX_PROMPT_TOKENS,
            HEADER_COMMISSION,
            HEADER_NONCE,
        ] {
            let mut changed = headers.clone();
            let value = &mut changed.iter_mut().find(|(n, _)| *n == name).unwrap().1;
            *value = if name == HEADER_MAX_PRICE
                || name == HEADER_MAX_TOKENS
                || name == HEADER_MAX_PROMPT_TOKENS
                || name == HEADER_COMMISSION
            {
                "99".into()
            } else {
                format!("{value}x")
            };
            let e = verify_request(&lookup(&changed), body, 7, 60).unwrap_err();
            assert_eq!(e.code, "invalid_signature", "{name}");
        }
        let e = verify_request(&lookup(&headers), b"{}", 7, 60).unwrap_err();
        assert_eq!(e.code, "invalid_signature", "another body");
        let missing: Vec<_> = headers
            .iter()
            .filter(|(n, _)| *n != HEADER_MAX_TOKENS)
            .cloned()
            .collect();
        let e = verify_request(&lookup(&missing), body, 7, 60).unwrap_err();
        assert_eq!(e.code, "missing_auth_header");
        assert_eq!(address_of_pubkey(&[2; 5]), None);
    }

    /// Forged and malformed identities are refused with their codes and messages, the
    /// signature checked as k256 checks it (a high `s` refused).
    #[test]
    fn forged_identities_are_refused_as_k256_refuses_them() {
        let key = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let bob = Key::from_mnemonic(&well_known_mnemonic("bob")).unwrap();
        let body = br#"{"model":"m"}"#;
        let headers = sign_request(&key, body, terms()).unwrap();
        let with = |name: &str, value: String| -> Vec<(&'static str, String)> {
            let mut changed = headers.clone();
            changed.iter_mut().find(|(n, _)| *n == name).unwrap().1 = value;
            changed
        };
        let signature = headers
            .iter()
            .find(|(n, _)| *n == HEADER_SIGNATURE)
            .unwrap();
        let signature = Signature::from_slice(&hex::decode(&signature.1).unwrap()).unwrap();
        let high_s = Signature::from_scalars(signature.r(), -*signature.s()).unwrap();
        let bob_pubkey = hex::encode(bob.public_key().to_bytes());
        let what = "the request/v3 hash of the body and the signed x-gonka-* terms";
        for (changed, code, message) in [
            (
                // x = 0 is on no secp256k1 point (7 is not a square modulo p).
                with(HEADER_PUBKEY, format!("02{}", "00".repeat(32))),
                "invalid_auth_header",
                format!("the `{HEADER_PUBKEY}` header is not a valid compressed secp256k1 key"),
            ),
            (
                with(HEADER_PUBKEY, bob_pubkey.clone()),
                "address_mismatch",
                format!(
                    "the `{HEADER_PUBKEY}` key belongs to {}, not to `{}` named in `{HEADER_ADDRESS}`",
                    bob.address(),
                    key.address()
                ),
            ),
            (
                with(HEADER_SIGNATURE, "00".repeat(64)),
                "invalid_auth_header",
                format!("the `{HEADER_SIGNATURE}` header is not a valid r ‖ s signature"),
            ),
            (
                with(HEADER_SIGNATURE, hex::encode(high_s.to_bytes())),
                "invalid_signature",
                format!("the signature does not verify for the given public key over {what}"),
            ),
            (
                with(HEADER_TIMESTAMP, "8".into()),
                "invalid_signature",
                format!("the signature does not verify for the given public key over {what}"),
            ),
        ] {
            let e = verify_request(&lookup(&changed), body, 7, 60).unwrap_err();
            assert_eq!((e.code, e.message), (code, message));
        }
        // Bob's key and address, Alice's signature: the key is Bob's, the signature not.
        let mut bobs = with(HEADER_PUBKEY, bob_pubkey);
        bobs.iter_mut()
            .find(|(n, _)| *n == HEADER_ADDRESS)
            .unwrap()
            .1 = bob.address().into();
        let e = verify_request(&lookup(&bobs), body, 7, 60).unwrap_err();
        assert_eq!(e.code, "invalid_signature");
        let e = verify_request(&lookup(&headers), body, 68, 60).unwrap_err();
        assert_eq!(e.code, "stale_timestamp");
        assert!(verify_request(&lookup(&headers), body, 67, 60).is_ok());
    }

    #[test]
    fn the_body_must_agree_with_the_signed_terms() {
        let t = terms();
        assert_eq!(body_agrees(br#"{"model":"m"}"#, &t), Ok(16));
        assert_eq!(body_agrees(br#"{"model":"m","max_tokens":16}"#, &t), Ok(16));
        assert_eq!(
            body_agrees(br#"{"model":"m","max_completion_tokens":16}"#, &t),
            Ok(16)
        );
        for body in [
            &br#"{"model":"other"}"#[..],
            br#"{"model":"m","max_tokens":17}"#,
            br#"{"model":"m","max_tokens":-1}"#,
        ] {
            assert_eq!(body_agrees(body, &t).unwrap_err().code, "terms_mismatch");
        }
        assert_eq!(body_agrees(b"nope", &t).unwrap_err().code, "invalid_json");
    }
}
