//! A request head off the wire: `httparse` over the connection's read buffer, then an
//! `http::Request` whose target and header values are slices of the head's own bytes (no
//! copy), and the body's framing (RFC 9112 §6.3).
//!
//! What hyper's server or vLLM's (uvicorn with httptools, whose llhttp is stricter) refuses
//! is refused here: a head that does not parse, a line that ends in a bare LF, an invalid
//! target or field, a `Transfer-Encoding` whose last coding is not `chunked` or that names
//! `chunked` twice, and a `Content-Length` that is given twice or is not a plain decimal
//! number get 400; a head over 64 KiB or with more than 100 fields gets 431. A head with
//! both `Content-Length` and `Transfer-Encoding` is passed on marked [`AmbiguousFraming`],
//! for the gateway to refuse and count.
//!
//! The request line is read as vLLM's server (uvicorn with httptools) reads it: several
//! spaces may separate its parts; `HTTP/2.0` and `HTTP/0.9` are read as `HTTP/1.0`, and a
//! chunked body is read on any of them (the connection closed after it); a target it cannot
//! route is refused ([`vllm_refuses_target`]): any byte outside visible ASCII, an absolute
//! form with a bad host or port or without a path, or a target of any other form than
//! `/...`, `*...` and `scheme://...`. A target `http::Uri` cannot hold is percent-encoded
//! (`"<>` and backtick) or, for `*...`, kept as written ([`VerbatimTarget`]).

use bytes::{Bytes, BytesMut};
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
    /// Whether it asked to upgrade: llhttp stops parsing at such a head, and what follows
    /// is no request of its.
    pub(super) upgrade: bool,
    /// Whether llhttp reads what follows it as the next request: it keeps the connection
    /// by its own rule (uvicorn sets `lenient_data_after_close`, so bytes after a closing
    /// request are ignored).
    pub(super) pipelines: bool,
}

/// Where one field's name and value lie in the head.
#[derive(Clone, Copy)]
struct Field {
    name: (usize, usize),
    value: (usize, usize),
}

/// vLLM's server (llhttp) takes `HTTP/2.0` and `HTTP/0.9` on a request line too, and reads
/// such a request as it reads an HTTP/1.0 one (kept alive only when asked): `Some(true)` when
/// the request line ends in one of them, now rewritten in place to `HTTP/1.0`; `Some(false)`
/// while the line is not whole and may still; `None` otherwise.
fn other_version(buf: &mut BytesMut) -> Option<bool> {
    const OTHERS: [&[u8]; 2] = [b" HTTP/2.0\r", b" HTTP/0.9\r"];
    let Some(eol) = memchr::memchr(b'\n', buf) else {
        let tail = &buf[buf.iter().rposition(|&b| b == b' ')?..];
        return OTHERS.iter().any(|v| v.starts_with(tail)).then_some(false);
    };
    let line = &mut buf[..eol];
    if !OTHERS.iter().any(|v| line.ends_with(v)) {
        return None;
    }
    let minor = line.len() - 4;
    line[minor..minor + 3].copy_from_slice(b"1.0");
    Some(true)
}

/// A request target to forward as the client wrote it, one the request's `Uri` cannot hold
/// (an extension of the request).
#[derive(Clone)]
pub(crate) struct VerbatimTarget(pub(crate) Bytes);

/// Room for the field positions of a head, kept by a connection from one head to the next.
#[derive(Default)]
pub(super) struct Fields(Vec<Field>);

/// Takes the request head at the start of `buf` off it: `Ok(None)` while it is incomplete,
/// `Err` with the status that refuses it.
pub(super) fn parse(buf: &mut BytesMut, fields: &mut Fields) -> Result<Option<Head>, StatusCode> {
    // llhttp skips any CR and LF before a request line (httparse only whole line ends).
    let blank = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    bytes::Buf::advance(buf, blank);
    parse_line(buf, fields, false)
}

/// Whether `bytes`, the start of the next request, cannot begin a head llhttp reads: it
/// refuses at the first byte that no method it knows goes on with, or, once a line has
/// ended, whatever [`parse`] refuses. (vLLM's server answers such bytes with its 400 at
/// once, and, when they came with the request before them, instead of that request's
/// answer.)
pub(super) fn doomed(bytes: &[u8]) -> bool {
    if unknown_method(bytes) {
        return true;
    }
    if memchr::memchr(b'\n', bytes).is_none() {
        return false;
    }
    // The next head alone is parsed (from a copy: parsing takes it off its buffer), after
    // the CR and LF that llhttp skips.
    let start = bytes
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let end =
        memchr::memmem::find(&bytes[start..], b"\r\n\r\n").map_or(bytes.len(), |at| start + at + 4);
    let head = &bytes[..end.min(start + MAX_HEAD)];
    parse(&mut BytesMut::from(head), &mut Fields::default())
        .is_err_and(|status| status == StatusCode::BAD_REQUEST)
}

/// Whether `bytes` (after any CR and LF) begin with no method llhttp knows, nor the start
/// of one.
pub(super) fn unknown_method(bytes: &[u8]) -> bool {
    let blank = bytes
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let line = &bytes[blank..];
    let method = line.iter().position(|&b| b == b' ');
    let known = |m: &&str| match method {
        Some(end) => m.as_bytes() == &line[..end],
        None => m.as_bytes().starts_with(line),
    };
    !LLHTTP_METHODS.iter().any(known)
}

/// [`parse`]; `other` when the request line said `HTTP/2.0` or `HTTP/0.9` ([`other_version`]).
fn parse_line(
    buf: &mut BytesMut,
    fields: &mut Fields,
    other: bool,
) -> Result<Option<Head>, StatusCode> {
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let base = buf.as_ptr() as usize;
    let at = |s: &[u8]| (s.as_ptr() as usize - base, s.len());
    let mut parsed = httparse::Request::new(&mut []);
    let mut config = httparse::ParserConfig::default();
    config.allow_multiple_spaces_in_request_line_delimiters(true);
    let len = match config.parse_request_with_uninit_headers(&mut parsed, buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(httparse::Status::Complete(_)) => {
            return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Ok(None),
        Err(httparse::Error::Version) => {
            return match other_version(buf) {
                Some(true) => parse_line(buf, fields, true),
                Some(false) if buf.len() < MAX_HEAD => Ok(None),
                _ => Err(StatusCode::BAD_REQUEST),
            }
        }
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
            return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Err(_) => return Err(StatusCode::BAD_REQUEST),
    };
    let bad = StatusCode::BAD_REQUEST;
    let method =
        Method::from_bytes(parsed.method.unwrap_or_default().as_bytes()).map_err(|_| bad)?;
    if !llhttp_knows(&method) {
        return Err(bad);
    }
    let target = parsed.path.unwrap_or_default().as_bytes();
    if vllm_refuses_target(target) {
        return Err(bad);
    }
    let target = at(target);
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
    // Every line ends in CRLF (a bare LF ends one for some parsers and not for others): the
    // line before each field, and the last line with the empty one after it. (No other LF
    // can be in the head: `httparse` refuses one in a target, a value or a folded line.)
    let crlf_before = |at: usize| at >= 2 && buf[at - 2..at] == *b"\r\n";
    if !buf[..len].ends_with(b"\r\n\r\n") || fields.iter().any(|f| !crlf_before(f.name.0)) {
        return Err(bad);
    }
    let head = buf.split_to(len).freeze();
    let slice = |(start, len): (usize, usize)| head.slice(start..start + len);

    let written = &head[target.0..target.0 + target.1];
    let (uri, verbatim) = if written.len() > 1 && written[0] == b'*' {
        // vLLM's server reads `*...` as a path, which no route has; `http::Uri` has no such
        // form, so the request is handled as `*` and forwarded as written.
        let kept = VerbatimTarget(slice(target));
        (Uri::from_static("*"), Some(kept))
    } else {
        let uri = Uri::from_maybe_shared(slice(target))
            .or_else(|_| Uri::try_from(escape_target(written)))
            .map_err(|_| bad)?;
        (uri, None)
    };
    let mut headers = HeaderMap::with_capacity(fields.len());
    let mut seen = Seen::default();
    for f in fields.iter() {
        let name = field_name(&head[f.name.0..f.name.0 + f.name.1]).ok_or(bad)?;
        let value = HeaderValue::from_maybe_shared(slice(f.value)).map_err(|_| bad)?;
        if name == header::TRANSFER_ENCODING {
            // httparse drops the whitespace after a value, which llhttp reads in codings.
            let end = f.value.0 + f.value.1;
            let ows = head[end..].iter().take_while(|&&b| b == b' ' || b == b'\t');
            seen.note(&name, &head[f.value.0..end + ows.count()])?;
        } else {
            seen.note(&name, value.as_bytes())?;
        }
        headers.append(name, value);
    }
    // Both length fields: llhttp refuses the head before it looks at an upgrade.
    let ambiguous = seen.chunked_last.is_some() && seen.length.is_some();
    // An upgrade (a non-empty `Upgrade` and the `upgrade` token in `Connection`): llhttp
    // stops parsing at the head. One that is no WebSocket handshake by uvicorn's test is
    // served without its body, and nothing after it is answered on the connection. Here
    // too: no body (its framing fields are not read), and the connection closes after the
    // answer. A WebSocket handshake keeps its fields (it is forwarded as it came,
    // [`crate::tunnel`]); what follows its head is the tunnel's, not a body.
    // llhttp takes every CONNECT for an upgrade too: no body is read, and the rest of that
    // read is dropped (vLLM's server then parses the next read as a new request; mmgate,
    // which cannot see read boundaries as it saw them, closes the connection instead).
    let upgrade = seen.upgrade_token && seen.upgrade_field || method == Method::CONNECT;
    let websocket = upgrade && !ambiguous && crate::tunnel::asks_websocket(&headers);
    let (framing, keep_alive) = if upgrade && !ambiguous {
        if !websocket {
            for name in [
                header::CONTENT_LENGTH,
                header::TRANSFER_ENCODING,
                header::UPGRADE,
            ] {
                headers.remove(name);
            }
        }
        (Framing::Empty, false)
    } else {
        let framing = match (seen.chunked_last, seen.length) {
            (Some(false), _) => return Err(bad),
            (Some(true), _) => Framing::Chunked,
            (None, Some(0) | None) => Framing::Empty,
            (None, Some(n)) => Framing::Length(n),
        };
        let keep_alive = match version {
            // uvicorn never keeps an HTTP/1.0 connection (`keep_alive = http_version !=
            // "1.0" and ...`), whatever its `Connection` says; `HTTP/2.0` and `HTTP/0.9`
            // ones when asked. A chunked body is read, as vLLM's server reads it, and the
            // connection closed after the answer (RFC 9112 §6.1).
            Version::HTTP_10 if !other => false,
            Version::HTTP_10 => seen.keep_alive && !seen.close && framing != Framing::Chunked,
            _ => !seen.close,
        };
        (framing, keep_alive)
    };
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    if ambiguous {
        request.extensions_mut().insert(AmbiguousFraming);
    }
    if let Some(verbatim) = verbatim {
        request.extensions_mut().insert(verbatim);
    }
    if websocket {
        request.extensions_mut().insert(crate::tunnel::Handshake);
    }
    Ok(Some(Head {
        request,
        framing,
        keep_alive,
        expect_continue: seen.expect_continue && version == Version::HTTP_11,
        upgrade: upgrade && !ambiguous,
        // llhttp's own rule: on HTTP/1.1 no `close`; on any other version `keep-alive`,
        // whatever else (it looks at `close` only from 1.1 on).
        pipelines: match version {
            Version::HTTP_11 => !seen.close,
            _ => seen.keep_alive,
        },
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
    /// `upgrade` among the `Connection` tokens.
    upgrade_token: bool,
    /// An `Upgrade` field that is not empty.
    upgrade_field: bool,
}

impl Seen {
    fn note(&mut self, name: &HeaderName, value: &[u8]) -> Result<(), StatusCode> {
        let bad = StatusCode::BAD_REQUEST;
        if *name == header::CONTENT_LENGTH {
            // One plain number, given once: llhttp refuses a repeated length, even an equal one.
            if self.length.is_some() {
                return Err(bad);
            }
            self.length = Some(length(value.trim_ascii()).ok_or(bad)?);
        } else if *name == header::TRANSFER_ENCODING {
            // llhttp refuses a field with no coding at all (seen on vLLM's server).
            if value.trim_ascii().is_empty() {
                return Err(bad);
            }
            // Spaces and tabs before a coding are skipped, only spaces after it: `chunked`
            // followed by a tab is another coding.
            for coding in value.split(|&b| b == b',').map(trim_coding) {
                // Nothing may follow `chunked`, not even a second `chunked`.
                if self.chunked_last == Some(true) {
                    return Err(bad);
                }
                self.chunked_last = Some(coding.eq_ignore_ascii_case(b"chunked"));
            }
        } else if *name == header::CONNECTION {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                self.upgrade_token |= token.eq_ignore_ascii_case(b"upgrade");
            }
        } else if *name == header::UPGRADE {
            self.upgrade_field |= !value.trim_ascii().is_empty();
        } else if *name == header::EXPECT {
            // Any field asks (uvicorn sets its flag for each, and never clears it).
            self.expect_continue |= asks_continue(value);
        }
        Ok(())
    }
}

/// Whether llhttp knows `method` (the common ones first, without a string comparison).
fn llhttp_knows(method: &Method) -> bool {
    [
        Method::POST,
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::PUT,
    ]
    .iter()
    .any(|m| m == method)
        || LLHTTP_METHODS.contains(&method.as_str())
}

/// A coding of a `Transfer-Encoding` list as llhttp reads it: the spaces and tabs before it
/// skipped, only the spaces after it.
fn trim_coding(coding: &[u8]) -> &[u8] {
    let coding = coding.trim_ascii_start();
    let spaces = coding.iter().rev().take_while(|&&b| b == b' ').count();
    &coding[..coding.len() - spaces]
}

/// The methods llhttp (vLLM's server's parser) knows, as written (case matters): any
/// other is refused with its 400 (checked on the real server).
const LLHTTP_METHODS: [&str; 35] = [
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "CONNECT",
    "OPTIONS",
    "TRACE",
    "PATCH",
    "COPY",
    "LOCK",
    "MKCOL",
    "MOVE",
    "PROPFIND",
    "PROPPATCH",
    "SEARCH",
    "UNLOCK",
    "BIND",
    "REBIND",
    "UNBIND",
    "ACL",
    "REPORT",
    "MKACTIVITY",
    "CHECKOUT",
    "MERGE",
    "M-SEARCH",
    "NOTIFY",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "PURGE",
    "MKCALENDAR",
    "LINK",
    "UNLINK",
    "SOURCE",
    "QUERY",
];

/// Whether an `Expect` field's value asks for `100 Continue`.
pub(crate) fn asks_continue(value: &[u8]) -> bool {
    value.trim_ascii().eq_ignore_ascii_case(b"100-continue")
}

/// Whether vLLM's server refuses a request target that `httparse` took: llhttp refuses
/// bytes outside visible ASCII, http-parser's URL parser a target that is not `/...`, `*...`
/// or `scheme://[userinfo@]host[:port]...` with a host of letters, digits, `.` and `-` (or
/// a bracketed IPv6 address) and a port up to 65535, and uvicorn one with no path.
fn vllm_refuses_target(target: &[u8]) -> bool {
    // `httparse` takes no control character or space in a target, but takes bytes over 0x7F.
    if !target.is_ascii() {
        return true;
    }
    match target.first() {
        Some(b'/' | b'*') => false,
        _ => !absolute_form_has_path(target),
    }
}

/// `target` with the bytes vLLM's server takes in a path or a query and `http::Uri` does not
/// (`"`, `<`, `>`, `` ` ``) percent-encoded: vLLM decodes both spellings to the same path and
/// query, so the request is routed, gated and answered as it would be unchanged.
fn escape_target(target: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(target.len() + 8);
    for &b in target {
        match b {
            b'"' | b'<' | b'>' | b'`' => {
                out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]])
            }
            _ => out.push(b),
        }
    }
    out
}

/// Whether `target` is `scheme://authority/...` with an authority vLLM's server accepts.
fn absolute_form_has_path(target: &[u8]) -> bool {
    let scheme = target
        .iter()
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let Some(rest) = target[scheme..].strip_prefix(b"://") else {
        return false;
    };
    if scheme == 0 {
        return false;
    }
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    if rest.get(end) != Some(&b'/') {
        return false; // no path
    }
    let authority = &rest[..end];
    let host_port = match authority.iter().position(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    // A name of letters, digits, `.` and `-`, or a bracketed IPv6 address; then the port.
    let (host_ok, port) = match host_port.strip_prefix(b"[") {
        Some(v6) => {
            let Some(close) = v6.iter().position(|&b| b == b']') else {
                return false;
            };
            let ip = &v6[..close];
            let ip_ok = ip
                .iter()
                .all(|b| b.is_ascii_hexdigit() || b".:".contains(b));
            (!ip.is_empty() && ip_ok, &v6[close + 1..])
        }
        None => {
            let colon = host_port.iter().position(|&b| b == b':');
            let (name, port) = host_port.split_at(colon.unwrap_or(host_port.len()));
            let name_ok = name
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b".-".contains(b));
            (!name.is_empty() && name_ok, port)
        }
    };
    let port_ok = match port.strip_prefix(b":") {
        None => port.is_empty(),
        Some(digits) => decimal(digits).is_some_and(|n| n <= 0xffff),
    };
    host_ok && port_ok
}

/// A `Content-Length` value: a plain decimal number with any number of leading zeros
/// (llhttp bounds the value, not the digits: vLLM's server takes thousands of them).
fn length(digits: &[u8]) -> Option<u64> {
    let significant = digits.iter().position(|&d| d != b'0');
    decimal(&digits[significant.unwrap_or(digits.len().saturating_sub(1))..])
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
        // Leading zeros, as many as a client writes.
        let zeros = "0".repeat(5000);
        assert_eq!(
            framing(&format!("Content-Length: {zeros}\r\n")),
            Ok(Framing::Empty)
        );
        assert_eq!(
            framing(&format!("Content-Length: {zeros}12\r\n")),
            Ok(Framing::Length(12))
        );

        assert_eq!(
            framing("Transfer-Encoding: gzip, Chunked\r\n"),
            Ok(Framing::Chunked)
        );
        for refused in [
            "Content-Length: 4\r\nContent-Length: 5\r\n",
            "Content-Length: 4\r\nContent-Length: 4\r\n",
            "Content-Length: 4, 4\r\n",
            "Content-Length: 4, 5\r\n",
            "Transfer-Encoding: chunked, chunked\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length: +4\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: \r\n",
            "Content-Length: 99999999999999999999\r\n",
            "Content-Length: 00099999999999999999999\r\n",
            "Content-Length: 00x\r\n",
            "Transfer-Encoding: gzip\r\n",
            "Transfer-Encoding: chunked, gzip\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
        ] {
            assert_eq!(framing(refused), bad, "{refused:?}");
        }
        // On HTTP/1.0 too, as vLLM's server reads it; the connection closes after it.
        let http10 =
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";
        let head = parse_all(http10).unwrap().unwrap();
        assert_eq!((head.framing, head.keep_alive), (Framing::Chunked, false));
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
        // uvicorn keeps no HTTP/1.0 connection, asked or not (seen on vLLM's server).
        assert!(!alive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    }

    #[test]
    fn http_2_0_and_0_9_request_lines_are_read_as_http_1_0() {
        for version in ["2.0", "0.9"] {
            let wire = format!("GET /x  HTTP/{version}\r\nConnection: keep-alive\r\n\r\n");
            let head = parse_all(&wire).unwrap().expect("whole");
            assert_eq!(head.request.version(), Version::HTTP_10, "{version}");
            assert!(head.keep_alive);
            assert!(
                !parse_all(&wire.replace("keep-alive", "x"))
                    .unwrap()
                    .unwrap()
                    .keep_alive
            );
            // Cut anywhere in the request line, it waits for the rest.
            for cut in 1..wire.find('\n').unwrap() {
                assert!(
                    parse_all(&wire[..cut]).unwrap().is_none(),
                    "{:?}",
                    &wire[..cut]
                );
            }
        }
        for refused in ["1.2", "2.1", "3.0", "0.8", "2.0 "] {
            let wire = format!("GET /x HTTP/{refused}\r\n\r\n");
            assert_eq!(
                parse_all(&wire).err(),
                Some(StatusCode::BAD_REQUEST),
                "{refused}"
            );
        }
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
    fn the_request_line_is_read_as_vllms_server_reads_it() {
        let target = |line: &str| {
            let wire = format!("{line}\r\nHost: a\r\n\r\n");
            parse_all(&wire).map(|h| h.expect("whole").request.uri().to_string())
        };
        assert_eq!(
            target("POST  /tokenize   HTTP/1.1").as_deref(),
            Ok("/tokenize")
        );
        for accepted in [
            "/v1/chat/completions?a=1#f",
            "/v1/x?{}",
            "*",
            "**",
            "http://h/tokenize",
            "HTTPS://u:p@a.b-c:65535/tokenize",
            "ftp://[::1]:80/x",
        ] {
            assert!(
                target(&format!("POST {accepted} HTTP/1.1")).is_ok(),
                "{accepted}"
            );
        }
        // `*` and more: a path to vLLM's server, handled as `*` and forwarded as written.
        for (written, verbatim) in [("*", None), ("*?a", Some("*?a")), ("*/x#f", Some("*/x#f"))] {
            let wire = format!("POST {written} HTTP/1.1\r\nHost: a\r\n\r\n");
            let head = parse_all(&wire).unwrap().expect("whole");
            assert_eq!(head.request.uri(), "*");
            let kept = head.request.extensions().get::<VerbatimTarget>();
            assert_eq!(
                kept.map(|t| &t.0[..]),
                verbatim.map(str::as_bytes),
                "{written}"
            );
        }
        // Bytes `http::Uri` refuses and vLLM's server takes: forwarded percent-encoded.
        for (written, forwarded) in [
            (
                r#"/tokenize?q={"a":"<b>"}"#,
                "/tokenize?q={%22a%22:%22%3Cb%3E%22}",
            ),
            ("/tok`<>enize?`", "/tok%60%3C%3Eenize?%60"),
            ("http://h/a<?b>#c\"", "http://h/a%3C?b%3E"),
        ] {
            let line = format!("POST {written} HTTP/1.1");
            assert_eq!(target(&line).as_deref(), Ok(forwarded), "{written}");
        }
        let refused = [
            "POST /tokenize HTTP/1.1 ",
            "POST\t/tokenize HTTP/1.1",
            "POST /tokenize\u{e9} HTTP/1.1",
            "POST /tokenize?\u{e9} HTTP/1.1",
            "POST /tok\u{7f}enize HTTP/1.1",
            "POST ?a HTTP/1.1",
            "POST h:80 HTTP/1.1",
            "POST h/tokenize HTTP/1.1",
            "POST http:/tokenize HTTP/1.1",
            "POST http:///tokenize HTTP/1.1",
            "POST http://h HTTP/1.1",
            "POST http://h?x HTTP/1.1",
            "POST http://h#f HTTP/1.1",
            "POST http://h:/tokenize HTTP/1.1",
            "POST http://h:abc/tokenize HTTP/1.1",
            "POST http://h:65536/tokenize HTTP/1.1",
            "POST http://:80/tokenize HTTP/1.1",
            "POST http://h_h/tokenize HTTP/1.1",
            "POST http://[::1/tokenize HTTP/1.1",
            "POST 1http://h/tokenize HTTP/1.1",
        ];
        for line in refused {
            assert_eq!(target(line), Err(StatusCode::BAD_REQUEST), "{line:?}");
        }
    }

    #[test]
    fn every_line_of_the_head_ends_in_crlf() {
        let bad = Some(StatusCode::BAD_REQUEST);
        for wire in [
            "POST / HTTP/1.1\nHost: a\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\n\n",
            "POST / HTTP/1.1\nHost: a\n\n",
        ] {
            assert_eq!(parse_all(wire).err(), bad, "{wire:?}");
        }
        // Empty lines before the request line are skipped, as vLLM's server skips them.
        for wire in [
            "\nPOST / HTTP/1.1\r\nHost: a\r\n\r\n",
            "\r\nPOST / HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse_all(wire).is_ok_and(|h| h.is_some()), "{wire:?}");
        }
    }

    #[test]
    fn malformed_and_oversized_heads_are_refused() {
        assert_eq!(
            parse_all("GET / HTTP/1.1\r\nBad Name: v\r\n\r\n").err(),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            parse_all("GET / HTTP/2.2\r\n\r\n").err(),
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
