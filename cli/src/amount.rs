//! Amounts on the command line (`1500ngnk`, `2.5gnk`, or a bare number of ngnk) and in
//! text output (`1500ngnk (0.000001500 GNK)`).

use anyhow::{bail, Context, Result};

/// ngnk per GNK.
const NGNK_PER_GNK: u128 = 1_000_000_000;

/// Parses an amount into ngnk.
pub fn parse_ngnk(text: &str) -> Result<u128> {
    let text = text.trim();
    let hint = "write amounts like 1500ngnk, 2.5gnk or 1500";
    if let Some(gnk) = text.strip_suffix("gnk").filter(|_| !text.ends_with("ngnk")) {
        let (whole, fraction) = gnk.split_once('.').unwrap_or((gnk, ""));
        if fraction.len() > 9 || whole.is_empty() && fraction.is_empty() {
            bail!("{text:?}: GNK has at most 9 decimals; {hint}");
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().with_context(|| format!("{text:?}: {hint}"))?
        };
        let fraction_ngnk: u128 = if fraction.is_empty() {
            0
        } else {
            format!("{fraction:0<9}")
                .parse()
                .with_context(|| format!("{text:?}: {hint}"))?
        };
        return whole
            .checked_mul(NGNK_PER_GNK)
            .and_then(|n| n.checked_add(fraction_ngnk))
            .with_context(|| format!("{text:?} is too large"));
    }
    let digits = text.strip_suffix("ngnk").unwrap_or(text);
    digits
        .parse()
        .with_context(|| format!("{text:?} is not an amount; {hint}"))
}

/// `ngnk` in GNK with all 9 decimals (`1500` → `0.000001500`); exact, no floats.
pub fn format_gnk(ngnk: u128) -> String {
    format!("{}.{:09}", ngnk / NGNK_PER_GNK, ngnk % NGNK_PER_GNK)
}

/// A chain amount (decimal string of ngnk) for people: `1500ngnk (0.000001500 GNK)`. A
/// string that is not a number is shown as it is.
pub fn show_ngnk(amount: &str) -> String {
    match amount.parse::<u128>() {
        Ok(ngnk) => format!("{ngnk}ngnk ({} GNK)", format_gnk(ngnk)),
        Err(_) => amount.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_gnk() {
        assert_eq!(format_gnk(0), "0.000000000");
        assert_eq!(format_gnk(1), "0.000000001");
        assert_eq!(format_gnk(1_500), "0.000001500");
        assert_eq!(format_gnk(2_500_000_000), "2.500000000");
        assert_eq!(format_gnk(1_000_000 * NGNK_PER_GNK), "1000000.000000000");
        assert_eq!(
            format_gnk(u128::MAX),
            "340282366920938463463374607431.768211455"
        );
        assert_eq!(show_ngnk("1500"), "1500ngnk (0.000001500 GNK)");
        assert_eq!(show_ngnk(""), "");
        assert_eq!(show_ngnk("12x"), "12x");
        for ngnk in [0, 1, 999_999_999, 1_000_000_001, 123_456_789_012] {
            assert_eq!(
                parse_ngnk(&format!("{}gnk", format_gnk(ngnk))).unwrap(),
                ngnk
            );
        }
    }

    #[test]
    fn parses_units() {
        assert_eq!(parse_ngnk("1500ngnk").unwrap(), 1500);
        assert_eq!(parse_ngnk("1500").unwrap(), 1500);
        assert_eq!(parse_ngnk("2.5gnk").unwrap(), 2_500_000_000);
        assert_eq!(parse_ngnk("0.000000001gnk").unwrap(), 1);
        assert!(parse_ngnk("0.0000000001gnk").is_err());
        assert!(parse_ngnk("-3").is_err());
        assert!(parse_ngnk("ten").is_err());
    }
}
