//! Signature checks over the signed formats of [`gonka_proto::signing`] (request/v3,
//! receipt/v2, node-key/v1). Public so the sidecar checks exactly what the chain checks.
//!
//! Every signature is secp256k1 ECDSA in 64-byte compact form (`r ‖ s`, low S), over a
//! 32-byte message that is hashed with SHA-256 before signing, as k256's `Signer`/`Verifier`
//! (and cosmrs) do.

use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};

pub use gonka_proto::signing::{
    body_hash, inference_id, node_key_proof_bytes, opens, response_hash, result_commitment,
    result_matches, text_output_commitment, ReceiptTerms, RequestTerms,
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

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::signature::Signer;
    use k256::ecdsa::SigningKey;

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
    fn signatures_verify_only_for_the_signed_bytes_and_key() {
        let signer = key(3);
        let hash = [9u8; 32];
        let signature: Signature = signer.sign(&hash);
        let sig = signature.to_bytes();
        assert!(signature_ok(&pubkey(&signer), &hash, &sig));
        assert!(!signature_ok(&pubkey(&key(4)), &hash, &sig));
        assert!(!signature_ok(&pubkey(&signer), &[8u8; 32], &sig));
        assert!(!signature_ok(&pubkey(&signer), &hash, &sig[..63]));
        assert!(!signature_ok(&[2u8; 33], &hash, &sig));
        // The signature is over SHA-256(message), not over the message as a prehash.
        let prehash_sig: Signature =
            k256::ecdsa::signature::hazmat::PrehashSigner::sign_prehash(&signer, &hash).unwrap();
        assert!(!signature_ok(
            &pubkey(&signer),
            &hash,
            &prehash_sig.to_bytes()
        ));
    }
}
