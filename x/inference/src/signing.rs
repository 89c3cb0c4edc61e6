//! The bytes requesters and ML nodes sign, and their verification. Public so the sidecar
//! (transfer agent and ML node) builds exactly what the chain checks.
//!
//! Every signature is secp256k1 ECDSA in 64-byte compact form (`r ‖ s`, low S), over a
//! message that is hashed with SHA-256 before signing, as k256's `Signer`/`Verifier` (and
//! cosmrs) do:
//! - the requester signs the 32 bytes `request_hash` ([`request_signature_ok`]);
//! - the executor ML node signs the 32 bytes [`executor_sign_bytes`].

use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};

pub use gonka_proto::signing::{
    body_hash, executor_sign_bytes, inference_id, request_hash, EXECUTOR_DOMAIN, MAX_NONCE_LEN,
    REQUEST_DOMAIN,
};

/// A SEC1-encoded secp256k1 public key, if it is one.
pub fn parse_pubkey(bytes: &[u8]) -> Option<VerifyingKey> {
    VerifyingKey::from_sec1_bytes(bytes).ok()
}

/// Whether `signature` (64-byte compact) by `pubkey` (SEC1) verifies over `message`
/// (SHA-256 prehashed, as k256's `Verifier`). Malformed keys or signatures do not verify.
pub fn signature_ok(pubkey: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let Some(key) = parse_pubkey(pubkey) else {
        return false;
    };
    Signature::from_slice(signature).is_ok_and(|sig| key.verify(message, &sig).is_ok())
}

/// Whether the requester's `signature` by `pubkey` verifies over the 32 bytes `request_hash`.
pub fn request_signature_ok(pubkey: &[u8], request_hash: &[u8], signature: &[u8]) -> bool {
    request_hash.len() == 32 && signature_ok(pubkey, request_hash, signature)
}

/// Whether the executor node's `signature` by `pubkey` verifies over
/// [`executor_sign_bytes`] of the given fields.
pub fn executor_signature_ok(
    pubkey: &[u8],
    request_hash: &[u8],
    response_hash: &[u8],
    model: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
    signature: &[u8],
) -> bool {
    let bytes = executor_sign_bytes(
        request_hash,
        response_hash,
        model,
        prompt_tokens,
        completion_tokens,
    );
    signature_ok(pubkey, &bytes, signature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::signature::Signer;
    use k256::ecdsa::SigningKey;
    use sha2::{Digest, Sha256};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_slice(&[seed; 32]).unwrap()
    }

    fn pubkey(key: &SigningKey) -> Vec<u8> {
        key.verifying_key()
            .to_encoded_point(true)
            .as_bytes()
            .to_vec()
    }

    #[test]
    fn executor_sign_bytes_follow_the_documented_layout() {
        let request = [1u8; 32];
        let response = [2u8; 32];
        let mut expected = Vec::new();
        expected.extend_from_slice(b"gonka/executor/v1");
        expected.extend_from_slice(&request);
        expected.extend_from_slice(&response);
        expected.extend_from_slice(b"m/x");
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7]);
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 0]);
        let digest: [u8; 32] = Sha256::digest(&expected).into();
        assert_eq!(
            executor_sign_bytes(&request, &response, "m/x", 7, 256),
            digest
        );
        // Every field is bound.
        assert_ne!(
            executor_sign_bytes(&request, &response, "m/x", 8, 256),
            digest
        );
        assert_ne!(
            executor_sign_bytes(&request, &response, "m/y", 7, 256),
            digest
        );
        assert_ne!(
            executor_sign_bytes(&response, &request, "m/x", 7, 256),
            digest
        );
        assert_ne!(
            executor_sign_bytes(&request, &response, "m/x", 7, 257),
            digest
        );
    }

    #[test]
    fn request_signature_verifies_only_for_the_signed_hash_and_key() {
        let requester = key(3);
        let hash = [9u8; 32];
        let signature: Signature = requester.sign(&hash);
        let sig = signature.to_bytes();
        assert!(request_signature_ok(&pubkey(&requester), &hash, &sig));
        assert!(!request_signature_ok(&pubkey(&key(4)), &hash, &sig));
        assert!(!request_signature_ok(&pubkey(&requester), &[8u8; 32], &sig));
        assert!(!request_signature_ok(
            &pubkey(&requester),
            &hash[..31],
            &sig
        ));
        assert!(!request_signature_ok(
            &pubkey(&requester),
            &hash,
            &sig[..63]
        ));
        assert!(!request_signature_ok(&[2u8; 33], &hash, &sig));
        // The signature is over SHA-256(request_hash), not over request_hash as a prehash.
        let prehash_sig: Signature =
            k256::ecdsa::signature::hazmat::PrehashSigner::sign_prehash(&requester, &hash).unwrap();
        assert!(!request_signature_ok(
            &pubkey(&requester),
            &hash,
            &prehash_sig.to_bytes()
        ));
    }

    #[test]
    fn executor_signature_verifies_over_the_sign_bytes() {
        let node = key(5);
        let bytes = executor_sign_bytes(&[1; 32], &[2; 32], "m", 3, 4);
        let sig: Signature = node.sign(&bytes);
        let pk = pubkey(&node);
        assert!(executor_signature_ok(
            &pk,
            &[1; 32],
            &[2; 32],
            "m",
            3,
            4,
            &sig.to_bytes()
        ));
        assert!(!executor_signature_ok(
            &pk,
            &[1; 32],
            &[2; 32],
            "m",
            3,
            5,
            &sig.to_bytes()
        ));
        assert!(!executor_signature_ok(
            &pubkey(&key(6)),
            &[1; 32],
            &[2; 32],
            "m",
            3,
            4,
            &sig.to_bytes()
        ));
    }

    #[test]
    fn inference_id_is_lowercase_hex() {
        assert_eq!(inference_id(&[0xAB; 2]), "abab");
    }
}
