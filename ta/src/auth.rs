//! Request authentication for the transfer agent.
//!
//! The headers and the signed bytes are defined once in [`gonka_client::request`] (request/v3:
//! every term the chain reads is a signed header). The TA checks, cheapest first: headers
//! present and well-formed, the public key derives to the claimed address, the signature is
//! valid over the request hash of the body and the terms, the timestamp is within
//! ±`max_skew` of its clock ([`verify`]); then that the terms are for this TA on this chain
//! and that the body agrees with them ([`check_terms`]). Whether the account can pay is checked
//! by the server against the chain (402), and only then is the nonce remembered
//! ([`ReplayCache::admit`]), so requests that are refused fill no cache.

use axum::http::{HeaderMap, StatusCode};
use gonka_client::request::{body_agrees, verify_request, HeaderAuthError, RequestTerms};

use gonka_client::openai::ApiError;
use gonka_client::replay::{Refused, ReplayWindow};

/// A request that passed authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The requester's address (derived from `pubkey`).
    pub address: String,
    /// The 33-byte compressed public key.
    pub pubkey: Vec<u8>,
    /// The signed 32-byte request hash (`terms.hash()`).
    pub request_hash: [u8; 32],
    /// The 64-byte signature `r ‖ s`.
    pub signature: Vec<u8>,
    /// What the requester signed.
    pub terms: RequestTerms,
}

impl Authenticated {
    /// `inference_id` = lowercase hex of the request hash.
    pub fn inference_id(&self) -> String {
        hex::encode(self.request_hash)
    }
}

/// Most `(timestamp, address, nonce)` entries the replay cache holds; beyond it new requests
/// are refused (503) until old entries age out of the skew window.
pub const MAX_REPLAY_ENTRIES: usize = 200_000;

/// Bounded replay cache: `(timestamp, address, nonce)` seen within the skew window.
#[derive(Debug, Clone)]
pub struct ReplayCache {
    window: ReplayWindow<(String, String)>,
}

impl Default for ReplayCache {
    fn default() -> Self {
        Self {
            window: ReplayWindow::new(MAX_REPLAY_ENTRIES),
        }
    }
}

impl ReplayCache {
    /// Admits a verified request unless its `(timestamp, address, nonce)` was seen within the
    /// skew window; remembers it. Entries older than the window are forgotten.
    pub fn admit(
        &mut self,
        auth: &Authenticated,
        now_secs: u64,
        max_skew_secs: u64,
    ) -> Result<(), ApiError> {
        let nonce = &auth.terms.nonce;
        let key = (auth.address.clone(), nonce.clone());
        match self
            .window
            .admit(auth.terms.timestamp, key, now_secs, max_skew_secs)
        {
            Ok(()) => Ok(()),
            Err(Refused::Replayed) => Err(ApiError::unauthorized(
                "replayed_nonce",
                format!("the nonce `{nonce}` was already used with this timestamp and address"),
            )),
            Err(Refused::Full) => Err(ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!("this transfer agent holds {MAX_REPLAY_ENTRIES} recent nonces, its limit; retry shortly"),
                kind: "server_error",
                code: "replay_cache_full",
                retry_after_secs: Some(u32::try_from(max_skew_secs.max(1)).unwrap_or(u32::MAX)),
            }),
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.window.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.window.is_empty()
    }
}

/// Checks a request's headers without shared state: well-formed, the key derives to the
/// address, the signature verifies, the timestamp is within `max_skew_secs` of `now_secs`.
/// The expensive part of authentication, so callers run it outside any lock.
///
/// [`gonka_client::request::verify_request`], the ML node's check too: on libsecp256k1 with
/// the key parsed once per key ([`gonka_client::sig`]).
pub fn verify(
    headers: &HeaderMap,
    body: &[u8],
    now_secs: u64,
    max_skew_secs: u64,
) -> Result<Authenticated, ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signed = verify_request(&header, body, now_secs, max_skew_secs)
        .map_err(|e| ApiError::unauthorized(e.code, e.message))?;
    Ok(Authenticated {
        address: signed.caller.address,
        pubkey: signed.caller.pubkey,
        request_hash: signed.caller.signed,
        signature: signed.caller.signature,
        terms: signed.terms,
    })
}

/// Checks that verified terms are for this TA (`address`) on this chain (`chain_id`), that
/// the body agrees with them, and that the model costs no more than the requester signed
/// (`price_per_token`) and the budget fits `1..=max_tokens_per_record` (0: no limit). Returns
/// the completion budget.
pub fn check_terms(
    auth: &Authenticated,
    body: &[u8],
    address: &str,
    chain_id: &str,
    price_per_token: u128,
    max_tokens_per_record: u64,
) -> Result<u64, ApiError> {
    let terms = &auth.terms;
    if terms.transfer_agent != address {
        return Err(ApiError::invalid_value(
            "wrong_transfer_agent",
            format!(
                "the request is signed for transfer agent `{}` but this is `{address}`; sign x-gonka-transfer-agent with the address from /v1/identity",
                terms.transfer_agent
            ),
        ));
    }
    if terms.chain_id != chain_id {
        return Err(ApiError::invalid_value(
            "wrong_chain",
            format!(
                "the request is signed for chain `{}` but this transfer agent serves `{chain_id}`",
                terms.chain_id
            ),
        ));
    }
    let max_tokens = body_agrees(body, terms)
        .map_err(|e: HeaderAuthError| ApiError::invalid_value(e.code, e.message))?;
    if max_tokens == 0 || (max_tokens_per_record != 0 && max_tokens > max_tokens_per_record) {
        return Err(ApiError::invalid_value(
            "invalid_max_tokens",
            format!(
                "x-gonka-max-tokens must be between 1 and {} but is {max_tokens}",
                if max_tokens_per_record == 0 {
                    u64::MAX
                } else {
                    max_tokens_per_record
                }
            ),
        ));
    }
    if price_per_token > terms.max_price_per_token {
        return Err(ApiError::invalid_value(
            "max_price_too_low",
            format!(
                "model `{}` costs {price_per_token} ngnk per token but the request signs at most {} (x-gonka-max-price)",
                terms.model, terms.max_price_per_token
            ),
        ));
    }
    Ok(max_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use gonka_client::keys::well_known_mnemonic;
    use gonka_client::request::{
        body_hash, sign_request, HEADER_ADDRESS, HEADER_COMMISSION, HEADER_NONCE, HEADER_PUBKEY,
    };
    use gonka_client::Key;

    /// What the server does: [`verify`], then [`ReplayCache::admit`].
    fn authenticate(
        headers: &HeaderMap,
        body: &[u8],
        now_secs: u64,
        max_skew_secs: u64,
        cache: &mut ReplayCache,
    ) -> Result<Authenticated, ApiError> {
        let auth = verify(headers, body, now_secs, max_skew_secs)?;
        cache.admit(&auth, now_secs, max_skew_secs)?;
        Ok(auth)
    }

    fn key(label: &str) -> Key {
        Key::from_mnemonic(&well_known_mnemonic(label)).unwrap()
    }

    fn terms(timestamp: u64, nonce: &str, commission: u128) -> RequestTerms {
        RequestTerms {
            chain_id: "chain".into(),
            body_hash: [0; 32],
            timestamp,
            nonce: nonce.into(),
            commission,
            transfer_agent: "gonka1ta".into(),
            model: "m".into(),
            max_price_per_token: 10,
            max_completion_tokens: 16,
            max_prompt_tokens: 4_096,
        }
    }

    fn headers_of(pairs: Vec<(&'static str, String)>) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k, HeaderValue::from_str(&v).unwrap());
        }
        h
    }

    fn signed(body: &[u8], timestamp: u64, nonce: &str, commission: u128) -> HeaderMap {
        headers_of(sign_request(&key("alice"), body, terms(timestamp, nonce, commission)).unwrap())
    }

    #[test]
    fn round_trip_and_replay() {
        let body = br#"{"model":"m"}"#;
        let h = signed(body, 1000, "n1", 7);
        let mut cache = ReplayCache::default();
        let a = authenticate(&h, body, 1010, 60, &mut cache).unwrap();
        let expected = RequestTerms {
            body_hash: body_hash(body),
            ..terms(1000, "n1", 7)
        };
        assert_eq!(a.inference_id(), hex::encode(expected.hash()));
        assert_eq!(a.terms, expected);
        assert_eq!(a.address, key("alice").address());
        let e = authenticate(&h, body, 1010, 60, &mut cache).unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::UNAUTHORIZED, "replayed_nonce")
        );
        // Entries older than the window are pruned.
        let h2 = signed(body, 2000, "n1", 7);
        authenticate(&h2, body, 2000, 60, &mut cache).unwrap();
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn rejects_tampering_and_skew() {
        let body = b"{}";
        let mut cache = ReplayCache::default();
        let h = signed(body, 1000, "n", 0);
        let e = authenticate(&h, b"{ }", 1000, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "invalid_signature");
        let mut raised = h.clone();
        raised.insert(HEADER_COMMISSION, HeaderValue::from_static("5"));
        let e = authenticate(&raised, body, 1000, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "invalid_signature", "the commission is signed");
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
        let mut other_address = h.clone();
        other_address.insert(
            HEADER_ADDRESS,
            HeaderValue::from_str(key("bob").address()).unwrap(),
        );
        let e = authenticate(&other_address, body, 1000, 60, &mut cache).unwrap_err();
        assert_eq!(e.code, "address_mismatch");
        authenticate(&h, body, 1000, 60, &mut cache).unwrap();
    }

    #[test]
    fn terms_must_name_this_ta_chain_and_an_affordable_price() {
        let body = br#"{"model":"m","max_tokens":16}"#;
        let auth = verify(&signed(body, 1000, "n", 0), body, 1000, 60).unwrap();
        assert_eq!(
            check_terms(&auth, body, "gonka1ta", "chain", 10, 100),
            Ok(16)
        );
        let code = |r: Result<u64, ApiError>| r.unwrap_err().code;
        assert_eq!(
            code(check_terms(&auth, body, "gonka1other", "chain", 10, 100)),
            "wrong_transfer_agent"
        );
        assert_eq!(
            code(check_terms(&auth, body, "gonka1ta", "chain-2", 10, 100)),
            "wrong_chain"
        );
        assert_eq!(
            code(check_terms(&auth, body, "gonka1ta", "chain", 11, 100)),
            "max_price_too_low"
        );
        assert_eq!(
            code(check_terms(&auth, body, "gonka1ta", "chain", 10, 15)),
            "invalid_max_tokens"
        );
        let other_model = br#"{"model":"m2","max_tokens":16}"#;
        let auth = verify(&signed(other_model, 1000, "n", 0), other_model, 1000, 60).unwrap();
        assert_eq!(
            code(check_terms(
                &auth,
                other_model,
                "gonka1ta",
                "chain",
                10,
                100
            )),
            "terms_mismatch"
        );
    }

    #[test]
    fn the_replay_cache_is_bounded() {
        let body = br#"{"model":"m"}"#;
        let auth = verify(&signed(body, 1000, "n", 0), body, 1000, 60).unwrap();
        let mut cache = ReplayCache::default();
        for i in 0..MAX_REPLAY_ENTRIES {
            let mut other = auth.clone();
            other.terms.nonce = format!("x{i}");
            cache.admit(&other, 1000, 60).unwrap();
        }
        let e = cache.admit(&auth, 1000, 60).unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::SERVICE_UNAVAILABLE, "replay_cache_full")
        );
        // Old entries age out and make room.
        cache.admit(&auth, 1100, 60).unwrap();
    }
}
