//! The `Host` a forwarded request carries.
//!
//! vLLM builds URLs (the `Location` of its trailing-slash redirect) with Starlette, from the
//! request's `Host` when Starlette finds it valid, else from the address of the socket the
//! client reached. Through mmgate that socket is mmgate's, so a request without a valid
//! `Host` is forwarded with the address the client connected to: the redirect then names
//! mmgate, as it would name vLLM reached directly, and never the upstream. An HTTP/2
//! request's `:authority` becomes its `Host` (RFC 9113 §8.3.1). A valid `Host` is forwarded
//! as sent.

use std::net::{Ipv6Addr, SocketAddr};

use http::header::HOST;
use http::{HeaderValue, Version};

/// How a server names itself from the address it was reached at: IPv6 in brackets, the
/// port left out when it is the scheme's default (as Starlette does).
pub fn own(local: SocketAddr, https: bool) -> HeaderValue {
    let default = if https { 443 } else { 80 };
    // An IPv6 address without its scope id (`%2`), which no Host may carry.
    let text = match (local, local.port() == default) {
        (SocketAddr::V4(a), true) => a.ip().to_string(),
        (SocketAddr::V4(a), false) => a.to_string(),
        (SocketAddr::V6(a), true) => format!("[{}]", a.ip()),
        (SocketAddr::V6(a), false) => format!("[{}]:{}", a.ip(), a.port()),
    };
    HeaderValue::from_str(&text).expect("an address is a header value")
}

/// The `Host` to set on a request forwarded upstream, if its own is to be replaced: when
/// it has none or one Starlette would not use.
pub(super) fn replacement<B>(req: &http::Request<B>, own: &HeaderValue) -> Option<HeaderValue> {
    if req.headers().get(HOST).is_some_and(|h| valid(h.as_bytes())) {
        return None;
    }
    let authority = (req.version() == Version::HTTP_2)
        .then(|| req.uri().authority())
        .flatten()
        .filter(|a| valid(a.as_str().as_bytes()))
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
    Some(authority.unwrap_or_else(|| own.clone()))
}

/// Starlette's `parse_host_header` and `is_valid_port`: a registered name of unreserved,
/// sub-delimiter and `%` characters, or a bracketed IPv6 address (or `v…` future literal),
/// then an optional port of digits, at most 65535 once leading zeros are dropped.
fn valid(value: &[u8]) -> bool {
    let port = match value.first() {
        Some(b'[') => {
            let Some(end) = value.iter().position(|&b| b == b']') else {
                return false;
            };
            if !literal(&value[1..end]) {
                return false;
            }
            &value[end + 1..]
        }
        _ => {
            let end = value
                .iter()
                .position(|&b| !name_byte(b))
                .unwrap_or(value.len());
            if end == 0 {
                return false;
            }
            &value[end..]
        }
    };
    match port {
        [] => true,
        [b':', digits @ ..] => {
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return false;
            }
            let significant = match digits.iter().position(|&b| b != b'0') {
                Some(i) => &digits[i..],
                None => &[],
            };
            let value = |n: u32, &d: &u8| n * 10 + u32::from(d - b'0');
            significant.len() <= 5 && significant.iter().fold(0, value) <= 65535
        }
        _ => false,
    }
}

/// The bytes of a registered name in Starlette's pattern (ASCII letters in either case).
const NAME: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'.' | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'-'
            );
        i += 1;
    }
    table
};

fn name_byte(b: u8) -> bool {
    NAME[usize::from(b)]
}

/// What may stand between the brackets: an IPv6 address Python's `IPv6Address` accepts
/// (hex digits, `:` and `.` only), or `v` (lower case), hex digits, `.` and then
/// unreserved, sub-delimiter or `:` characters.
fn literal(inner: &[u8]) -> bool {
    if let [b'v', rest @ ..] = inner {
        let Some(dot) = rest.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (hex, tail) = (&rest[..dot], &rest[dot + 1..]);
        return !hex.is_empty()
            && hex.iter().all(u8::is_ascii_hexdigit)
            && !tail.is_empty()
            && tail
                .iter()
                .all(|&b| b != b'%' && (name_byte(b) || b == b':'));
    }
    let first_colon = inner.iter().position(|&b| b == b':');
    first_colon.is_some_and(|i| {
        inner[..i].iter().all(u8::is_ascii_hexdigit)
            && !inner[i + 1..].is_empty()
            && inner[i + 1..]
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    }) && std::str::from_utf8(inner).is_ok_and(|s| s.parse::<Ipv6Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_valid_as_starlette_finds_them() {
        for ok in [
            "a.test",
            "A.TEST",
            "a_b",
            "a.test:99",
            "a.test:0",
            "a.test:065535",
            "[::1]",
            "[::1]:8080",
            "1.2.3.4:65535",
            "x%20y",
            "a!$&'()*+,;=-~b",
            "[v1.a:b]",
            "[::ffff:1.2.3.4]",
        ] {
            assert!(valid(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "x:abc",
            "a.test:",
            "user@a.test",
            "a.test/x",
            "a.test?x",
            "a.test#x",
            "é.test",
            "1.2.3.4:65536",
            "a.test:123456",
            "[::1",
            "[:::1]",
            "[1::2::3]",
            "[::1]x",
            "[::1]:",
            "[V1.a]",
            "[v1.]",
            "[g::1]",
            ":80",
            "a:1:2",
            "[]",
        ] {
            assert!(!valid(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn a_server_names_itself_without_its_schemes_default_port() {
        let own = |a: &str, https| own(a.parse().unwrap(), https);
        assert_eq!(own("127.0.0.1:8090", false), "127.0.0.1:8090");
        assert_eq!(own("127.0.0.1:80", false), "127.0.0.1");
        assert_eq!(own("127.0.0.1:80", true), "127.0.0.1:80");
        assert_eq!(own("[::1]:443", true), "[::1]");
        assert_eq!(own("[::1]:8443", true), "[::1]:8443");
        assert_eq!(own("[fe80::1%2]:8080", false), "[fe80::1]:8080");
    }

    #[test]
    fn only_a_missing_or_invalid_host_is_replaced() {
        let own = HeaderValue::from_static("10.0.0.1:8080");
        let request = |version, uri: &str, host: Option<&str>| {
            let mut b = http::Request::post(uri).version(version);
            if let Some(h) = host {
                b = b.header(HOST, h);
            }
            b.body(()).unwrap()
        };
        let h11 = Version::HTTP_11;
        assert_eq!(
            replacement(&request(h11, "/v1", Some("api.test")), &own),
            None
        );
        assert_eq!(
            replacement(&request(h11, "/v1", None), &own),
            Some(own.clone())
        );
        assert_eq!(
            replacement(&request(h11, "/v1", Some("a b")), &own),
            Some(own.clone())
        );
        // An absolute-form target's authority is not a Host to Starlette.
        let abs = request(h11, "http://x.test/v1", None);
        assert_eq!(replacement(&abs, &own), Some(own.clone()));
        let h2 = request(Version::HTTP_2, "http://x.test:8443/v1", None);
        assert_eq!(replacement(&h2, &own).unwrap(), "x.test:8443");
    }
}
