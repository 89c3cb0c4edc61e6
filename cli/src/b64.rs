//! Standard base64 (RFC 4648, `+/`, `=` padding), as CometBFT writes keys in JSON. Small
//! enough to keep here rather than add a dependency.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `bytes` with padding.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let group = byte(0) << 16 | byte(1) << 8 | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(group >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes padded or unpadded base64; rejects other characters and non-canonical endings.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let data = text.trim_end_matches('=');
    let padding = text.len() - data.len();
    if padding > 2 || (padding > 0 && !text.len().is_multiple_of(4)) || data.len() % 4 == 1 {
        return Err("wrong length or padding".into());
    }
    let mut out = Vec::with_capacity(data.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in data.chars() {
        let value = ALPHABET
            .iter()
            .position(|&a| char::from(a) == c)
            .ok_or_else(|| format!("{c:?} is not a base64 character"))?;
        acc = acc << 6 | value as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if acc != 0 {
        return Err("non-canonical ending".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), encoded);
            assert_eq!(decode(encoded).unwrap(), plain.as_bytes());
            assert_eq!(
                decode(encoded.trim_end_matches('=')).unwrap(),
                plain.as_bytes()
            );
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
        assert!(decode("Zg=").is_err());
        assert!(decode("Z").is_err());
        assert!(decode("Zh==").is_err());
        assert!(decode("Zm9v!").is_err());
        assert!(decode("Zg===").is_err());
    }
}
