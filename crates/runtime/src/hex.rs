//! Bytes as lowercase hexadecimal: trace and span ids, digests in keys and ids. Two table
//! lookups a byte, since `format!("{b:02x}")` goes through the formatting machinery per byte
//! and ids are made on every request.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lowercase hexadecimal, two digits a byte.
pub fn lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// `bytes` as lowercase hexadecimal into `out`, which holds two digits a byte (digits beyond
/// its length are left out).
pub fn lower_into(bytes: &[u8], out: &mut [u8]) {
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_two_lowercase_digits() {
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower(&all), expected);
        assert_eq!(lower(&[]), "");
        let mut out = [0u8; 6];
        lower_into(&[0x0f, 0xa0, 0x5c], &mut out);
        assert_eq!(&out, b"0fa05c");
    }
}
