//! The epochs key schema.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"epochs/params".to_vec()
}

/// The running epoch.
pub fn current() -> Vec<u8> {
    b"epochs/current".to_vec()
}

/// A finished epoch; zero-padded so keys sort by number.
pub fn history(number: u64) -> Vec<u8> {
    format!("epochs/history/{number:020}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_keys() {
        assert_eq!(params(), b"epochs/params");
        assert_eq!(current(), b"epochs/current");
    }

    #[test]
    fn history_sorts_by_epoch_number() {
        assert_eq!(history(7), b"epochs/history/00000000000000000007");
        assert!(history(9) < history(10));
    }
}
