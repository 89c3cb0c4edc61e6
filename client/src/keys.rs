//! secp256k1 account keys from BIP-39 mnemonics on the Cosmos path m/44'/118'/0'/0/0.

use anyhow::{anyhow, bail, Context, Result};
use cosmrs::bip32::{DerivationPath, XPrv};
use cosmrs::crypto::secp256k1::SigningKey;
use k256::elliptic_curve::rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};

/// HD derivation path of gonka account keys (Cosmos coin type 118).
pub const HD_PATH: &str = "m/44'/118'/0'/0/0";

pub use gonka_proto::address::{address_of_pubkey, ADDRESS_PREFIX};

/// An account key.
pub struct Key {
    signing_key: SigningKey,
    secret: [u8; 32],
    address: String,
}

impl Key {
    /// Derives the key of `mnemonic` (12 or 24 English words, no passphrase).
    pub fn from_mnemonic(mnemonic: &str) -> Result<Key> {
        let mnemonic = bip39::Mnemonic::parse_normalized(mnemonic.trim())
            .map_err(|e| anyhow!("not a valid BIP-39 mnemonic: {e}"))?;
        let seed = mnemonic.to_seed("");
        let path: DerivationPath = HD_PATH.parse().expect("constant path parses");
        let xprv = XPrv::derive_from_path(seed, &path)
            .map_err(|e| anyhow!("key derivation failed: {e}"))?;
        let secret: [u8; 32] = xprv.private_key().to_bytes().into();
        let signing_key = SigningKey::from_slice(&secret)
            .map_err(|e| anyhow!("derived key is not a valid secp256k1 key: {e}"))?;
        let address = address_of_pubkey(&signing_key.public_key().to_bytes())
            .ok_or_else(|| anyhow!("the derived public key is not a secp256k1 point"))?;
        Ok(Key {
            signing_key,
            secret,
            address,
        })
    }

    /// Bech32 address (`gonka1...`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Compressed public key.
    pub fn public_key(&self) -> cosmrs::crypto::PublicKey {
        self.signing_key.public_key()
    }

    /// The signing key, for building transactions.
    pub fn signing_key(&self) -> &SigningKey {
        &self.signing_key
    }

    /// The raw 32-byte secp256k1 private key (for `gonkad keys export --private-key`).
    pub fn secret_bytes(&self) -> [u8; 32] {
        self.secret
    }
}

/// A new random 24-word mnemonic from the operating system's RNG.
pub fn generate_mnemonic() -> String {
    let mut entropy = [0u8; 32];
    OsRng.fill_bytes(&mut entropy);
    bip39::Mnemonic::from_entropy(&entropy)
        .expect("32 bytes is valid entropy")
        .to_string()
}

/// A fixed 24-word mnemonic derived from `label`, for test accounts whose keys everyone
/// may know (localnet, tests). Never use one for real funds.
pub fn well_known_mnemonic(label: &str) -> String {
    let entropy = Sha256::digest(format!("gonka well-known test key: {label}").as_bytes());
    bip39::Mnemonic::from_entropy(&entropy)
        .expect("32 bytes is valid entropy")
        .to_string()
}

/// Checks a mnemonic and returns it normalised (single spaces), for storing.
pub fn normalize_mnemonic(mnemonic: &str) -> Result<String> {
    Key::from_mnemonic(mnemonic).context("cannot import key")?;
    Ok(mnemonic.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A secp256k1 secret key from the hex of its 32 bytes (an ML node's response key file).
pub fn parse_secret_key_hex(text: &str) -> Result<k256::ecdsa::SigningKey> {
    let digits = text.trim();
    let bytes = hex::decode(digits).map_err(|e| {
        anyhow!(
            "expected the hex of a 32-byte secp256k1 secret key, found text that is not hex ({e})"
        )
    })?;
    if bytes.len() != 32 {
        bail!(
            "expected the hex of a 32-byte secp256k1 secret key (64 hex digits), found {} bytes",
            bytes.len()
        );
    }
    k256::ecdsa::SigningKey::from_slice(&bytes).map_err(|_| {
        anyhow!(
            "the 32 bytes are not a valid secp256k1 secret key (zero or not below the curve order)"
        )
    })
}

/// Reads a secret key file written as [`parse_secret_key_hex`] reads it.
pub fn read_secret_key_file(path: &std::path::Path) -> Result<k256::ecdsa::SigningKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the key file {}", path.display()))?;
    parse_secret_key_hex(&text).with_context(|| format!("key file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_derives_the_cosmos_address() {
        // The well-known test mnemonic of many Cosmos tutorials; address bytes match
        // `cosmos1...` derivations of the same path, re-encoded with our prefix.
        let key = Key::from_mnemonic(
            "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
        )
        .unwrap();
        let cosmos = key.public_key().account_id("cosmos").unwrap().to_string();
        assert_eq!(cosmos, "cosmos19rl4cm2hmr8afy4kldpxz3fka4jguq0auqdal4");
        assert!(key.address().starts_with("gonka1"));
    }

    #[test]
    fn well_known_mnemonics_are_stable_and_distinct() {
        let a = well_known_mnemonic("alice");
        assert_eq!(a, well_known_mnemonic("alice"));
        assert_ne!(a, well_known_mnemonic("bob"));
        assert_eq!(a.split(' ').count(), 24);
        assert!(Key::from_mnemonic("not a mnemonic").is_err());
    }
}
