//! Typed access to bls state; other crates use these traits, never the keys.

use gonka_proto::bls::BlsKey;
use gonka_proto::query::page::PageRequest;
use gonka_sdk::{paginate_proto, Page, Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::keys;

/// Reads of bls state.
pub trait BlsRead: StateRead {
    /// The BLS key of participant `address`.
    fn bls_key(&self, address: &str) -> Result<Option<BlsKey>> {
        self.get_proto(&keys::bls_key(address))
    }

    /// The participant that registered `pubkey`, if any.
    fn bls_key_owner(&self, pubkey: &[u8]) -> Result<Option<String>> {
        Ok(self
            .get_raw(&keys::pubkey_owner(pubkey))?
            .map(|owner| String::from_utf8_lossy(&owner).into_owned()))
    }

    /// Every registered key, ascending by address (genesis export: the whole table).
    fn bls_keys(&self) -> Result<Vec<BlsKey>> {
        Ok(self
            .prefix_proto(&keys::bls_keys())?
            .into_iter()
            .map(|(_, k)| k)
            .collect())
    }

    /// One page of the registered keys, ascending by address.
    fn bls_keys_page(&self, page: Option<&PageRequest>) -> Result<Page<BlsKey>> {
        paginate_proto(self, &keys::bls_keys(), page, |_, k| Ok(Some(k)))
    }
}

impl<T: StateRead + ?Sized> BlsRead for T {}

/// Writes of bls state.
pub trait BlsWrite: StateWrite {
    /// Stores `key` as its participant's key, freeing the participant's previous public key.
    fn put_bls_key(&mut self, key: &BlsKey) -> Result<()> {
        if let Some(old) = self.bls_key(&key.address)? {
            self.delete_raw(keys::pubkey_owner(&old.pubkey));
        }
        self.put_proto(keys::bls_key(&key.address), key);
        self.put_raw(
            keys::pubkey_owner(&key.pubkey),
            key.address.as_bytes().to_vec(),
        );
        Ok(())
    }
}

impl<T: StateWrite + ?Sized> BlsWrite for T {}
