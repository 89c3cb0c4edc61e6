//! Bech32 account addresses with the `gonka` prefix.

use std::sync::OnceLock;

use cosmrs::AccountId;
use gonka_sdk::{ErrorCode, Result};
use sha2::{Digest, Sha256};
use subtle_encoding::bech32::Bech32;

use crate::AuthError;

pub use gonka_proto::address::{
    address_of_compressed_key, address_of_key, address_of_pubkey, ADDRESS_PREFIX,
};

/// Checks that `address` is a canonical (lowercase) bech32 `gonka` address of 20 bytes.
/// `field` names the offending field in the error.
pub fn validate_address(field: &str, address: &str) -> Result<()> {
    // One bech32 decode (the check runs on every address of every tx): a lowercase string
    // that decodes is canonical; an uppercase one that decodes once lowercased is not.
    let (prefix, bytes) = bech32().decode(address).map_err(|e| {
        let lower = address.to_ascii_lowercase();
        if lower != address && bech32().decode(&lower).is_ok() {
            AuthError::InvalidAddress.err(format!(
                "{field} {address} is not in canonical lowercase form; use {lower}"
            ))
        } else {
            AuthError::InvalidAddress.err(format!("{field} {address:?} is not valid bech32: {e}"))
        }
    })?;
    if prefix != ADDRESS_PREFIX {
        return Err(AuthError::InvalidAddress.err(format!(
            "{field} {address} has prefix {prefix:?}, expected {ADDRESS_PREFIX:?}"
        )));
    }
    if bytes.len() != 20 {
        return Err(AuthError::InvalidAddress.err(format!(
            "{field} {address} holds {} bytes, expected 20",
            bytes.len()
        )));
    }
    Ok(())
}

/// The lowercase bech32 codec, built once.
fn bech32() -> &'static Bech32 {
    static CODEC: OnceLock<Bech32> = OnceLock::new();
    CODEC.get_or_init(Bech32::lower_case)
}

/// Address of a module account such as the fee collector: the first 20 bytes of
/// SHA-256(name), as in the Cosmos SDK, so nobody holds its key.
pub fn module_address(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    AccountId::new(ADDRESS_PREFIX, &digest[..20])
        .expect("20 bytes with a lowercase prefix always encode")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_address_is_a_valid_account_address() {
        let address = module_address("fee_collector");
        assert!(address.starts_with("gonka1"));
        validate_address("fee collector", &address).unwrap();
    }

    #[test]
    fn rejects_wrong_prefix_bad_checksum_and_uppercase() {
        let good = module_address("x");
        let cosmos = AccountId::new("cosmos", &[7; 20]).unwrap().to_string();
        let mut bad_checksum = good.clone();
        let last = bad_checksum.pop().unwrap();
        bad_checksum.push(if last == 'q' { 'p' } else { 'q' });
        let short = AccountId::new("gonka", &[7; 19]).unwrap().to_string();
        for (bad, why) in [
            (cosmos, "has prefix \"cosmos\""),
            (bad_checksum, "is not valid bech32"),
            (good.to_uppercase(), "not in canonical lowercase form"),
            ("gonka".into(), "is not valid bech32"),
            (short, "holds 19 bytes"),
        ] {
            let err = validate_address("to_address", &bad).unwrap_err();
            assert_eq!(err.code, AuthError::InvalidAddress as u32, "{bad}");
            assert!(err.log.contains("to_address"), "{}", err.log);
            assert!(err.log.contains(why), "{bad}: {}", err.log);
        }
    }
}
