//! The bank key schema: the only place bank storage keys are formed.

/// Prefix of every balance.
pub fn all_balances() -> Vec<u8> {
    b"bank/balance/".to_vec()
}

/// Prefix of every balance of `address`.
pub fn balances_of(address: &str) -> Vec<u8> {
    let mut key = all_balances();
    key.extend_from_slice(format!("{address}/").as_bytes());
    key
}

/// The address of a [`balance`] key (addresses hold no `/`; denoms may).
pub fn parse_balance_address(key: &[u8]) -> Option<String> {
    let rest = std::str::from_utf8(key.strip_prefix(all_balances().as_slice())?).ok()?;
    rest.split_once('/').map(|(address, _)| address.to_string())
}

/// Balance of `denom` held by `address`.
pub fn balance(address: &str, denom: &str) -> Vec<u8> {
    let mut key = balances_of(address);
    key.extend_from_slice(denom.as_bytes());
    key
}

/// Prefix of every denom's total supply.
pub fn supplies() -> Vec<u8> {
    b"bank/supply/".to_vec()
}

/// Total supply of `denom`.
pub fn supply(denom: &str) -> Vec<u8> {
    let mut key = supplies();
    key.extend_from_slice(denom.as_bytes());
    key
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
        assert!(balances_of("gonka1abc").starts_with(&all_balances()));
        let ibc = balance("gonka1abc", "ibc/27AB");
        assert_eq!(parse_balance_address(&ibc).as_deref(), Some("gonka1abc"));
        assert_eq!(parse_balance_address(&supply("ngnk")), None);
    }

    #[test]
    fn supply_is_keyed_by_denom() {
        assert_eq!(supply("ngnk"), b"bank/supply/ngnk");
    }
}
