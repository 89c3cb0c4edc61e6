//! The bls key schema: the only place bls storage keys are formed.

/// Prefix of the participants' keys.
pub fn bls_keys() -> Vec<u8> {
    b"bls/key/".to_vec()
}

/// The BLS key of participant `address`.
pub fn bls_key(address: &str) -> Vec<u8> {
    let mut key = bls_keys();
    key.extend_from_slice(address.as_bytes());
    key
}

/// Index entry: public key `pubkey` (hex) is registered by the address stored as value.
pub fn pubkey_owner(pubkey: &[u8]) -> Vec<u8> {
    format!("bls/pubkey/{}", hex::encode(pubkey)).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_and_grouped() {
        assert_eq!(bls_key("gonka1a"), b"bls/key/gonka1a");
        assert!(bls_key("gonka1a").starts_with(&bls_keys()));
        assert_eq!(pubkey_owner(&[0xAB, 0x01]), b"bls/pubkey/ab01");
    }
}
