//! Numbers as ASCII digits in a stack buffer, with no allocation: `Content-Length` values
//! and chunk-size lines on both HTTP/1.1 sides, and the numbers of log lines.

/// `n` in decimal, at the end of `buf` (20 digits hold any `u64`).
#[inline]
pub(crate) fn decimal(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    digits::<10>(n, buf)
}

/// `n` in lower-case hexadecimal, at the end of `buf`.
#[inline]
pub(crate) fn hex(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    digits::<16>(n, buf)
}

/// A bare chunk-size line (RFC 9112 §7.1): `size` in lower-case hex, then CRLF.
#[inline]
pub(crate) fn size_line(size: u64, buf: &mut [u8; 22]) -> &[u8] {
    buf[20..].copy_from_slice(b"\r\n");
    let (number, _) = buf.split_at_mut(20);
    let len = hex(size, number.try_into().expect("20 bytes")).len();
    &buf[20 - len..]
}

/// `n` in base `RADIX`, a constant, so that the division is a multiplication.
#[inline(always)]
fn digits<const RADIX: u64>(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b"0123456789abcdef"[(n % RADIX) as usize];
        n /= RADIX;
        if n == 0 {
            return &buf[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_both_bases() {
        for n in [0, u64::MAX, 305] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
            assert_eq!(hex(n, &mut [0; 20]), format!("{n:x}").as_bytes());
        }
    }

    #[test]
    fn numbers_are_written_in_decimal_and_chunk_sizes_in_hex() {
        assert_eq!(decimal(0, &mut [0; 20]), b"0");
        assert_eq!(decimal(u64::MAX, &mut [0; 20]), b"18446744073709551615");
        assert_eq!(size_line(0, &mut [0; 22]), b"0\r\n");
        assert_eq!(size_line(0x1a2b, &mut [0; 22]), b"1a2b\r\n");
        assert_eq!(size_line(u64::MAX, &mut [0; 22]), b"ffffffffffffffff\r\n");
    }
}
