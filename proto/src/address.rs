//! Account addresses: how a secp256k1 public key becomes a `gonka1…` address. The ante
//! handler, the inference module and every client derive addresses here, so a signature and
//! the address it authorizes always agree.

use k256::ecdsa::VerifyingKey;
use ripemd::Ripemd160;
use sha2::{Digest, Sha256};

/// Human-readable part of every account address.
pub const ADDRESS_PREFIX: &str = "gonka";

/// The bech32 `gonka` address of a secp256k1 public key: RIPEMD-160(SHA-256(compressed SEC1
/// key)), as in the Cosmos SDK.
pub fn address_of_key(key: &VerifyingKey) -> String {
    address_of_compressed_key(key.to_encoded_point(true).as_bytes())
}

/// The address of a public key given as its 33 compressed SEC1 bytes, without checking
/// that they are a curve point (the ante handler checks that with the signature).
pub fn address_of_compressed_key(compressed: &[u8]) -> String {
    let id = Ripemd160::digest(Sha256::digest(compressed));
    subtle_encoding::bech32::encode(ADDRESS_PREFIX, id)
}

/// The address of a SEC1-encoded (compressed or not) secp256k1 public key, or `None` if the
/// bytes are not a point on the curve.
pub fn address_of_pubkey(pubkey: &[u8]) -> Option<String> {
    VerifyingKey::from_sec1_bytes(pubkey)
        .ok()
        .map(|key| address_of_key(&key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::SigningKey;

    #[test]
    fn derives_the_cosmos_sdk_address_of_a_known_key() {
        // Secret key 1: its public key is the curve's generator, whose HASH160 is the
        // well-known 751e76e8199196d454941c45d1b3a323f1433bd6 (BIP-173's example program).
        let key = SigningKey::from_slice(&[[0u8; 31].as_slice(), &[1]].concat()).unwrap();
        let address = address_of_key(key.verifying_key());
        let (prefix, bytes) = subtle_encoding::bech32::decode(&address).unwrap();
        assert_eq!(prefix, ADDRESS_PREFIX);
        assert_eq!(
            bytes,
            [
                0x75, 0x1e, 0x76, 0xe8, 0x19, 0x91, 0x96, 0xd4, 0x54, 0x94, 0x1c, 0x45, 0xd1, 0xb3,
                0xa3, 0x23, 0xf1, 0x43, 0x3b, 0xd6
            ]
        );
    }

    #[test]
    fn compressed_and_uncompressed_keys_share_an_address_and_garbage_has_none() {
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let point = key.verifying_key().to_encoded_point(false);
        assert_eq!(
            address_of_pubkey(point.as_bytes()),
            Some(address_of_key(key.verifying_key()))
        );
        assert_eq!(address_of_pubkey(&[2, 1, 2, 3]), None);
    }
}
