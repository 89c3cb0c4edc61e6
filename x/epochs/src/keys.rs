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
