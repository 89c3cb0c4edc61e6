//! The auth key schema: the only place auth storage keys are formed.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"auth/params".to_vec()
}

/// The counter handing out account numbers.
pub fn next_account_number() -> Vec<u8> {
    b"auth/next_account_number".to_vec()
}

/// Prefix of every account.
pub fn accounts() -> Vec<u8> {
    b"auth/account/".to_vec()
}

/// One account, by bech32 address.
pub fn account(address: &str) -> Vec<u8> {
    let mut key = accounts();
    key.extend_from_slice(address.as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_keys() {
        assert_eq!(params(), b"auth/params");
        assert_eq!(next_account_number(), b"auth/next_account_number");
    }

    #[test]
    fn accounts_are_keyed_by_address() {
        assert_eq!(account("gonka1abc"), b"auth/account/gonka1abc");
        assert!(account("gonka1abc").starts_with(&accounts()));
    }
}
