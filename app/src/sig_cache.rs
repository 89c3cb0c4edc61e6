//! Signatures this process has already verified, so a tx's secp256k1 check runs once per
//! node: in `CheckTx`, and not again in recheck or `FinalizeBlock`.
//!
//! Sound by construction: an entry is the SHA-256 of exactly what verification reads — the
//! compressed public key, the sign doc (body, auth info, chain id, account number) and the
//! signature — and only successful verifications are kept, so a hit is the result the check
//! would compute. A hit also spares decompressing the key (a square root in the field): the
//! key was a curve point when it verified. On a miss, the keys of recent signers are found
//! already decompressed (a key is the same point every time it is decompressed). Gas is
//! charged before the lookup either way (gas used is consensus data), so a hit changes only
//! the time a block takes, never its outcome. Bounded: the oldest entries are forgotten past
//! [`CAPACITY`] signatures and [`KEY_CAPACITY`] keys.
//!
//! The check itself runs on libsecp256k1 ([`gonka_proto::ecdsa::PubKey`]), in about a third of
//! `k256`'s time, with `k256`'s rules for what is accepted (keys and signatures parsed by
//! `k256`, high `s` refused): the same bytes verify on every node whichever library checks.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use gonka_proto::ecdsa::PubKey;
use k256::ecdsa::Signature;
use sha2::{Digest, Sha256};

/// Verified signatures remembered (32 bytes each, twice: about 4 MiB with the map's overhead);
/// many blocks' worth of txs at any realistic rate.
pub const CAPACITY: usize = 65_536;

/// Decompressed public keys remembered (about 2 MiB).
pub const KEY_CAPACITY: usize = 16_384;

/// A map that forgets its oldest entries past `capacity`.
struct Bounded<K, V> {
    map: BTreeMap<K, V>,
    order: VecDeque<K>,
    capacity: usize,
}

impl<K: Ord + Copy, V> Bounded<K, V> {
    fn new(capacity: usize) -> Self {
        Bounded {
            map: BTreeMap::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    fn insert(&mut self, key: K, value: V) {
        if self.map.insert(key, value).is_none() {
            self.order.push_back(key);
            while self.order.len() > self.capacity {
                if let Some(oldest) = self.order.pop_front() {
                    self.map.remove(&oldest);
                }
            }
        }
    }
}

/// What this process remembers: signatures that verified, and decompressed keys.
struct Memory {
    verified: Bounded<[u8; 32], ()>,
    keys: Bounded<[u8; 33], PubKey>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            verified: Bounded::new(CAPACITY),
            keys: Bounded::new(KEY_CAPACITY),
        }
    }
}

fn memory() -> MutexGuard<'static, Memory> {
    static MEMORY: OnceLock<Mutex<Memory>> = OnceLock::new();
    MEMORY
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Checks answered from memory since the process started.
static HITS: AtomicU64 = AtomicU64::new(0);
/// Checks that ran the secp256k1 verification since the process started.
static MISSES: AtomicU64 = AtomicU64::new(0);

/// How this process's signature checks were answered (for operators' metrics; never read by
/// the state machine).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Answered from memory.
    pub hits: u64,
    /// Answered by the secp256k1 verification.
    pub misses: u64,
}

/// The signature checks this process has made so far, by how they were answered.
pub fn counts() -> Counts {
    Counts {
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
    }
}

fn entry(key: &[u8], sign_doc: &[u8], signature: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(key);
    hasher.update((sign_doc.len() as u64).to_be_bytes());
    hasher.update(sign_doc);
    hasher.update(signature);
    hasher.finalize().into()
}

/// What a signature check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The signature verifies.
    Valid,
    /// The key is a curve point but the signature does not verify with it.
    BadSignature,
    /// The key bytes are not a secp256k1 point.
    BadKey,
}

/// Whether `signature` by the SEC1-encoded `key` (compressed, 33 bytes) verifies over
/// `sign_doc`: from memory when this process verified exactly these bytes before, else by
/// decompressing the key and the secp256k1 check (remembered on success).
pub fn verify(key: &[u8], sign_doc: &[u8], signature: &[u8]) -> Verdict {
    let id = entry(key, sign_doc, signature);
    if memory().verified.map.contains_key(&id) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return Verdict::Valid;
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let Some(key) = decompressed(key) else {
        return Verdict::BadKey;
    };
    let ok = Signature::from_slice(signature).is_ok_and(|s| key.verifies(sign_doc, &s));
    if ok {
        memory().verified.insert(id, ());
        Verdict::Valid
    } else {
        Verdict::BadSignature
    }
}

/// The point `key` encodes, or `None` if it is none; compressed keys are remembered.
fn decompressed(key: &[u8]) -> Option<PubKey> {
    let Ok(compressed) = <[u8; 33]>::try_from(key) else {
        return PubKey::from_sec1(key);
    };
    if let Some(point) = memory().keys.map.get(&compressed) {
        return Some(*point);
    }
    let point = PubKey::from_sec1(key)?;
    memory().keys.insert(compressed, point);
    Some(point)
}

/// Forgets every verified signature and decompressed key (benchmarks measure the cold path
/// with it).
#[doc(hidden)]
pub fn clear() {
    *memory() = Memory::default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::signature::Signer;
    use k256::ecdsa::SigningKey;

    #[test]
    fn a_bounded_map_forgets_its_oldest_entries_first() {
        let mut map = Bounded::new(2);
        for key in [1, 2, 1, 3] {
            map.insert(key, key * 10);
        }
        // 1 was inserted first (its second insert changed nothing), so it went first.
        assert_eq!(map.map.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(map.order, [2, 3]);
    }

    #[test]
    fn a_hit_is_only_ever_the_exact_bytes_that_verified() {
        let signing = SigningKey::from_slice(&[7; 32]).unwrap();
        let key = signing
            .verifying_key()
            .to_encoded_point(true)
            .as_bytes()
            .to_vec();
        let doc = b"sign doc".to_vec();
        let signature: Signature = signing.sign(&doc);
        let bytes = signature.to_bytes().to_vec();
        let before = counts();
        assert_eq!(verify(&key, &doc, &bytes), Verdict::Valid);
        assert_eq!(
            verify(&key, &doc, &bytes),
            Verdict::Valid,
            "again, from memory"
        );
        // Any other doc, signature or key misses the cache and fails the check.
        assert_eq!(verify(&key, b"other doc", &bytes), Verdict::BadSignature);
        let mut flipped = bytes.clone();
        flipped[5] ^= 1;
        assert_eq!(verify(&key, &doc, &flipped), Verdict::BadSignature);
        let other = SigningKey::from_slice(&[8; 32]).unwrap();
        let other = other.verifying_key().to_encoded_point(true);
        assert_eq!(
            verify(other.as_bytes(), &doc, &bytes),
            Verdict::BadSignature
        );
        // A failure is never remembered as a success.
        assert_eq!(verify(&key, b"other doc", &bytes), Verdict::BadSignature);
        // Bytes that are no curve point (x = 5 has no y on secp256k1) are no key.
        let mut not_a_point = [0u8; 33];
        not_a_point[0] = 2;
        not_a_point[32] = 5;
        assert_eq!(verify(&not_a_point, &doc, &bytes), Verdict::BadKey);
        // The high-s twin of the valid signature (r, n − s) is refused, as k256 refuses it:
        // which library checks changes nothing about what the chain accepts.
        let s = -*signature.s().as_ref();
        let high = Signature::from_scalars(signature.r().to_bytes(), s.to_bytes()).unwrap();
        assert!(
            k256::ecdsa::signature::Verifier::verify(signing.verifying_key(), &doc, &high).is_err()
        );
        assert_eq!(verify(&key, &doc, &high.to_bytes()), Verdict::BadSignature);
        // One check came from memory, seven ran the verification (other tests may add more).
        let after = counts();
        assert!(after.hits > before.hits);
        assert!(after.misses >= before.misses + 7);
    }
}
