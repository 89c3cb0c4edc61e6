//! The auth key schema: the only place auth storage keys are formed.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"auth/params".to_vec()
}

/// The counter handing out account numbers.
pub fn next_account_number() -> Vec<u8> {
    b"auth/next_account_number".to_vec()
}

/// One account, by bech32 address.
pub fn account(address: &str) -> Vec<u8> {
    format!("auth/account/{address}").into_bytes()
}
