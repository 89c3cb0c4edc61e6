//! Validated coin amounts.

use std::fmt;

use gonka_proto::bank as pb;
use gonka_sdk::{parse_amount, ErrorCode, Result};

use crate::BankError;

/// A positive amount of one denom.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Coin {
    /// Denomination, e.g. `ngnk`.
    pub denom: String,
    /// Amount in the denom's smallest unit.
    pub amount: u128,
}

impl Coin {
    /// A coin of `amount` `denom`.
    pub fn new(denom: impl Into<String>, amount: u128) -> Self {
        Self {
            denom: denom.into(),
            amount,
        }
    }

    /// A coin of `amount` of the native denom, ngnk.
    pub fn ngnk(amount: u128) -> Self {
        Self::new(crate::NATIVE_DENOM, amount)
    }

    /// Wire form.
    pub fn to_proto(&self) -> pb::Coin {
        pb::Coin {
            denom: self.denom.clone(),
            amount: self.amount.to_string(),
        }
    }
}

impl fmt::Display for Coin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.amount, self.denom)
    }
}

/// Cosmos denom rule: a letter, then 2 to 127 of letters, digits, `/`, `:`, `.`, `_`, `-`.
fn validate_denom(field: &str, denom: &str) -> Result<()> {
    let ok = denom.len() >= 3
        && denom.len() <= 128
        && denom.starts_with(|c: char| c.is_ascii_alphabetic())
        && denom
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/:._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(BankError::InvalidCoins.err(format!("{field} has malformed denom {denom:?}")))
    }
}

/// Parses `(denom, amount)` pairs from the wire: at least one, every amount positive and
/// within u128, no denom twice. Returned sorted by denom.
pub fn parse_coins<'a>(
    field: &str,
    coins: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<Coin>> {
    let mut parsed = Vec::new();
    for (denom, amount) in coins {
        validate_denom(field, denom)?;
        let amount = parse_amount(field, amount)?;
        if amount == 0 {
            return Err(
                BankError::ZeroAmount.err(format!("{field} of {denom} must be positive, found 0"))
            );
        }
        parsed.push(Coin::new(denom, amount));
    }
    if parsed.is_empty() {
        return Err(BankError::InvalidCoins.err(format!("{field} must name at least one coin")));
    }
    parsed.sort();
    if let Some(pair) = parsed.windows(2).find(|w| w[0].denom == w[1].denom) {
        return Err(BankError::InvalidCoins.err(format!(
            "{field} lists denom {} more than once",
            pair[0].denom
        )));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_with_codes() {
        let coins = parse_coins("amount", [("ngnk", "5"), ("abc", "7")]).unwrap();
        assert_eq!(coins, vec![Coin::new("abc", 7), Coin::new("ngnk", 5)]);
        let zero = parse_coins("amount", [("ngnk", "0")]).unwrap_err();
        assert_eq!(
            (zero.codespace, zero.code),
            ("bank", BankError::ZeroAmount as u32)
        );
        let overflow = parse_coins(
            "amount",
            [("ngnk", "340282366920938463463374607431768211456")],
        )
        .unwrap_err();
        assert_eq!(overflow.codespace, "sdk");
        assert!(overflow.log.contains("128 bits"));
        let negative = parse_coins("amount", [("ngnk", "-1")]).unwrap_err();
        assert_eq!(negative.codespace, "sdk");
        for bad in [vec![], vec![("n", "1")], vec![("ngnk", "1"), ("ngnk", "2")]] {
            let err = parse_coins("amount", bad).unwrap_err();
            assert_eq!(err.code, BankError::InvalidCoins as u32);
        }
    }
}
