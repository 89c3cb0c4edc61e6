//! secp256k1 ECDSA on libsecp256k1, with `k256`'s rules: the chain's check of every tx
//! signature (the app's signature cache) and the hot off-chain checks and signatures
//! (`gonka_client::sig`: signed request headers, ML node receipts, calls of an ML node), each
//! in about a third of `k256`'s time. Nothing about what is accepted changes, so every node
//! accepts the same bytes whichever library a party uses:
//!
//! - keys and signatures are parsed by `k256`'s rules first ([`PubKey::from_sec1`],
//!   [`k256::ecdsa::Signature::from_slice`]), so exactly the same bytes are refused;
//! - a signature with a high `s` is refused, as `k256` refuses it (libsecp256k1 does too);
//! - the signed message is SHA-256 of the signed bytes, as `k256`'s `Verifier` hashes them;
//! - signing is deterministic (RFC 6979) with a low `s` in both libraries, so a signature is
//!   byte for byte the one `k256` makes (see the tests).

use std::sync::OnceLock;

use k256::ecdsa::{Signature, VerifyingKey};
use k256::elliptic_curve::rand_core::{OsRng, RngCore};
use secp256k1::{All, Message, Secp256k1, SecretKey};
use sha2::{Digest, Sha256};

/// The libsecp256k1 context, randomised once against side channels when signing.
fn context() -> &'static Secp256k1<All> {
    static CONTEXT: OnceLock<Secp256k1<All>> = OnceLock::new();
    CONTEXT.get_or_init(|| {
        let mut context = Secp256k1::new();
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        context.seeded_randomize(&seed);
        context
    })
}

/// The message libsecp256k1 signs and checks for `signed`: its SHA-256, as `k256` hashes it.
fn message(signed: &[u8]) -> Message {
    let digest: [u8; 32] = Sha256::digest(signed).into();
    Message::from_slice(&digest).expect("a SHA-256 digest is 32 bytes")
}

/// A secp256k1 public key that `k256` accepts, ready to check signatures with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PubKey(secp256k1::PublicKey);

impl PubKey {
    /// The key of SEC1 `bytes`, when `k256::ecdsa::VerifyingKey::from_sec1_bytes` takes them
    /// (in any form it takes, compact and uncompressed included).
    pub fn from_sec1(bytes: &[u8]) -> Option<PubKey> {
        Self::of(&VerifyingKey::from_sec1_bytes(bytes).ok()?)
    }

    /// The key `k256` parsed, handed to libsecp256k1 in its compressed form.
    pub fn of(key: &VerifyingKey) -> Option<PubKey> {
        secp256k1::PublicKey::from_slice(key.to_encoded_point(true).as_bytes())
            .ok()
            .map(PubKey)
    }

    /// Whether `signature` is this key's (low-`s`) ECDSA signature of SHA-256(`signed`):
    /// what `k256::ecdsa::VerifyingKey::verify(signed, signature)` accepts.
    pub fn verifies(&self, signed: &[u8], signature: &Signature) -> bool {
        if signature.normalize_s().is_some() {
            return false; // high s: k256 refuses it
        }
        let Ok(parsed) = secp256k1::ecdsa::Signature::from_compact(&signature.to_bytes()) else {
            return false;
        };
        context()
            .verify_ecdsa(&message(signed), &parsed, &self.0)
            .is_ok()
    }
}

/// The 64-byte signature `r ‖ s` of SHA-256(`signed`) by the secp256k1 secret key `secret`:
/// byte for byte what `k256`'s `Signer` makes (deterministic, low `s`). `None` when `secret`
/// is not a valid secret key (zero or not below the curve order).
pub fn sign(secret: &[u8; 32], signed: &[u8]) -> Option<[u8; 64]> {
    let secret = SecretKey::from_slice(secret).ok()?;
    Some(
        context()
            .sign_ecdsa(&message(signed), &secret)
            .serialize_compact(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::signature::{Signer, Verifier};
    use k256::ecdsa::SigningKey;

    fn compressed(key: &SigningKey) -> Vec<u8> {
        key.verifying_key()
            .to_encoded_point(true)
            .as_bytes()
            .to_vec()
    }

    fn k256_verifies(pubkey: &[u8], signed: &[u8], signature: &Signature) -> bool {
        VerifyingKey::from_sec1_bytes(pubkey).is_ok_and(|key| key.verify(signed, signature).is_ok())
    }

    #[test]
    fn accepts_exactly_what_k256_accepts() {
        let key = SigningKey::from_slice(&[9; 32]).unwrap();
        let other = SigningKey::from_slice(&[10; 32]).unwrap();
        let pubkey = compressed(&key);
        let parsed = PubKey::from_sec1(&pubkey).unwrap();
        for i in 0..50u32 {
            let signed = i.to_be_bytes();
            let good: Signature = key.sign(&signed);
            let wrong_key: Signature = other.sign(&signed);
            let high_s = Signature::from_scalars(good.r(), -*good.s()).unwrap();
            for (signature, what) in [(good, "good"), (wrong_key, "other key"), (high_s, "high s")]
            {
                assert_eq!(
                    parsed.verifies(&signed, &signature),
                    k256_verifies(&pubkey, &signed, &signature),
                    "{what} #{i}"
                );
            }
            assert!(parsed.verifies(&signed, &good));
            assert!(!parsed.verifies(&signed, &high_s));
            assert!(!parsed.verifies(&(i + 1).to_be_bytes(), &good));
        }
        // Keys: what k256 refuses is refused (bad prefix, not on the curve, hybrid, short).
        let mut hybrid = key
            .verifying_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec();
        hybrid[0] = 0x06;
        let uncompressed = key
            .verifying_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec();
        let mut off_curve = pubkey.clone();
        off_curve[32] ^= 1;
        let mut bad_prefix = pubkey.clone();
        bad_prefix[0] = 0x07;
        // k256 takes a "compact" key (0x05 ‖ x) too, and so does this.
        let mut compact = pubkey.clone();
        compact[0] = 0x05;
        for bytes in [
            hybrid,
            uncompressed,
            off_curve,
            bad_prefix,
            compact,
            vec![2; 33],
            [&[2u8][..], &[0; 32]].concat(), // x = 0: on no point
            pubkey[..32].to_vec(),
            vec![],
        ] {
            assert_eq!(
                PubKey::from_sec1(&bytes).is_some(),
                VerifyingKey::from_sec1_bytes(&bytes).is_ok(),
                "{}",
                hex::encode(&bytes)
            );
        }
    }

    #[test]
    fn signatures_are_those_of_k256() {
        for seed in 1..=20u8 {
            let secret = [seed; 32];
            let key = SigningKey::from_slice(&secret).unwrap();
            for signed in [&b""[..], b"gonka", &[seed; 100]] {
                let theirs: Signature = key.sign(signed);
                assert_eq!(
                    sign(&secret, signed),
                    Some(theirs.to_bytes().into()),
                    "{seed}"
                );
            }
        }
        // Not secret keys: zero and the curve order.
        assert_eq!(sign(&[0; 32], b"m"), None);
        let order = hex::decode("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
            .unwrap();
        assert_eq!(sign(&order.try_into().unwrap(), b"m"), None);
    }
}
