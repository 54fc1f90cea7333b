//! A request head off the wire: `httparse` over the connection's read buffer, then an
//! `http::Request` whose target and header values are slices of the head's own bytes (no
//! copy), and the body's framing (RFC 9112 §6.3).
//!
//! What hyper's server refuses is refused the same way here: a head that does not parse,
//! an invalid target or field, a `Transfer-Encoding` whose last coding is not `chunked`
//! (or any on HTTP/1.0), and `Content-Length` values that are not all the same plain
//! decimal number get 400; a head over 64 KiB or with more than 100 fields gets 431. A head
//! with both `Content-Length` and `Transfer-Encoding` is passed on marked
//! [`AmbiguousFraming`], for the gateway to refuse and count.

use bytes::BytesMut;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};

use crate::framing::AmbiguousFraming;

/// The longest request head accepted.
pub(super) const MAX_HEAD: usize = 64 << 10;
/// The most header fields in a request head.
const MAX_HEADERS: usize = 100;

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub(super) struct Head {
    /// The request, without its body.
    pub(super) request: Request<()>,
    pub(super) framing: Framing,
    /// Whether the client lets the connection carry another request after this one.
    pub(super) keep_alive: bool,
    /// Whether the client waits for `100 Continue` before it sends the body.
    pub(super) expect_continue: bool,
}

/// Where one field's name and value lie in the head.
#[derive(Clone, Copy)]
struct Field {
    name: (usize, usize),
    value: (usize, usize),
}

/// Room for the field positions of a head, kept by a connection from one head to the next.
#[derive(Default)]
pub(super) struct Fields(Vec<Field>);

/// Takes the request head at the start of `buf` off it: `Ok(None)` while it is incomplete,
/// `Err` with the status that refuses it.
pub(super) fn parse(buf: &mut BytesMut, fields: &mut Fields) -> Result<Option<Head>, StatusCode> {
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let base = buf.as_ptr() as usize;
    let at = |s: &[u8]| (s.as_ptr() as usize - base, s.len());
    let mut parsed = httparse::Request::new(&mut []);
    let len = match parsed.parse_with_uninit_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(httparse::Status::Complete(_)) => {
            return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Ok(None),
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
            return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Err(_) => return Err(StatusCode::BAD_REQUEST),
    };
    let bad = StatusCode::BAD_REQUEST;
    let method =
        Method::from_bytes(parsed.method.unwrap_or_default().as_bytes()).map_err(|_| bad)?;
    let target = at(parsed.path.unwrap_or_default().as_bytes());
    let version = match parsed.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let fields = &mut fields.0;
    fields.clear();
    fields.extend(parsed.headers.iter().map(|h| Field {
        name: at(h.name.as_bytes()),
        value: at(h.value),
    }));
    let head = buf.split_to(len).freeze();
    let slice = |(start, len): (usize, usize)| head.slice(start..start + len);

    let uri = Uri::from_maybe_shared(slice(target)).map_err(|_| bad)?;
    let mut headers = HeaderMap::with_capacity(fields.len());
    let mut seen = Seen::default();
    for f in fields.iter() {
        let name = field_name(&head[f.name.0..f.name.0 + f.name.1]).ok_or(bad)?;
        let value = HeaderValue::from_maybe_shared(slice(f.value)).map_err(|_| bad)?;
        seen.note(&name, value.as_bytes())?;
        headers.append(name, value);
    }
    let framing = match (seen.chunked_last, seen.length) {
        (Some(_), _) if version == Version::HTTP_10 => return Err(bad),
        (Some(false), _) => return Err(bad),
        (Some(true), _) => Framing::Chunked,
        (None, Some(0) | None) => Framing::Empty,
        (None, Some(n)) => Framing::Length(n),
    };
    let keep_alive = match version {
        Version::HTTP_10 => seen.keep_alive && !seen.close,
        _ => !seen.close,
    };
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    if seen.chunked_last.is_some() && seen.length.is_some() {
        request.extensions_mut().insert(AmbiguousFraming);
    }
    Ok(Some(Head {
        request,
        framing,
        keep_alive,
        expect_continue: seen.expect_continue && version == Version::HTTP_11,
    }))
}

/// `bytes` as a field name. The names most requests carry, spelled as clients send them
/// (capitalised, or all lower case), are recognised whole, without `HeaderName::from_bytes`
/// (a copy through a case-folding table, then a match); any other spelling is parsed.
fn field_name(bytes: &[u8]) -> Option<HeaderName> {
    let is = |capital: &[u8], lower: &[u8]| bytes == capital || bytes == lower;
    match bytes.len() {
        4 if is(b"Host", b"host") => Some(header::HOST),
        6 if is(b"Accept", b"accept") => Some(header::ACCEPT),
        10 if is(b"User-Agent", b"user-agent") => Some(header::USER_AGENT),
        10 if is(b"Connection", b"connection") => Some(header::CONNECTION),
        12 if is(b"Content-Type", b"content-type") => Some(header::CONTENT_TYPE),
        13 if is(b"Authorization", b"authorization") => Some(header::AUTHORIZATION),
        14 if is(b"Content-Length", b"content-length") => Some(header::CONTENT_LENGTH),
        15 if is(b"Accept-Encoding", b"accept-encoding") => Some(header::ACCEPT_ENCODING),
        _ => HeaderName::from_bytes(bytes).ok(),
    }
}

/// What the fields that frame the message and the connection said.
#[derive(Default)]
struct Seen {
    /// The one `Content-Length` value.
    length: Option<u64>,
    /// Whether the last transfer coding is `chunked`, once there is one.
    chunked_last: Option<bool>,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
}

impl Seen {
    fn note(&mut self, name: &HeaderName, value: &[u8]) -> Result<(), StatusCode> {
        let bad = StatusCode::BAD_REQUEST;
        if *name == header::CONTENT_LENGTH {
            for v in value.split(|&b| b == b',') {
                let n = decimal(v.trim_ascii()).ok_or(bad)?;
                if self.length.is_some_and(|l| l != n) {
                    return Err(bad);
                }
                self.length = Some(n);
            }
        } else if *name == header::TRANSFER_ENCODING {
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
            self.chunked_last = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if *name == header::CONNECTION {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if *name == header::EXPECT {
            self.expect_continue = value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
        Ok(())
    }
}

/// A plain decimal number (digits only, no sign), within `u64`.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

/// The bytes of a request head for the tests.
#[cfg(test)]
fn parse_all(wire: &str) -> Result<Option<Head>, StatusCode> {
    parse(&mut BytesMut::from(wire), &mut Fields::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing(fields: &str) -> Result<Framing, StatusCode> {
        let wire = format!("POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n{fields}\r\n");
        Ok(parse_all(&wire)?.expect("whole").framing)
    }

    #[test]
    fn bodies_are_framed_as_rfc_9112_says() {
        let bad = Err(StatusCode::BAD_REQUEST);
        assert_eq!(framing(""), Ok(Framing::Empty));
        assert_eq!(framing("Content-Length: 0\r\n"), Ok(Framing::Empty));
        assert_eq!(framing("Content-Length: 12\r\n"), Ok(Framing::Length(12)));
        assert_eq!(
            framing("Content-Length: 12, 12\r\nContent-Length: 12\r\n"),
            Ok(Framing::Length(12))
        );
        assert_eq!(
            framing("Transfer-Encoding: gzip, Chunked\r\n"),
            Ok(Framing::Chunked)
        );
        for refused in [
            "Content-Length: 4\r\nContent-Length: 5\r\n",
            "Content-Length: 4, 5\r\n",
            "Content-Length: +4\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: \r\n",
            "Content-Length: 99999999999999999999\r\n",
            "Transfer-Encoding: gzip\r\n",
            "Transfer-Encoding: chunked, gzip\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
        ] {
            assert_eq!(framing(refused), bad, "{refused:?}");
        }
        let http10 = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse_all(http10).err(), Some(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn both_length_and_chunked_are_marked_ambiguous() {
        let wire = "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n";
        let head = parse_all(wire).unwrap().unwrap();
        assert_eq!(head.framing, Framing::Chunked);
        assert!(head
            .request
            .extensions()
            .get::<AmbiguousFraming>()
            .is_some());
        let plain = parse_all("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(plain
            .request
            .extensions()
            .get::<AmbiguousFraming>()
            .is_none());
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection_tokens() {
        let alive = |wire: &str| parse_all(wire).unwrap().unwrap().keep_alive;
        assert!(alive("GET / HTTP/1.1\r\n\r\n"));
        assert!(!alive("GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\n"));
        assert!(!alive("GET / HTTP/1.0\r\n\r\n"));
        assert!(alive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    }

    #[test]
    fn the_head_is_taken_off_the_buffer_and_its_values_kept() {
        let mut buf = BytesMut::from(
            "POST /v1/x?y=1 HTTP/1.1\r\nHost: gw\r\nX-Key: a b\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}GET",
        );
        let head = parse(&mut buf, &mut Fields::default()).unwrap().unwrap();
        assert_eq!(&buf[..], b"{}GET");
        let r = &head.request;
        assert_eq!(
            (r.method(), r.uri().path(), r.uri().query()),
            (&Method::POST, "/v1/x", Some("y=1"))
        );
        assert_eq!(r.headers()["x-key"], "a b");
        assert!(head.expect_continue);
        let _body = buf.split_to(2);
        assert!(
            matches!(parse(&mut buf, &mut Fields::default()), Ok(None)),
            "a partial head waits"
        );
    }

    #[test]
    fn recognised_names_are_the_ones_parsing_gives() {
        let names = [
            "Host",
            "host",
            "HOST",
            "hOst",
            "Hosts",
            "Accept",
            "accept",
            "ACCEPT",
            "User-Agent",
            "user-agent",
            "USER-AGENT",
            "Connection",
            "connection",
            "Connectiom",
            "Content-Type",
            "content-type",
            "Content_Type",
            "Authorization",
            "authorization",
            "Content-Length",
            "content-length",
            "Content-Lengt\u{e9}",
            "Accept-Encoding",
            "accept-encoding",
            "X-Request-Id",
            "x-api-key",
            "Expect",
            "Transfer-Encoding",
            "Bad Name",
            "",
            "Hos\0",
        ];
        for name in names {
            let parsed = HeaderName::from_bytes(name.as_bytes()).ok();
            assert_eq!(field_name(name.as_bytes()), parsed, "{name:?}");
        }
    }

    #[test]
    fn malformed_and_oversized_heads_are_refused() {
        assert_eq!(
            parse_all("GET / HTTP/1.1\r\nBad Name: v\r\n\r\n").err(),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            parse_all("GET / HTTP/2.0\r\n\r\n").err(),
            Some(StatusCode::BAD_REQUEST)
        );
        let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
        let wire = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(
            parse_all(&wire).err(),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        let long = format!("GET / HTTP/1.1\r\nX-Big: {}", "a".repeat(MAX_HEAD));
        assert_eq!(
            parse_all(&long).err(),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
    }
}
