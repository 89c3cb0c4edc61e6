//! Request authentication for the transfer agent.
//!
//! The headers and the signed bytes are defined once in [`gonka_client::request`] (the
//! requester side) and [`gonka_proto::signing::request_hash`] (what the chain recomputes).
//!
//! The TA checks: headers present and well-formed, the public key derives to the claimed
//! address, the signature is valid over `request_hash(SHA-256(body), timestamp, commission,
//! nonce)`, the timestamp is within ±`max_skew` of its clock, and the nonce was not seen before
//! within the skew window. Whether the account can pay is checked by the server against the
//! chain (402), not here.

use std::collections::BTreeSet;

use axum::http::{HeaderMap, StatusCode};
use gonka_client::request::{
    body_hash, request_hash, required_header, verify_signed_headers, HeaderAuthError,
    HEADER_COMMISSION, HEADER_NONCE, MAX_NONCE_LEN,
};

use gonka_client::openai::ApiError;

/// A request that passed authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The requester's address (derived from `pubkey`).
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
    /// The signed commission in ngnk the requester pays the TA.
    pub commission: u128,
    /// SHA-256 of the body (the work record's `prompt_hash`).
    pub body_hash: [u8; 32],
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

    /// Admits a verified request unless its `(timestamp, address, nonce)` was seen within the
    /// skew window; remembers it. Entries older than the window are forgotten.
    pub fn admit(
        &mut self,
        auth: &Authenticated,
        now_secs: u64,
        max_skew_secs: u64,
    ) -> Result<(), ApiError> {
        self.prune(now_secs.saturating_sub(max_skew_secs));
        if !self.insert(auth.timestamp, &auth.address, &auth.nonce) {
            return Err(unauthorized(
                "replayed_nonce",
                format!(
                    "the nonce `{}` was already used with this timestamp and address",
                    auth.nonce
                ),
            ));
        }
        Ok(())
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

/// Checks a request's headers without shared state: well-formed, the key derives to the
/// address, the signature verifies, the timestamp is within `max_skew_secs` of `now_secs`.
/// The expensive part of authentication, so callers run it outside any lock.
pub fn verify(
    headers: &HeaderMap,
    body: &[u8],
    now_secs: u64,
    max_skew_secs: u64,
) -> Result<Authenticated, ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let refused = |e: HeaderAuthError| unauthorized(e.code, e.message);
    let nonce = required_header(&header, HEADER_NONCE).map_err(refused)?;
    if nonce.is_empty()
        || nonce.len() > MAX_NONCE_LEN
        || !nonce.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(unauthorized(
            "invalid_auth_header",
            format!("the `{HEADER_NONCE}` header must be 1 to {MAX_NONCE_LEN} printable ASCII characters"),
        ));
    }
    let commission = match header(HEADER_COMMISSION).map(str::trim) {
        None => 0,
        Some(text) => text.parse::<u128>().map_err(|_| {
            unauthorized(
                "invalid_auth_header",
                format!("the `{HEADER_COMMISSION}` header must be a decimal amount of ngnk but is `{text}`"),
            )
        })?,
    };
    let body_hash = body_hash(body);
    let caller = verify_signed_headers(
        &header,
        |timestamp| request_hash(&body_hash, timestamp, commission, nonce),
        "the request hash SHA-256(\"gonka/request/v1\" ‖ SHA-256(body) ‖ timestamp u64 BE ‖ commission u128 BE ‖ nonce)",
        now_secs,
        max_skew_secs,
    )
    .map_err(refused)?;
    Ok(Authenticated {
        address: caller.address,
        pubkey: caller.pubkey,
        request_hash: caller.signed,
        signature: caller.signature,
        timestamp: caller.timestamp,
        nonce: nonce.to_string(),
        commission,
        body_hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use gonka_client::keys::well_known_mnemonic;
    use gonka_client::request::{sign_request, HEADER_ADDRESS, HEADER_PUBKEY};
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

    fn signed(body: &[u8], timestamp: u64, nonce: &str, commission: u128) -> HeaderMap {
        let pairs = sign_request(&key("alice"), body, timestamp, nonce, commission).unwrap();
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k, HeaderValue::from_str(&v).unwrap());
        }
        h
    }

    #[test]
    fn round_trip_and_replay() {
        let body = br#"{"model":"m"}"#;
        let h = signed(body, 1000, "n1", 7);
        let mut cache = ReplayCache::default();
        let a = authenticate(&h, body, 1010, 60, &mut cache).unwrap();
        assert_eq!(
            a.inference_id(),
            hex::encode(request_hash(&body_hash(body), 1000, 7, "n1"))
        );
        assert_eq!(
            (a.commission, a.address.as_str()),
            (7, key("alice").address())
        );
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
}
