//! Signatures this process has already verified, so a tx's secp256k1 check runs once per
//! node: in `CheckTx`, and not again in recheck or `FinalizeBlock`.
//!
//! Sound by construction: an entry is the SHA-256 of exactly what verification reads — the
//! compressed public key, the sign doc (body, auth info, chain id, account number) and the
//! signature — and only successful verifications are kept, so a hit is the result the check
//! would compute. Gas is charged before the lookup either way (gas used is consensus data), so
//! a hit changes only the time a block takes, never its outcome. Bounded: the oldest entries
//! are forgotten past [`CAPACITY`].

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Mutex, OnceLock};

use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

/// Verified signatures remembered (32 bytes each, twice: about 4 MiB with the set's overhead);
/// many blocks' worth of txs at any realistic rate.
pub const CAPACITY: usize = 65_536;

#[derive(Default)]
struct Verified {
    set: BTreeSet<[u8; 32]>,
    order: VecDeque<[u8; 32]>,
}

fn verified() -> &'static Mutex<Verified> {
    static VERIFIED: OnceLock<Mutex<Verified>> = OnceLock::new();
    VERIFIED.get_or_init(Mutex::default)
}

fn entry(key: &VerifyingKey, sign_doc: &[u8], signature: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(key.to_encoded_point(true).as_bytes());
    hasher.update((sign_doc.len() as u64).to_be_bytes());
    hasher.update(sign_doc);
    hasher.update(signature);
    hasher.finalize().into()
}

/// Whether `signature` by `key` verifies over `sign_doc`: from memory when this process
/// verified exactly these bytes before, else by the secp256k1 check (remembered on success).
pub fn verify(key: &VerifyingKey, sign_doc: &[u8], signature: &[u8]) -> bool {
    let id = entry(key, sign_doc, signature);
    let lock = || verified().lock().unwrap_or_else(|e| e.into_inner());
    if lock().set.contains(&id) {
        return true;
    }
    let ok = Signature::from_slice(signature).is_ok_and(|s| key.verify(sign_doc, &s).is_ok());
    if ok {
        let mut cache = lock();
        if cache.set.insert(id) {
            cache.order.push_back(id);
            while cache.order.len() > CAPACITY {
                if let Some(oldest) = cache.order.pop_front() {
                    cache.set.remove(&oldest);
                }
            }
        }
    }
    ok
}

/// Forgets every verified signature (benchmarks measure the cold path with it).
#[doc(hidden)]
pub fn clear() {
    *verified().lock().unwrap_or_else(|e| e.into_inner()) = Verified::default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::signature::Signer;
    use k256::ecdsa::SigningKey;

    #[test]
    fn a_hit_is_only_ever_the_exact_bytes_that_verified() {
        let signing = SigningKey::from_slice(&[7; 32]).unwrap();
        let key = *signing.verifying_key();
        let doc = b"sign doc".to_vec();
        let signature: Signature = signing.sign(&doc);
        let bytes = signature.to_bytes().to_vec();
        assert!(verify(&key, &doc, &bytes));
        assert!(verify(&key, &doc, &bytes), "and again, from memory");
        // Any other doc, signature or key misses the cache and fails the check.
        assert!(!verify(&key, b"other doc", &bytes));
        let mut flipped = bytes.clone();
        flipped[5] ^= 1;
        assert!(!verify(&key, &doc, &flipped));
        let other = *SigningKey::from_slice(&[8; 32]).unwrap().verifying_key();
        assert!(!verify(&other, &doc, &bytes));
        // A failure is never remembered as a success.
        assert!(!verify(&key, b"other doc", &bytes));
    }
}
