//! The off-chain request path's secp256k1 keys: a requester's or a caller's signed headers
//! ([`crate::request::verify_identity`]), an ML node's receipt
//! ([`crate::receipt::Receipt::verify`]) and the signature of a call of an ML node
//! ([`crate::node_call::sign_node_call`]) are checked and made with
//! [`gonka_proto::ecdsa`] (libsecp256k1 with `k256`'s rules, as the chain checks tx
//! signatures).
//!
//! Public keys are decompressed and their addresses derived once per key, in a bounded
//! process-wide cache ([`KeyCache::shared`]): a requester's key arrives with each of its
//! requests, and a transfer agent's with each of its calls. The cache memoises a pure
//! function of the key bytes, so it changes how fast a check is, never its outcome.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use k256::ecdsa::VerifyingKey;

pub use gonka_proto::ecdsa::{sign, PubKey};

/// A public key with the account address it derives to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownKey {
    /// The parsed key.
    pub key: PubKey,
    /// Its bech32 account address (`gonka1…`).
    pub address: String,
}

impl KnownKey {
    /// The key of SEC1 `bytes` and its address, when `k256` takes the bytes as a key. One
    /// parse: [`crate::keys::address_of_pubkey`] would parse the key again.
    pub fn parse(bytes: &[u8]) -> Option<KnownKey> {
        let key = VerifyingKey::from_sec1_bytes(bytes).ok()?;
        Some(KnownKey {
            key: PubKey::of(&key)?,
            address: gonka_proto::address::address_of_key(&key),
        })
    }
}

/// Public keys already parsed ([`KnownKey::parse`]), by SEC1 bytes, bad keys (`None`)
/// included; at most `capacity` of them (beyond, the entry with the smallest key bytes goes:
/// a miss only costs the parse again).
#[derive(Debug)]
pub struct KeyCache {
    entries: Mutex<BTreeMap<Vec<u8>, Option<KnownKey>>>,
    capacity: usize,
}

/// Keys the shared cache holds at most (about 200 bytes each, so about 2 MB).
pub const KEY_CACHE_CAPACITY: usize = 10_000;

/// The lock, even if a holder panicked: the map is whole after every insert or eviction.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl KeyCache {
    /// An empty cache of at most `capacity` keys (at least one).
    pub fn new(capacity: usize) -> KeyCache {
        KeyCache {
            entries: Mutex::new(BTreeMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// The cache of the process, of [`KEY_CACHE_CAPACITY`] keys, that the checks of
    /// [`crate::request`], [`crate::node_call`] and [`crate::receipt`] parse keys through.
    pub fn shared() -> &'static KeyCache {
        static SHARED: OnceLock<KeyCache> = OnceLock::new();
        SHARED.get_or_init(|| KeyCache::new(KEY_CACHE_CAPACITY))
    }

    /// [`KnownKey::parse`] of `bytes`, from the cache when it was parsed before.
    pub fn get(&self, bytes: &[u8]) -> Option<KnownKey> {
        if let Some(found) = lock(&self.entries).get(bytes) {
            return found.clone();
        }
        // Parsed outside the lock: other checks go on meanwhile.
        let parsed = KnownKey::parse(bytes);
        let mut entries = lock(&self.entries);
        if entries.len() >= self.capacity && !entries.contains_key(bytes) {
            entries.pop_first();
        }
        entries.insert(bytes.to_vec(), parsed.clone());
        parsed
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::SigningKey;

    fn compressed(key: &SigningKey) -> Vec<u8> {
        key.verifying_key()
            .to_encoded_point(true)
            .as_bytes()
            .to_vec()
    }

    #[test]
    fn known_keys_parse_and_derive_their_address_as_k256_keys_do() {
        let key = compressed(&SigningKey::from_slice(&[9; 32]).unwrap());
        let mut off_curve = key.clone();
        off_curve[32] ^= 1;
        for bytes in [
            key.clone(),
            off_curve,
            vec![2; 33],
            key[..32].to_vec(),
            vec![],
        ] {
            assert_eq!(
                KnownKey::parse(&bytes).map(|k| k.address),
                crate::keys::address_of_pubkey(&bytes),
                "{}",
                hex::encode(&bytes)
            );
        }
    }

    #[test]
    fn the_key_cache_is_bounded_and_remembers_bad_keys() {
        let cache = KeyCache::new(3);
        for i in 1..=5u8 {
            let bytes = compressed(&SigningKey::from_slice(&[i; 32]).unwrap());
            let known = cache.get(&bytes).unwrap();
            assert_eq!(
                Some(known.address.clone()),
                crate::keys::address_of_pubkey(&bytes)
            );
            assert_eq!(cache.get(&bytes), Some(known));
            assert!(cache.len() <= 3);
        }
        assert_eq!(cache.get(&[7; 33]), None);
        assert_eq!(cache.get(&[7; 33]), None);
        assert_eq!(cache.len(), 3);
    }
}
