//! Bech32 account addresses with the `gonka` prefix.

use std::str::FromStr;

use cosmrs::AccountId;
use gonka_sdk::{ErrorCode, Result};
use sha2::{Digest, Sha256};

use crate::AuthError;

pub use gonka_proto::address::{address_of_key, address_of_pubkey, ADDRESS_PREFIX};

/// Checks that `address` is a canonical (lowercase) bech32 `gonka` address of 20 bytes.
/// `field` names the offending field in the error.
pub fn validate_address(field: &str, address: &str) -> Result<()> {
    let id = AccountId::from_str(address).map_err(|e| {
        AuthError::InvalidAddress.err(format!("{field} {address:?} is not valid bech32: {e}"))
    })?;
    if id.prefix() != ADDRESS_PREFIX {
        return Err(AuthError::InvalidAddress.err(format!(
            "{field} {address} has prefix {:?}, expected {ADDRESS_PREFIX:?}",
            id.prefix()
        )));
    }
    if id.to_bytes().len() != 20 {
        return Err(AuthError::InvalidAddress.err(format!(
            "{field} {address} holds {} bytes, expected 20",
            id.to_bytes().len()
        )));
    }
    if id.as_ref() != address {
        return Err(AuthError::InvalidAddress.err(format!(
            "{field} {address} is not in canonical lowercase form; use {}",
            id.as_ref()
        )));
    }
    Ok(())
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
        for bad in [cosmos, bad_checksum, good.to_uppercase(), "gonka".into()] {
            let err = validate_address("to_address", &bad).unwrap_err();
            assert_eq!(err.code, AuthError::InvalidAddress as u32, "{bad}");
            assert!(err.log.contains("to_address"), "{}", err.log);
        }
    }
}
