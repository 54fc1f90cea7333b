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
//! `/invocations` reads the body itself and words a `JSONDecodeError` as Python prints it.
//! The messages are those of the Python 3.11 `json` module the recorded server runs
//! (3.13 words a trailing comma differently).

use bytes::Bytes;
use http::StatusCode;

use crate::classify::RouteKind;
use crate::error::envelope;
use crate::inspect::scan::SyntaxError;
use crate::inspect::{InspectError, DEFAULT_MAX_DEPTH};

/// FastAPI's answer to a body whose parsing raised anything but a `JSONDecodeError`.
pub const PARSE_ERROR_BODY: &str = r#"{"detail":"There was an error parsing the body"}"#;

/// vLLM's answer to a body `inspect` refused with `error` on `route`, or `None` where
/// mmgate cannot know its words.
pub(super) fn answer(route: RouteKind, error: &InspectError) -> Option<Bytes> {
    if route == RouteKind::Invocations {
        return invocations(error);
    }
    let parse_error = || Some(Bytes::from_static(PARSE_ERROR_BODY.as_bytes()));
    match error {
        InspectError::Empty
        | InspectError::NotObject {
            type_name: "null", ..
        } => Some(validation(1, &missing(), "body")),
        InspectError::NotObject {
            input: Some(input), ..
        } => {
            let error = model_attributes(input)?;
            Some(validation(super::route_models(route), &error, "body"))
        }
        InspectError::NotObject { input: None, .. } => None,
        InspectError::Json { what, pos, .. } => {
            let error = format!(
                "{{'type': 'json_invalid', 'loc': 'body.{pos}', 'msg': 'JSON decode error', 'input': '<dict of 0 items>', 'ctx': {{'error': {}}}}}",
                repr(what)?
            );
            Some(validation(1, &error, &format!("body.{pos}")))
        }
        InspectError::Decode(_) | InspectError::Syntax(SyntaxError::IntTooLong { .. }) => {
            parse_error()
        }
        // Only at vLLM's own limit is "too deep" its RecursionError.
        InspectError::Syntax(SyntaxError::TooDeep { limit, .. }) if *limit == DEFAULT_MAX_DEPTH => {
            parse_error()
        }
        InspectError::Syntax(_) => None,
    }
}

/// `/invocations`: `JSON decode error: <Python's str() of the JSONDecodeError>`; other
/// failures surface as Python exception texts mmgate does not reproduce.
fn invocations(error: &InspectError) -> Option<Bytes> {
    let (what, pos, line, column) = match *error {
        InspectError::Empty => ("Expecting value", 0, 1, 1),
        InspectError::Json {
            what,
            pos,
            line,
            column,
        } => (what, pos, line, column),
        _ => return None,
    };
    let message = format!("JSON decode error: {what}: line {line} column {column} (char {pos})");
    Some(envelope(
        StatusCode::BAD_REQUEST,
        "Bad Request",
        None,
        &message,
    ))
}

fn missing() -> String {
    "{'type': 'missing', 'loc': 'body', 'msg': 'Field required', 'input': 'None'}".to_owned()
}

/// The error pydantic gives each model for a body that is no object, or `None` where
/// vLLM's `sanitize_message` would rewrite the input (paths, addresses, tracebacks) or its
/// `repr()` is not certain.
fn model_attributes(input: &str) -> Option<String> {
    if input.contains('/') || input.contains(" at 0x") || input.contains("File \"") {
        return None;
    }
    Some(format!(
        "{{'type': 'model_attributes_type', 'loc': 'body', 'msg': 'Input should be a valid dictionary or object to extract fields from', 'input': {}}}",
        repr(input)?
    ))
}

/// vLLM's `validation_exception_handler` body for `count` copies of `error`.
fn validation(count: usize, error: &str, param: &str) -> Bytes {
    let label = if count == 1 { "error" } else { "errors" };
    let mut message = format!("{count} validation {label}:");
    for _ in 0..count {
        message.push_str("\n  ");
        message.push_str(error);
    }
    envelope(
        StatusCode::BAD_REQUEST,
        "Bad Request",
        Some(param),
        &message,
    )
}

/// Python's `repr()` of a string, or `None` for one with characters past Latin-1 (whether
/// Python shows them or escapes them depends on its Unicode tables).
fn repr(s: &str) -> Option<String> {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            // Controls, DEL, C1 controls, no-break space, soft hyphen: not printable.
            '\0'..='\u{a0}' | '\u{ad}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{a1}'..='\u{ff}' => out.push(c),
            _ => return None,
        }
    }
    out.push(quote);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_repred_as_python_does() {
        for (s, want) in [
            ("x", "'x'"),
            ("it's", "\"it's\""),
            ("q'\"", "'q\\'\"'"),
            ("a\\b", "'a\\\\b'"),
            (
                "a\nb\t\u{1}\u{7f}\u{a0}\u{ad}é",
                "'a\\nb\\t\\x01\\x7f\\xa0\\xadé'",
            ),
            ("Expecting ':' delimiter", "\"Expecting ':' delimiter\""),
        ] {
            assert_eq!(repr(s).as_deref(), Some(want), "{s:?}");
        }
        assert_eq!(repr("€"), None);
    }

    fn text(route: RouteKind, e: &InspectError) -> Option<String> {
        answer(route, e).map(|b| String::from_utf8(b.to_vec()).unwrap())
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
            input: Some("<list of 2 items>".into()),
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
            limit: DEFAULT_MAX_DEPTH,
        });
        assert_eq!(
            text(RouteKind::Chat, &deep).as_deref(),
            Some(PARSE_ERROR_BODY)
        );
        let shallow = InspectError::Syntax(SyntaxError::TooDeep {
            offset: 0,
            limit: 64,
        });
        assert_eq!(answer(RouteKind::Chat, &shallow), None, "not vLLM's limit");
        assert_eq!(text(RouteKind::Invocations, &deep), None);
        let path = InspectError::NotObject {
            type_name: "string",
            input: Some("/usr/lib/x".into()),
        };
        assert_eq!(text(RouteKind::Chat, &path), None, "vLLM rewrites paths");
    }
}
