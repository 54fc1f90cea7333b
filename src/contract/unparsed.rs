//! vLLM's own answer to a body it cannot take as a request at all: one its JSON parser
//! refuses, an empty one, or one whose top-level value is no object. mmgate answers with
//! these very bytes where it refuses such a body at the edge (`strip`, `reject`).
//!
//! FastAPI parses the body (`json.loads`) before anything of vLLM runs:
//! - a `JSONDecodeError` becomes a `json_invalid` validation error at `body.<pos>`;
//! - any other exception while parsing (undecodable text, nesting past Python's recursion
//!   limit, an integer of more than 4300 digits) becomes FastAPI's plain
//!   `{"detail":"There was an error parsing the body"}`;
//! - an empty body (or `null`) is a missing body, and any other non-object value fails each
//!   model of the route's union with `model_attributes_type`.
//!
//! `/invocations` reads the body itself, through SageMaker's session layer and adapter
//! injection: a `JSONDecodeError` is worded as Python prints it, and so are the other
//! exceptions those layers raise on a body that is no object or no text.
//! The messages are those of the Python 3.11 `json` module the recorded server runs
//! (3.13 words a trailing comma differently).

use bytes::Bytes;
use http::StatusCode;

use crate::classify::RouteKind;
use crate::error::envelope;
use crate::inspect::python::{repr, word};
use crate::inspect::scan::SyntaxError;
use crate::inspect::scan::MAX_INT_DIGITS;
use crate::inspect::{InspectError, INVOCATIONS_MAX_DEPTH, RENDER_MAX_DEPTH, SERVE_MAX_DEPTH};

/// FastAPI's answer to a body whose parsing raised anything but a `JSONDecodeError`.
pub const PARSE_ERROR_BODY: &str = r#"{"detail":"There was an error parsing the body"}"#;

/// What SageMaker's session layer makes of an `/invocations` request's session header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Session {
    /// None, or an empty one.
    Absent,
    /// One, while the server keeps no sessions: refused.
    Refused,
    /// One, on a server with sessions: it may name a live one.
    Unknown,
}

impl Session {
    /// The session header's first value, on a server with stateful sessions or not.
    pub(super) fn of(header: Option<&[u8]>, sessions: bool) -> Session {
        match header {
            Some(v) if !v.is_empty() && sessions => Session::Unknown,
            Some(v) if !v.is_empty() => Session::Refused,
            _ => Session::Absent,
        }
    }
}

/// vLLM's answer to `body`, which `inspect` refused with `error`, on `route` (its status
/// and body), or `None` where mmgate cannot know its words.
pub(super) fn answer(
    route: RouteKind,
    error: &InspectError,
    body: &[u8],
    session: Session,
) -> Option<(StatusCode, Bytes)> {
    match (route, error) {
        (
            RouteKind::Invocations,
            &InspectError::Syntax(SyntaxError::TooDeep {
                limit: INVOCATIONS_MAX_DEPTH,
                opens,
                ..
            }),
        ) => Some(too_deep(opens)),
        (RouteKind::Invocations, _) => invocations(error, body, session).map(bad_request),
        _ => fastapi(route, error).map(bad_request),
    }
}

fn bad_request(body: Bytes) -> (StatusCode, Bytes) {
    (StatusCode::BAD_REQUEST, body)
}

/// FastAPI's answer on every route but `/invocations`.
fn fastapi(route: RouteKind, error: &InspectError) -> Option<Bytes> {
    let parse_error = || Some(Bytes::from_static(PARSE_ERROR_BODY.as_bytes()));
    match error {
        InspectError::Empty
        | InspectError::NotObject {
            type_name: "null", ..
        } => validation(1, &missing(), "body"),
        InspectError::NotObject { input, .. } => {
            let error = model_attributes(input);
            validation(super::route_models(route), &error, "body")
        }
        InspectError::Json { what, pos, .. } => {
            let error = format!(
                "{{'type': 'json_invalid', 'loc': 'body.{pos}', 'msg': 'JSON decode error', 'input': '<dict of 0 items>', 'ctx': {{'error': {}}}}}",
                repr(what)
            );
            validation(1, &error, &format!("body.{pos}"))
        }
        InspectError::Decode(_) | InspectError::Syntax(SyntaxError::IntTooLong { .. }) => {
            parse_error()
        }
        // Only at one of vLLM's own limits is "too deep" its RecursionError.
        InspectError::Syntax(SyntaxError::TooDeep { limit, .. })
            if [RENDER_MAX_DEPTH, SERVE_MAX_DEPTH].contains(limit) =>
        {
            parse_error()
        }
        InspectError::Syntax(_) => None,
    }
}

/// `/invocations`: `JSON decode error: <Python's str() of the JSONDecodeError>`; for a body
/// that is no object, the exception SageMaker's layers raise on it (the session layer's
/// `"requestType" in body`, then its session header check, then the adapter injection's
/// `body["model"] = ...`); for undecodable UTF-8, Python's `UnicodeDecodeError`.
fn invocations(error: &InspectError, body: &[u8], session: Session) -> Option<Bytes> {
    let (what, pos, line, column) = match *error {
        InspectError::Empty => ("Expecting value", 0, 1, 1),
        InspectError::Json {
            what,
            pos,
            line,
            column,
        } => (what, pos, line, column),
        InspectError::NotObject {
            python_type,
            may_hold_request_type,
            ..
        } => return not_an_object(python_type, may_hold_request_type, body, session),
        InspectError::Syntax(SyntaxError::IntTooLong { digits, .. }) => {
            return Some(raised(&format!(
                "Exceeds the limit ({MAX_INT_DIGITS} digits) for integer string conversion: \
                 value has {digits} digits; use sys.set_int_max_str_digits() to increase the \
                 limit"
            )));
        }
        InspectError::Decode(ref e) => {
            let message = match e.encoding {
                "utf-8" => utf8_error(body, e.offset)?,
                // Positions count from after the BOM, which `utf-8-sig` strips first.
                "utf-8-sig" => utf8_error(body.get(3..)?, e.offset.checked_sub(3)?)?,
                wide => wide_error(wide, body, e.offset)?,
            };
            return Some(raised(&message));
        }
        _ => return None,
    };
    let message = format!("JSON decode error: {what}: line {line} column {column} (char {pos})");
    Some(detail(&message))
}

/// `/invocations`' answer to a body nested past [`INVOCATIONS_MAX_DEPTH`]: the parser's
/// `RecursionError`, naming the container it was entering (or the call to `parse_constant`
/// for `NaN` and the infinities).
fn too_deep(opens: u8) -> (StatusCode, Bytes) {
    internal_error(match opens {
        b'{' => {
            "maximum recursion depth exceeded while decoding a JSON object from a unicode string"
        }
        b'[' => {
            "maximum recursion depth exceeded while decoding a JSON array from a unicode string"
        }
        _ => "maximum recursion depth exceeded while calling a Python object",
    })
}

/// `/invocations`' answer to a body that parses but nests a container past what vLLM's
/// encoding of it again takes ([`INVOCATIONS_MAX_DEPTH`] less one).
pub(super) fn reencoding_too_deep() -> (StatusCode, Bytes) {
    internal_error("maximum recursion depth exceeded while encoding a JSON object")
}

/// vLLM's 500 for an exception of its own.
fn internal_error(message: &str) -> (StatusCode, Bytes) {
    let status = StatusCode::INTERNAL_SERVER_ERROR;
    (
        status,
        envelope(status, "InternalServerError", None, message),
    )
}

/// The answer to an `HTTPException` with this 400 `detail` (FastAPI's "Bad Request").
fn detail(message: &str) -> Bytes {
    envelope(StatusCode::BAD_REQUEST, "Bad Request", None, message)
}

/// The answer to an exception vLLM's handler turns into a 400 (`BadRequestError`).
fn raised(message: &str) -> Bytes {
    envelope(StatusCode::BAD_REQUEST, "BadRequestError", None, message)
}

/// SageMaker's layers on an `/invocations` body that parsed to no object, of Python type
/// `python_type`.
fn not_an_object(
    python_type: &str,
    may_hold_request_type: bool,
    body: &[u8],
    session: Session,
) -> Option<Bytes> {
    let message = match python_type {
        // `"requestType" in body`: a str that holds it is a malformed session request.
        "str" if may_hold_request_type => return session_request_str(body),
        "list" if may_hold_request_type => return None,
        "str" | "list" => match session {
            Session::Refused => return Some(detail(SESSIONS_OFF)),
            Session::Unknown => return None,
            Session::Absent if python_type == "str" => {
                "'str' object does not support item assignment".to_owned()
            }
            Session::Absent => "list indices must be integers or slices, not str".to_owned(),
        },
        other => format!("argument of type '{other}' is not iterable"),
    };
    Some(raised(&message))
}

/// SageMaker's answer to a top-level string that holds `requestType`: pydantic's
/// `ValidationError.json()` of `SessionRequest` refusing it (the whole string as JSON), as
/// the `HTTPException` detail; `None` for a string with a lone surrogate (its JSON fails),
/// and for a body over 64 KiB.
fn session_request_str(body: &[u8]) -> Option<Bytes> {
    // Past this, mmgate does not copy the string into an answer (vLLM would, whole).
    const LONGEST: usize = 64 << 10;
    if body.len() > LONGEST {
        return None;
    }
    let decoded = crate::inspect::decode::decode(body).ok()?;
    let literal = decoded.text.trim_ascii();
    let inner = literal.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let text = String::from_utf8(crate::inspect::scan::decoded(inner).into_owned()).ok()?;
    let input = serde_json::to_string(&text).ok()?;
    let detail = format!(
        r#"[{{"type":"model_type","loc":[],"msg":"Input should be a valid dictionary or instance of SessionRequest","input":{input},"ctx":{{"class_name":"SessionRequest"}}}}]"#
    );
    Some(self::detail(&sanitized(&detail)?))
}

/// SageMaker's answer to a session header on a server without stateful sessions.
const SESSIONS_OFF: &str = "Invalid payload. stateful sessions not enabled, X-Amzn-SageMaker-Session-Id header not supported";

/// Python's `str()` of the `UnicodeDecodeError` that decoding `text` as UTF-8 (with
/// `surrogatepass`, as `json.loads` decodes bytes) raises at `at`, its first undecodable
/// byte: the byte or bytes CPython's decoder names, and why.
fn utf8_error(text: &[u8], at: usize) -> Option<String> {
    let lead = *text.get(at)?;
    let rest = &text[at + 1..];
    let continuation = |i: usize| rest.get(i).is_some_and(|b| b & 0xc0 == 0x80);
    // The valid range of the second byte, and how many continuation bytes the lead needs.
    let (second, needs) = match lead {
        0xc2..=0xdf => (0x80..=0xbf, 1),
        0xe0 => (0xa0..=0xbf, 2),
        0xed => (0x80..=0x9f, 2),
        0xe1..=0xef => (0x80..=0xbf, 2),
        0xf0 => (0x90..=0xbf, 3),
        0xf4 => (0x80..=0x8f, 3),
        0xf1..=0xf3 => (0x80..=0xbf, 3),
        _ => return Some(decode_message(lead, at, 1, "invalid start byte")),
    };
    // How many bytes after the lead are right (the second must be in its range).
    let good = (0..needs)
        .take_while(|&i| {
            continuation(i) && (i > 0 || rest.first().is_some_and(|b| second.contains(b)))
        })
        .count();
    let surrogate =
        lead == 0xed && rest.first().is_some_and(|b| (0xa0..=0xbf).contains(b)) && continuation(1);
    if good == needs || surrogate {
        // A complete sequence is no error, nor an encoded surrogate (`surrogatepass`).
        return None;
    }
    if at + 1 + good == text.len() {
        let whole = text.len() - at;
        return Some(decode_message(lead, at, whole, "unexpected end of data"));
    }
    Some(decode_message(
        lead,
        at,
        good + 1,
        "invalid continuation byte",
    ))
}

/// Python's `str()` of the `UnicodeDecodeError` that decoding `body` (BOM included: the
/// codecs count it) as UTF-16 or UTF-32 raises at `at`: a trailing part of a code unit
/// (`truncated data`), or a UTF-32 unit past U+10FFFF. (Lone surrogates pass
/// `surrogatepass`.)
fn wide_error(codec: &str, body: &[u8], at: usize) -> Option<String> {
    let unit = if codec.starts_with("utf-16") { 2 } else { 4 };
    let left = body.len().checked_sub(at)?;
    let first = *body.get(at)?;
    let (len, why) = if left < unit {
        (left, "truncated data")
    } else if unit == 4 {
        (4, "code point not in range(0x110000)")
    } else {
        return None;
    };
    Some(codec_message(codec, first, at, len, why))
}

/// `'utf-8' codec can't decode byte 0x.. in position N: why`, or `bytes in position N-M`.
fn decode_message(lead: u8, at: usize, len: usize, why: &str) -> String {
    codec_message("utf-8", lead, at, len, why)
}

/// Python's `UnicodeDecodeError` text for `len` bytes from `at`, the first being `first`.
fn codec_message(codec: &str, first: u8, at: usize, len: usize, why: &str) -> String {
    if len == 1 {
        format!("'{codec}' codec can't decode byte 0x{first:02x} in position {at}: {why}")
    } else {
        let last = at + len - 1;
        format!("'{codec}' codec can't decode bytes in position {at}-{last}: {why}")
    }
}

fn missing() -> String {
    "{'type': 'missing', 'loc': 'body', 'msg': 'Field required', 'input': 'None'}".to_owned()
}

/// The error pydantic gives each model for a body that is no object.
/// `input`: the value as Python's `repr()` writes its text ([`InspectError::NotObject`]).
fn model_attributes(input: &str) -> String {
    format!(
        "{{'type': 'model_attributes_type', 'loc': 'body', 'msg': 'Input should be a valid dictionary or object to extract fields from', 'input': {input}}}"
    )
}

/// The most characters of one error's text vLLM's validation handler writes.
const MAX_ERROR_CHARS: usize = 1000;

/// vLLM's `validation_exception_handler` body for `count` copies of `error`, or `None`
/// where mmgate does not know what its `sanitize_message` makes of the text.
fn validation(count: usize, error: &str, param: &str) -> Option<Bytes> {
    let label = if count == 1 { "error" } else { "errors" };
    let mut message = format!("{count} validation {label}:");
    // `_format_error`: an error's text is cut to 1000 characters.
    let error = match error.char_indices().nth(MAX_ERROR_CHARS) {
        Some((at, _)) => format!("{}...[truncated]", &error[..at]),
        None => error.to_owned(),
    };
    for _ in 0..count {
        message.push_str("\n  ");
        message.push_str(&error);
    }
    Some(envelope(
        StatusCode::BAD_REQUEST,
        "Bad Request",
        Some(param),
        &sanitized(&message)?,
    ))
}

/// vLLM's `sanitize_message` (every error message it sends passes through it): `" at
/// 0x<hex>>"` becomes `">"`, and file paths become `<path>`; `None` for a traceback's
/// `File "..."` text, which mmgate does not rewrite.
fn sanitized(message: &str) -> Option<String> {
    if message.contains("File \"") {
        return None;
    }
    let mut text = addresses(message);
    if text.contains('/') {
        text = system_paths(&text);
        text = file_paths(&text);
    }
    Some(text)
}

/// `re.sub(r" at 0x[0-9a-fA-F]+>", ">", text)`.
fn addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" at 0x") {
        let hex = rest[at + 6..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        let end = at + 6 + hex;
        if hex > 0 && rest[end..].starts_with('>') {
            out.push_str(&rest[..at]);
            rest = &rest[end..];
        } else {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Replaces each leftmost match of `matches` with `<path>`. Given the text from a `/`,
/// `matches` says the length of the match starting there, or how many characters no match
/// can start among (at least the `/` itself), so that each character is looked at a bounded
/// number of times.
fn replace_paths(text: &str, matches: impl Fn(&[char]) -> Result<usize, usize>) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '/' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        match matches(&chars[i..]) {
            Ok(len) => {
                out.push_str("<path>");
                i += len;
            }
            Err(none) => {
                let end = (i + none.max(1)).min(chars.len());
                out.extend(&chars[i..end]);
                i = end;
            }
        }
    }
    out
}

/// The length of the run of `/`-led segments of `segment` characters at the start of
/// `text`, and how many segments it holds.
fn segments(text: &[char], segment: impl Fn(char) -> bool) -> (usize, usize) {
    let (mut len, mut count) = (0, 0);
    while text.get(len) == Some(&'/') {
        let run = text[len + 1..].iter().take_while(|&&c| segment(c)).count();
        if run == 0 {
            break;
        }
        len += 1 + run;
        count += 1;
    }
    (len, count)
}

/// `re.sub(r"/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\w.\-]+)+", "<path>", text)`.
fn system_paths(text: &str) -> String {
    const ROOTS: [&str; 9] = [
        "home", "usr", "opt", "var", "tmp", "root", "lib", "mnt", "srv",
    ];
    replace_paths(text, |at| {
        let root = ROOTS
            .iter()
            .find(|r| {
                r.chars().eq(at[1..].iter().take(r.len()).copied())
                    && at.get(1 + r.len()) == Some(&'/')
            })
            .ok_or(1_usize)?;
        let (len, count) = segments(&at[1 + root.len()..], |c| word(c) || c == '.' || c == '-');
        if count > 0 {
            Ok(1 + root.len() + len)
        } else {
            Err(1)
        }
    })
}

/// `re.sub(r"(?:/[\w\-]+)+/[\w\-]+\.\w+", "<path>", text)`: two segments or more, the
/// last followed by a dot and a word. A later start in the same run ends the same way with
/// fewer segments, so where a run does not match, no start inside it does.
fn file_paths(text: &str) -> String {
    replace_paths(text, |at| {
        let (len, count) = segments(at, |c| word(c) || c == '-');
        let extension = at[len..]
            .get(1..)
            .map_or(0, |rest| rest.iter().take_while(|&&c| word(c)).count());
        if count >= 2 && at.get(len) == Some(&'.') && extension > 0 {
            Ok(len + 1 + extension)
        } else {
            Err(len)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_sanitized_as_vllm_sanitizes_them() {
        // Each pair from Python 3.11's `re` running vLLM's `sanitize_message`.
        for (message, want) in [
            ("/usr/x", "<path>"),
            ("/a/b.c", "<path>"),
            ("/a/b/c.d/e", "<path>/e"),
            ("/library/x", "/library/x"),
            ("x/usr/a.b/c", "x<path>"),
            ("/a/b.", "/a/b."),
            ("/a/b.é", "<path>"),
            ("/a/b-c.d_e/f", "<path>/f"),
            ("/usr/", "/usr/"),
            ("/usrx/a/b.c", "<path>"),
            ("<x at 0x1F>", "<x>"),
            ("a at 0x> at 0xz> at 0xab>", "a at 0x> at 0xz>>"),
            ("//a/b.c", "/<path>"),
            ("/a//b.c", "/a//b.c"),
            ("/lib/é", "<path>"),
            ("/a/b.c/d/e.f", "<path><path>"),
            ("/tmp", "/tmp"),
            ("/home/a/b /var/x", "<path> <path>"),
            ("/a/b._", "<path>"),
            ("/usr/lib/€", "<path>/€"),
            ("/a/b.c €", "<path> €"),
            ("/日本/語.テキスト", "<path>"),
            ("/a/€/b.c", "/a/€/b.c"),
            ("/usr/ß/Ω.σ", "<path>"),
            ("/x/١٢/y.٣", "<path>"),
        ] {
            assert_eq!(sanitized(message).as_deref(), Some(want), "{message}");
        }
        assert_eq!(sanitized("€ x").as_deref(), Some("€ x"));
        // A long run of segments with no extension is passed over once, not from each `/`.
        let run = "/a".repeat(200_000);
        assert_eq!(sanitized(&run).as_deref(), Some(run.as_str()));
        assert_eq!(sanitized("File \"x\", line 1, in f"), None);
    }

    fn text(route: RouteKind, e: &InspectError) -> Option<String> {
        answer(route, e, b"", Session::Absent).map(|(_, b)| String::from_utf8(b.to_vec()).unwrap())
    }

    /// `/invocations`' answers to bodies that are no object or no UTF-8 text, each checked
    /// against the render server and Python 3.11.
    #[test]
    fn invocations_answers_are_sagemakers_words() {
        let judged = |body: &[u8], session: Session| {
            let e = crate::inspect::inspect(body, RENDER_MAX_DEPTH).unwrap_err();
            answer(RouteKind::Invocations, &e, body, session)
                .map(|(_, b)| String::from_utf8(b.to_vec()).unwrap())
        };
        let raised = |m: &str| {
            format!(
                r#"{{"error":{{"message":"{m}","type":"BadRequestError","param":null,"code":400}}}}"#
            )
        };
        for (body, message) in [
            (&b"null"[..], "argument of type 'NoneType' is not iterable"),
            (b"true", "argument of type 'bool' is not iterable"),
            (b"-12", "argument of type 'int' is not iterable"),
            (b"1e3", "argument of type 'float' is not iterable"),
            (b"-Infinity", "argument of type 'float' is not iterable"),
            (br#""x""#, "'str' object does not support item assignment"),
            (b"[1]", "list indices must be integers or slices, not str"),
            (
                b"{\"a\":\"\xc3x\"}",
                "'utf-8' codec can't decode byte 0xc3 in position 6: invalid continuation byte",
            ),
            (
                b"\xef\xbb\xbf{\"a\":\"\xe2\x82x\"}",
                "'utf-8' codec can't decode bytes in position 6-7: invalid continuation byte",
            ),
            (
                b"{\"a\":\"\xed\xa0\"}",
                "'utf-8' codec can't decode byte 0xed in position 6: invalid continuation byte",
            ),
            (
                b"{\"a\":\"\xf0\x9f\x98",
                "'utf-8' codec can't decode bytes in position 6-8: unexpected end of data",
            ),
            (
                b"{\"a\":\"\xf0\x8f\x98\x80\"}",
                "'utf-8' codec can't decode byte 0xf0 in position 6: invalid continuation byte",
            ),
            (
                b"{\"a\":\"\xff\"}",
                "'utf-8' codec can't decode byte 0xff in position 6: invalid start byte",
            ),
        ] {
            assert_eq!(
                judged(body, Session::Absent),
                Some(raised(message)),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // UTF-16 and UTF-32 (positions count the BOM; the codec names its byte order).
        let json = |enc: &str| -> Vec<u8> {
            let units: Vec<u16> = r#"{"a":1}"#.encode_utf16().collect();
            match enc {
                "16le" => units.iter().flat_map(|u| u.to_le_bytes()).collect(),
                "16be" => units.iter().flat_map(|u| u.to_be_bytes()).collect(),
                _ => units
                    .iter()
                    .flat_map(|&u| u32::from(u).to_le_bytes())
                    .collect(),
            }
        };
        let mut odd = json("16le");
        odd.push(0);
        let mut bom_odd = b"\xff\xfe".to_vec();
        bom_odd.extend(json("16le"));
        bom_odd.push(0);
        let mut be_odd = json("16be");
        be_odd.push(0x7b);
        let mut wide_tail = json("32le");
        wide_tail.extend([0, 0, 0]);
        let mut too_big = json("32le");
        too_big.splice(24..24, [0, 0, 0x11, 0]);
        for (body, message) in [
            (odd, "'utf-16-le' codec can't decode byte 0x00 in position 14: truncated data"),
            (bom_odd, "'utf-16-le' codec can't decode byte 0x00 in position 16: truncated data"),
            (be_odd, "'utf-16-be' codec can't decode byte 0x7b in position 14: truncated data"),
            (
                wide_tail,
                "'utf-32-le' codec can't decode bytes in position 28-30: truncated data",
            ),
            (
                too_big,
                "'utf-32-le' codec can't decode bytes in position 24-27: code point not in range(0x110000)",
            ),
        ] {
            assert_eq!(judged(&body, Session::Absent), Some(raised(message)), "{message}");
        }
        // A str that holds "requestType" is a malformed session request (the session
        // header comes after); a list that may hold it is not worded here.
        let detail = r#"[{\"type\":\"model_type\",\"loc\":[],\"msg\":\"Input should be a valid dictionary or instance of SessionRequest\",\"input\":\"a requestType\\n <path>\",\"ctx\":{\"class_name\":\"SessionRequest\"}}]"#;
        assert_eq!(
            judged(br#" "a requestType\n /usr/x" "#, Session::Refused),
            Some(format!(
                r#"{{"error":{{"message":"{detail}","type":"Bad Request","param":null,"code":400}}}}"#
            ))
        );
        assert_eq!(judged(br#""requestType \ud800""#, Session::Absent), None);
        assert_eq!(judged(br#"[1,"requestType"]"#, Session::Absent), None);
        // The session header is checked after `in`, before the adapter injection.
        let off = judged(br#""x""#, Session::Refused).unwrap();
        assert!(off.contains("stateful sessions not enabled"), "{off}");
        assert_eq!(judged(br#""x""#, Session::Unknown), None);
        assert_eq!(
            judged(b"null", Session::Refused),
            Some(raised("argument of type 'NoneType' is not iterable"))
        );
    }

    #[test]
    fn answers_are_vllms_words() {
        let json = InspectError::Json {
            what: "Expecting ':' delimiter",
            pos: 5,
            line: 1,
            column: 6,
        };
        assert_eq!(
            text(RouteKind::Chat, &json).unwrap(),
            r#"{"error":{"message":"1 validation error:\n  {'type': 'json_invalid', 'loc': 'body.5', 'msg': 'JSON decode error', 'input': '<dict of 0 items>', 'ctx': {'error': \"Expecting ':' delimiter\"}}","type":"Bad Request","param":"body.5","code":400}}"#
        );
        assert_eq!(
            text(RouteKind::Invocations, &json).unwrap(),
            r#"{"error":{"message":"JSON decode error: Expecting ':' delimiter: line 1 column 6 (char 5)","type":"Bad Request","param":null,"code":400}}"#
        );
        let list = InspectError::NotObject {
            type_name: "array",
            input: "'<list of 2 items>'".into(),
            python_type: "list",
            may_hold_request_type: false,
        };
        let tokenize = text(RouteKind::Tokenize, &list).unwrap();
        assert!(tokenize.starts_with(r#"{"error":{"message":"2 validation errors:\n  {'type': 'model_attributes_type', 'loc': 'body', 'msg': 'Input should be a valid dictionary or object to extract fields from', 'input': '<list of 2 items>'}\n  {'type'"#), "{tokenize}");
        assert!(tokenize.ends_with(
            r#"'input': '<list of 2 items>'}","type":"Bad Request","param":"body","code":400}}"#
        ));
        assert_eq!(
            text(RouteKind::Completions, &InspectError::Empty).unwrap(),
            r#"{"error":{"message":"1 validation error:\n  {'type': 'missing', 'loc': 'body', 'msg': 'Field required', 'input': 'None'}","type":"Bad Request","param":"body","code":400}}"#
        );
        let deep = InspectError::Syntax(SyntaxError::TooDeep {
            offset: 0,
            limit: RENDER_MAX_DEPTH,
            opens: b'[',
        });
        assert_eq!(
            text(RouteKind::Chat, &deep).as_deref(),
            Some(PARSE_ERROR_BODY)
        );
        let shallow = InspectError::Syntax(SyntaxError::TooDeep {
            offset: 0,
            limit: 64,
            opens: b'[',
        });
        assert_eq!(text(RouteKind::Chat, &shallow), None, "not vLLM's limit");
        assert_eq!(text(RouteKind::Invocations, &deep), None);
        let path = InspectError::NotObject {
            type_name: "string",
            input: "'/usr/lib/x'".into(),
            python_type: "str",
            may_hold_request_type: false,
        };
        // vLLM rewrites paths (checked against the render server).
        let answer = text(RouteKind::Chat, &path).unwrap();
        assert!(answer.contains("'input': '<path>'}"), "{answer}");
        let unknown = InspectError::NotObject {
            type_name: "string",
            input: r#"'File "x", line 1, in f'"#.into(),
            python_type: "str",
            may_hold_request_type: false,
        };
        assert_eq!(text(RouteKind::Chat, &unknown), None, "a traceback's text");
        // `_format_error` cuts an error's text at 1000 characters (an input of 200
        // characters that `repr()` writes as 10 each crosses it).
        let wide = InspectError::NotObject {
            type_name: "string",
            input: format!("'{}'", "\\U000e0001".repeat(200)),
            python_type: "str",
            may_hold_request_type: false,
        };
        let answer = text(RouteKind::Chat, &wide).unwrap();
        let message = answer.split(r#""message":""#).nth(1).unwrap();
        let error = message.split(r#"","type""#).next().unwrap();
        let error = error.strip_prefix(r"1 validation error:\n  ").unwrap();
        // JSON escapes each backslash of the text: 2,000 characters of escapes written.
        assert!(error.ends_with("...[truncated]"), "{error}");
        assert_eq!(error.replace(r"\\", r"\").chars().count(), 1000 + 14);
    }
}
