//! Gas prices and the fee they ask for: the chain's ante check and every client that sets a
//! fee compute it here, so a fee a client computes is exactly the least the chain accepts.
//!
//! A price is a decimal amount of ngnk per unit of gas with up to [`GasPrice::DECIMALS`]
//! fractional digits ("0.01", "2", "0.000000001"), held as an integer number of
//! 10^-18 ngnk: no floats anywhere.

/// Fractional digits a price can carry, as in the Cosmos SDK's `LegacyDec`.
const DECIMALS: u32 = 18;
/// 10^[`DECIMALS`]: one ngnk in a price's unit.
const ONE: u128 = 10u128.pow(DECIMALS);

/// A price of gas in ngnk per unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct GasPrice {
    /// ngnk per unit of gas × 10^18.
    atto_ngnk: u128,
}

impl GasPrice {
    /// Fractional digits a price can carry.
    pub const DECIMALS: u32 = DECIMALS;

    /// A price of `ngnk` whole ngnk per unit of gas.
    pub fn from_ngnk(ngnk: u64) -> GasPrice {
        GasPrice {
            atto_ngnk: u128::from(ngnk) * ONE,
        }
    }

    /// Parses a non-negative decimal such as `"0.01"`; a trailing `ngnk` denom is accepted
    /// (`"0.01ngnk"`, as Cosmos `--gas-prices` writes it). The error says what was expected.
    pub fn parse(text: &str) -> Result<GasPrice, String> {
        let number = text.trim().strip_suffix("ngnk").unwrap_or(text.trim());
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !digits(whole) || !digits(fraction) || number.ends_with('.') {
            return Err(format!(
                "gas price {text:?} must be a non-negative decimal number of ngnk per gas unit, such as 0.01"
            ));
        }
        if fraction.len() > DECIMALS as usize {
            return Err(format!(
                "gas price {text:?} has {} fractional digits; at most {DECIMALS} are allowed",
                fraction.len()
            ));
        }
        let too_large = || format!("gas price {text:?} is too large");
        let whole: u128 = whole.parse().map_err(|_| too_large())?;
        let scale = 10u128.pow(DECIMALS - fraction.len() as u32);
        let fraction: u128 = if fraction.is_empty() {
            0
        } else {
            fraction.parse::<u128>().map_err(|_| too_large())? * scale
        };
        let atto_ngnk = whole
            .checked_mul(ONE)
            .and_then(|w| w.checked_add(fraction))
            .ok_or_else(too_large)?;
        Ok(GasPrice { atto_ngnk })
    }

    /// The price `factor` times over (`None` past 128 bits): the higher tiers wallets offer.
    pub fn times(&self, factor: u64) -> Option<GasPrice> {
        self.atto_ngnk
            .checked_mul(u128::from(factor))
            .map(|atto_ngnk| GasPrice { atto_ngnk })
    }

    /// Whether the price is zero (fees are then free).
    pub fn is_zero(&self) -> bool {
        self.atto_ngnk == 0
    }

    /// The least fee, in ngnk, that pays for `gas` units: ceil(gas × price), rounded up so
    /// that a fee never pays for less gas than its limit. `None` if it exceeds 128 bits.
    pub fn fee_for(&self, gas: u64) -> Option<u128> {
        let gas = u128::from(gas);
        // Whole and fractional parts separately, so that gas × fraction (< 2^64 × 10^18)
        // never overflows.
        let whole = gas.checked_mul(self.atto_ngnk / ONE)?;
        let fraction = (gas * (self.atto_ngnk % ONE)).div_ceil(ONE);
        whole.checked_add(fraction)
    }
}

/// The canonical decimal form: no trailing fractional zeros ("0.01", "2").
impl std::fmt::Display for GasPrice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, fraction) = (self.atto_ngnk / ONE, self.atto_ngnk % ONE);
        if fraction == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{fraction:018}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimals_and_prints_them_canonically() {
        for (text, shown) in [
            ("0.01", "0.01"),
            ("2", "2"),
            ("2.50", "2.5"),
            ("0.025ngnk", "0.025"),
            ("0", "0"),
            ("0.000000000000000001", "0.000000000000000001"),
        ] {
            assert_eq!(GasPrice::parse(text).unwrap().to_string(), shown, "{text}");
        }
        let price = GasPrice::parse("0.015").unwrap();
        assert_eq!(price.times(4).unwrap().to_string(), "0.06");
        assert_eq!(
            GasPrice::parse("1")
                .unwrap()
                .times(u64::MAX)
                .unwrap()
                .to_string(),
            u64::MAX.to_string()
        );
        assert!(GasPrice::parse(&u128::MAX.to_string()[..20])
            .unwrap()
            .times(u64::MAX)
            .is_none());
        for bad in [
            "",
            ".5",
            "1.",
            "-1",
            "1e3",
            "0.0000000000000000001",
            "1.2.3",
            "x",
        ] {
            assert!(GasPrice::parse(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(GasPrice::parse(&u128::MAX.to_string()).is_err());
    }

    #[test]
    fn fee_rounds_up_and_never_overflows_silently() {
        let price = GasPrice::parse("0.01").unwrap();
        assert_eq!(price.fee_for(100_000), Some(1_000));
        assert_eq!(price.fee_for(100_001), Some(1_001), "rounded up");
        assert_eq!(price.fee_for(0), Some(0));
        assert_eq!(GasPrice::from_ngnk(3).fee_for(7), Some(21));
        assert_eq!(GasPrice::default().fee_for(u64::MAX), Some(0));
        // u64::MAX gas at a fractional price: the fraction part alone must not overflow.
        let almost_one = GasPrice::parse("0.999999999999999999").unwrap();
        // ceil(g × (1 − 10^-18)) = g − floor(g / 10^18) = g − 18 for g = u64::MAX.
        assert_eq!(
            almost_one.fee_for(u64::MAX),
            Some(u128::from(u64::MAX) - 18)
        );
        let huge = GasPrice::parse(&(u128::MAX / ONE).to_string()).unwrap();
        assert_eq!(huge.fee_for(u64::MAX), None);
    }
}
