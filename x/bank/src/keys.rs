//! The bank key schema: the only place bank storage keys are formed.

/// Prefix of every balance of `address`.
pub fn balances_of(address: &str) -> Vec<u8> {
    format!("bank/balance/{address}/").into_bytes()
}

/// Balance of `denom` held by `address`.
pub fn balance(address: &str, denom: &str) -> Vec<u8> {
    let mut key = balances_of(address);
    key.extend_from_slice(denom.as_bytes());
    key
}

/// Total supply of `denom`.
pub fn supply(denom: &str) -> Vec<u8> {
    format!("bank/supply/{denom}").into_bytes()
}
