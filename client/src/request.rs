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

use crate::keys::{Key, ADDRESS_PREFIX};

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
        (HEADER_PUBKEY, hex(&key.public_key().to_bytes())),
        (HEADER_TIMESTAMP, timestamp.to_string()),
        (HEADER_NONCE, nonce.to_string()),
        (HEADER_COMMISSION, commission.to_string()),
        (HEADER_SIGNATURE, hex(&signature.to_bytes())),
    ])
}

/// The bech32 account address of a SEC1 secp256k1 public key, or `None` if it is not one.
pub fn address_of_pubkey(pubkey: &[u8]) -> Option<String> {
    let key = k256::ecdsa::VerifyingKey::from_sec1_bytes(pubkey).ok()?;
    cosmrs::crypto::PublicKey::from(&key)
        .account_id(ADDRESS_PREFIX)
        .ok()
        .map(|id| id.to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
        let pubkey = decode_hex(&get(HEADER_PUBKEY));
        assert_eq!(address_of_pubkey(&pubkey).as_deref(), Some(key.address()));
        let verifying = k256::ecdsa::VerifyingKey::from_sec1_bytes(&pubkey).unwrap();
        let signature =
            k256::ecdsa::Signature::from_slice(&decode_hex(&get(HEADER_SIGNATURE))).unwrap();
        let signed = request_hash(&body_hash(b"{}"), 7, 3, "n-1");
        verifying.verify(&signed, &signature).unwrap();
        // A different commission is a different message.
        let raised = request_hash(&body_hash(b"{}"), 7, 4, "n-1");
        assert!(verifying.verify(&raised, &signature).is_err());
        assert_eq!(address_of_pubkey(&[2; 5]), None);
    }

    fn decode_hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
