//! Numbers as ASCII digits in a stack buffer, with no allocation: `Content-Length` values
//! and chunk-size lines on both HTTP/1.1 sides, and the numbers of log lines.

/// `n` in base `radix` (10, or 16 in lower case), at the end of `buf` (20 digits hold any
/// `u64` in either).
#[inline]
pub(crate) fn digits(mut n: u64, radix: u64, buf: &mut [u8; 20]) -> &[u8] {
    debug_assert!(radix == 10 || radix == 16);
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b"0123456789abcdef"[(n % radix) as usize];
        n /= radix;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// A bare chunk-size line (RFC 9112 §7.1): `size` in lower-case hex, then CRLF.
#[inline]
pub(crate) fn size_line(size: u64, buf: &mut [u8; 22]) -> &[u8] {
    buf[20..].copy_from_slice(b"\r\n");
    let (number, _) = buf.split_at_mut(20);
    let len = digits(size, 16, number.try_into().expect("20 bytes")).len();
    &buf[20 - len..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_both_bases() {
        for (n, radix) in [(0, 10), (u64::MAX, 10), (0, 16), (u64::MAX, 16), (305, 16)] {
            let expected = if radix == 10 {
                n.to_string()
            } else {
                format!("{n:x}")
            };
            assert_eq!(digits(n, radix, &mut [0; 20]), expected.as_bytes());
        }
    }

    #[test]
    fn numbers_are_written_in_decimal_and_chunk_sizes_in_hex() {
        assert_eq!(digits(0, 10, &mut [0; 20]), b"0");
        assert_eq!(digits(u64::MAX, 10, &mut [0; 20]), b"18446744073709551615");
        assert_eq!(size_line(0, &mut [0; 22]), b"0\r\n");
        assert_eq!(size_line(0x1a2b, &mut [0; 22]), b"1a2b\r\n");
        assert_eq!(size_line(u64::MAX, &mut [0; 22]), b"ffffffffffffffff\r\n");
    }
}
