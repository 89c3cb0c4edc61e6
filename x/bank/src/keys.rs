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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_group_under_their_address() {
        assert_eq!(balance("gonka1abc", "ngnk"), b"bank/balance/gonka1abc/ngnk");
        assert!(balance("gonka1abc", "ngnk").starts_with(&balances_of("gonka1abc")));
        // The trailing separator keeps one address's prefix from matching a longer one.
        assert!(!balance("gonka1abcd", "ngnk").starts_with(&balances_of("gonka1abc")));
    }

    #[test]
    fn supply_is_keyed_by_denom() {
        assert_eq!(supply("ngnk"), b"bank/supply/ngnk");
    }
}
