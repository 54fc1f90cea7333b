//! One chat message, as pydantic judges it against `ChatCompletionMessageParam`: the union of
//! OpenAI's six message types, vLLM's custom message (any string role) and harmony's
//! `Message`. A message is taken when one of them takes it.
//!
//! The chat request (`ChatCompletionRequest`) first runs `_normalize_messages_before` over
//! its messages: a `tool_calls` that is neither null nor a list becomes `list(tool_calls)`
//! (a number or a bool is a `TypeError`, a string its characters, an object its keys), and a
//! non-null `reasoning_content` becomes `reasoning` when that is absent or null. Its
//! after-validator then reads the assistant's `tool_calls` to a list, which validates their
//! elements. So each message gets two verdicts ([`Fits`]): as other requests validate it,
//! and as the chat request does. Its `check_system_message_content_type` logs the `type` of
//! a system message's content parts through a cache, so a part `type` Python cannot hash (a
//! non-empty list or object) is a `TypeError` too: [`Fits::raises`].
//!
//! Only what no coercion can avoid is refused: inside a list, an object is taken as a
//! content part whatever its members (nearly every object is: several part types have no
//! required key), a tool call is read for the members its types require, and OpenAI's
//! lists (`Iterable`) are validated only when read (`tool_calls`: by the chat request's
//! after-validator; content: after the gate).

use std::ops::Range;

use super::key_bytes;
use super::scan::{Kind, KindSet, Scanner, SyntaxError};
use super::tagged::Reader;

/// Whether some message type takes a message: as most requests validate it, and as the
/// chat request does after its validators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fits {
    /// Plain pydantic validation (`/tokenize`, the pooling requests, the batch request).
    pub(super) plain: bool,
    /// The chat request's (`ChatCompletionRequest`).
    pub(super) chat: bool,
    /// The chat request's before-validators raise a `TypeError` on it, which is no
    /// validation error (it ends `/invocations`' dispatch): a `tool_calls` number, bool,
    /// NaN or infinity, or a system message's content part whose `type` Python cannot hash.
    pub(super) raises: bool,
    /// Harmony's `Message` takes it: validated so (the batch route's conversations), it is
    /// an object, which the chat request's validators skip.
    pub(super) harmony: bool,
}

impl Fits {
    /// Taken both ways.
    pub(super) const BOTH: Fits = Fits::same(true);

    /// The same verdict both ways (for what the chat request's validators do not touch).
    pub(super) const fn same(fits: bool) -> Fits {
        Fits {
            plain: fits,
            chat: fits,
            raises: false,
            harmony: false,
        }
    }
}

/// A member's kind and, for a list, its elements' kinds (none for another value).
type Value = (Kind, KindSet);

/// The value just scanned, `kind`, with its elements' kinds if it is a list.
fn value(sc: &Scanner<'_>, kind: Kind) -> Value {
    let elements = match kind {
        Kind::Array { .. } => sc.inner(),
        _ => KindSet::NONE,
    };
    (kind, elements)
}

/// The members the message types judge, each the last of duplicate keys.
#[derive(Default)]
struct Message {
    role: Option<Kind>,
    /// Where the string `role` is, read as a word only when vLLM's custom type refuses.
    role_token: Range<usize>,
    content: Option<Value>,
    name: Option<Kind>,
    tool_call_id: Option<Kind>,
    tool_calls: Option<Value>,
    reasoning: Option<Kind>,
    reasoning_content: Option<Kind>,
    tools: Option<Value>,
    task: Option<Kind>,
    audio: Option<Kind>,
    function_call: Option<Kind>,
    refusal: Option<Kind>,
    /// Whether the (last) `author` is an object harmony's `Author` takes.
    author: bool,
    /// Whether `channel`, `recipient` and `content_type` are strings or null (or absent).
    harmony_fields: [bool; 3],
    /// A member name holds a lone surrogate: pydantic cannot read it as text, so no message
    /// type but harmony's (which is not a pydantic model) takes the message.
    unreadable_key: bool,
    /// An object in the (last) `content` list has such a name: vLLM's custom type, which
    /// validates its parts, refuses it (OpenAI's read theirs lazily, after the gate).
    unreadable_part: bool,
    /// An object in the (last) `content` list has a (last) `type` that is a non-empty list
    /// or object, which Python cannot hash.
    unhashable_part: bool,
    /// What the (last) `tool_calls` list's objects are, when it is a list.
    calls: Calls,
}

/// What the objects of a `tool_calls` list are (both true for another value).
#[derive(Clone, Copy)]
struct Calls {
    /// Every one is OpenAI's function tool call (the one type vLLM's custom message lists).
    function: bool,
    /// Every one is a function or a custom tool call (the assistant message's union).
    any: bool,
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            function: true,
            any: true,
        }
    }
}

fn is_str(k: Option<Kind>) -> bool {
    matches!(k, Some(Kind::Str { .. }))
}

fn str_or_absent(k: Option<Kind>) -> bool {
    matches!(k, None | Some(Kind::Str { .. }))
}

/// `str | None`, absent or not.
fn optional_str(k: Option<Kind>) -> bool {
    matches!(k, None | Some(Kind::Str { .. } | Kind::Null))
}

/// What pydantic's `Iterable` takes from JSON: a string, a list or an object.
fn iterable(k: Kind) -> bool {
    matches!(
        k,
        Kind::Str { .. } | Kind::Array { .. } | Kind::Object { .. }
    )
}

/// A list whose elements are all of `kinds`.
fn list_of(v: Value, kinds: KindSet) -> bool {
    matches!(v.0, Kind::Array { .. }) && v.1.within(kinds)
}

impl Message {
    /// Notes a member other than `role` and `content`.
    fn other(&mut self, key: &[u8], value: Value) {
        let (kind, m) = (value.0, self);
        let text_or_null = matches!(kind, Kind::Str { .. } | Kind::Null);
        match key {
            b"author" if !matches!(kind, Kind::Object { .. }) => m.author = false,
            b"name" => m.name = Some(kind),
            b"tool_call_id" => m.tool_call_id = Some(kind),
            b"tool_calls" => m.tool_calls = Some(value),
            b"reasoning" => m.reasoning = Some(kind),
            b"reasoning_content" => m.reasoning_content = Some(kind),
            b"tools" => m.tools = Some(value),
            b"task" => m.task = Some(kind),
            b"audio" => m.audio = Some(kind),
            b"function_call" => m.function_call = Some(kind),
            b"refusal" => m.refusal = Some(kind),
            b"channel" => m.harmony_fields[0] = text_or_null,
            b"recipient" => m.harmony_fields[1] = text_or_null,
            b"content_type" => m.harmony_fields[2] = text_or_null,
            _ => {}
        }
    }

    /// What the chat request's before-validator makes of `tool_calls` (`None`: a
    /// `TypeError`): a list of objects stays, an empty string or object becomes an empty list
    /// and anything else that is iterable a list of strings.
    fn normalized_tool_calls(&self) -> Option<Option<Value>> {
        Some(match self.tool_calls {
            Some((Kind::Str { empty } | Kind::Object { empty }, _)) => {
                let elements = if empty { KindSet::NONE } else { KindSet::STR };
                Some((Kind::Array { empty }, elements))
            }
            Some((Kind::Number { .. } | Kind::NonFinite | Kind::Bool(_), _)) => return None,
            other => other,
        })
    }

    /// The `reasoning` the custom type sees.
    fn reasoning(&self, chat: bool) -> Option<Kind> {
        match (self.reasoning, self.reasoning_content) {
            (None | Some(Kind::Null), Some(moved)) if chat && moved != Kind::Null => Some(moved),
            (reasoning, _) => reasoning,
        }
    }

    /// vLLM's `CustomChatCompletionMessageParam` (`total=False`, any string role).
    fn custom(&self, tool_calls: Option<Value>, chat: bool) -> bool {
        let objects = |v: Option<Value>| match v {
            None | Some((Kind::Null, _)) => true,
            Some(v) => list_of(v, KindSet::OBJECT),
        };
        is_str(self.role)
            && self.content.is_none_or(|c| {
                let parts = KindSet::STR.or(KindSet::NOT_INT).or(KindSet::OBJECT);
                matches!(c.0, Kind::Str { .. }) || (list_of(c, parts) && !self.unreadable_part)
            })
            && str_or_absent(self.name)
            && optional_str(self.tool_call_id)
            && objects(tool_calls)
            && self.calls.function
            && optional_str(self.reasoning(chat))
            && objects(self.tools)
            && optional_str(self.task)
    }

    /// OpenAI's message type for the role's word, if any takes it.
    fn openai(&self, text: &[u8], tool_calls: Option<Value>, chat: bool) -> bool {
        let Some(role) = self.role_word(text) else {
            return false;
        };
        let content = self.content.map(|c| c.0);
        let required = content.is_some_and(iterable);
        match &role[..] {
            b"user" | b"system" | b"developer" => required && str_or_absent(self.name),
            b"tool" => required && is_str(self.tool_call_id),
            b"function" => {
                matches!(content, Some(Kind::Str { .. } | Kind::Null)) && is_str(self.name)
            }
            b"assistant" => {
                let object_or_null = |k| matches!(k, None | Some(Kind::Null | Kind::Object { .. }));
                // An `Iterable` is read when validated only in the chat request, whose
                // after-validator makes it a list.
                let calls = match tool_calls {
                    None => true,
                    Some(v) if chat => list_of(v, KindSet::OBJECT) && self.calls.any,
                    Some(v) => iterable(v.0),
                };
                content.is_none_or(|c| c == Kind::Null || iterable(c))
                    && str_or_absent(self.name)
                    && optional_str(self.refusal)
                    && object_or_null(self.audio)
                    && object_or_null(self.function_call)
                    && calls
            }
            _ => false,
        }
    }

    /// Harmony's `Message`: an `Author`, a list of objects as `content` if any, and strings
    /// or null as `channel`, `recipient` and `content_type`.
    fn harmony(&self) -> bool {
        self.author
            && self.content.is_none_or(|c| list_of(c, KindSet::OBJECT))
            && self.harmony_fields.iter().all(|&ok| ok)
    }

    fn fits(&self, text: &[u8]) -> Fits {
        let raises = self.normalized_tool_calls().is_none()
            || (self.unhashable_part && self.role_is(text, b"system"));
        let harmony = self.harmony();
        if self.unreadable_key {
            return Fits {
                raises,
                harmony,
                ..Fits::same(harmony)
            };
        }
        let plain = harmony
            || self.custom(self.tool_calls, false)
            || self.openai(text, self.tool_calls, false);
        // The chat request's validators change nothing of a message without these.
        let reshaped = self.tool_calls.is_some() || self.reasoning_content.is_some();
        let chat = if !reshaped {
            plain
        } else {
            match self.normalized_tool_calls() {
                None => false,
                Some(calls) => {
                    harmony || self.custom(calls, true) || self.openai(text, calls, true)
                }
            }
        };
        Fits {
            plain,
            chat,
            raises,
            harmony,
        }
    }

    /// The (last) `role`, decoded, if it is a string.
    fn role_word<'t>(&self, text: &'t [u8]) -> Option<std::borrow::Cow<'t, [u8]>> {
        if !is_str(self.role) {
            return None;
        }
        let token = text[self.role_token.clone()].trim_ascii();
        Some(super::scan::decoded(&token[1..token.len() - 1]))
    }

    /// Whether the (last) `role` is the string `word`.
    fn role_is(&self, text: &[u8], word: &[u8]) -> bool {
        self.role_word(text).is_some_and(|role| *role == *word)
    }
}

/// Scans an object element of a list of chat messages (its members at `depth`): its kind,
/// and whether some message type takes it ([`Fits`]). With `seen`, the object is also read
/// as a tagged item (the Responses API's `input`). `roles` is cleared unless its (last)
/// `role` is a string.
pub(super) fn chat_message(
    sc: &mut Scanner<'_>,
    depth: usize,
    mut seen: Option<&mut Reader<'_>>,
    roles: &mut bool,
) -> Result<(Kind, Fits), SyntaxError> {
    let mut m = Message {
        harmony_fields: [true; 3],
        ..Message::default()
    };
    let (empty, unreadable) = super::model_members(sc, depth, |sc, key| {
        match key {
            // The last `tool_calls` and `content` count, lists or not.
            b"tool_calls" => m.calls = Calls::default(),
            b"content" => (m.unreadable_part, m.unhashable_part) = (false, false),
            _ => {}
        }
        let mut read = |sc: &mut Scanner<'_>| match key {
            b"author" if sc.peek() == Some(b'{') => {
                let (kind, ok) = harmony_author(sc, depth + 1)?;
                m.author = ok;
                Ok(kind)
            }
            b"tool_calls" if sc.peek() == Some(b'[') => {
                let (kind, calls) = tool_call_list(sc, depth + 1)?;
                m.calls = calls;
                Ok(kind)
            }
            b"content" if sc.peek() == Some(b'[') => {
                let (kind, parts) = content_parts(sc, depth + 1)?;
                (m.unreadable_part, m.unhashable_part) = (parts.unreadable, parts.unhashable);
                Ok(kind)
            }
            _ => sc.value(depth + 1),
        };
        let start = sc.pos;
        let kind = match seen.as_deref_mut() {
            // Read here, not as parts: no Responses item has these.
            Some(seen) if matches!(key, b"author" | b"tool_calls") => seen.member(sc, key, read)?,
            Some(seen) => {
                let kind = seen.member_listed(sc, key, depth + 1, read)?;
                if key == b"content" && matches!(kind, Kind::Array { .. }) {
                    m.unreadable_part = seen.listed_unreadable();
                }
                kind
            }
            None => read(sc)?,
        };
        match key {
            b"role" => (m.role, m.role_token) = (Some(kind), start..sc.pos),
            b"content" => m.content = Some(value(sc, kind)),
            _ => m.other(key, value(sc, kind)),
        }
        Ok(())
    })?;
    m.unreadable_key = unreadable;
    *roles &= is_str(m.role);
    Ok((Kind::Object { empty }, m.fits(sc.text())))
}

/// What the objects of a `content` list hold.
#[derive(Default)]
struct Parts {
    /// A member name that is not text ([`super::unreadable_name`]).
    unreadable: bool,
    /// A (last) `type` that is a non-empty list or object (unhashable, and truthy).
    unhashable: bool,
}

/// Scans a `content` list (at `depth`): what its objects hold ([`Parts`]).
fn content_parts(sc: &mut Scanner<'_>, depth: usize) -> Result<(Kind, Parts), SyntaxError> {
    let mut parts = Parts::default();
    let empty = sc.elements(depth, |sc| {
        if sc.peek() != Some(b'{') {
            return sc.value(depth + 1);
        }
        let mut unhashable = false;
        let (empty, names) = super::model_members(sc, depth + 1, |sc, key| {
            let kind = sc.value(depth + 2)?;
            if key == b"type" {
                unhashable = matches!(
                    kind,
                    Kind::Array { empty: false } | Kind::Object { empty: false }
                );
            }
            Ok(())
        })?;
        parts.unreadable |= names;
        parts.unhashable |= unhashable;
        Ok(Kind::Object { empty })
    })?;
    Ok((Kind::Array { empty }, parts))
}

/// Scans a `tool_calls` list (at `depth`): what its objects are. Other elements are judged
/// by their kinds.
fn tool_call_list(sc: &mut Scanner<'_>, depth: usize) -> Result<(Kind, Calls), SyntaxError> {
    let mut calls = Calls::default();
    let empty = sc.elements(depth, |sc| {
        if sc.peek() != Some(b'{') {
            return sc.value(depth + 1);
        }
        let (kind, function, custom) = tool_call(sc, depth + 1)?;
        calls.function &= function;
        calls.any &= function || custom;
        Ok(kind)
    })?;
    Ok((Kind::Array { empty }, calls))
}

/// Scans one tool call object: whether it is OpenAI's function tool call (`id` a string,
/// `type` "function", `function` an object with string `name` and `arguments`) and whether
/// it is its custom one (`type` "custom", `custom` with string `name` and `input`). Extra
/// members are ignored, as by a `TypedDict`, but for a name that is not text, which no type
/// takes; the last of duplicates counts.
fn tool_call(sc: &mut Scanner<'_>, depth: usize) -> Result<(Kind, bool, bool), SyntaxError> {
    let (mut id, mut ty, mut function, mut custom) = (false, None, false, false);
    let (empty, unreadable) = super::model_members(sc, depth, |sc, key| {
        match key {
            b"type" if sc.peek() == Some(b'"') => {
                let s = sc.string()?;
                ty = match &key_bytes(sc.text(), s)[..] {
                    b"function" => Some(true),
                    b"custom" => Some(false),
                    _ => None,
                };
            }
            b"function" => function = named(sc, depth + 1, b"arguments")?,
            b"custom" => custom = named(sc, depth + 1, b"input")?,
            other => {
                let kind = sc.value(depth + 1)?;
                match other {
                    b"id" => id = matches!(kind, Kind::Str { .. }),
                    b"type" => ty = None,
                    _ => {}
                }
            }
        }
        Ok(())
    })?;
    let kind = Kind::Object { empty };
    let id = id && !unreadable;
    Ok((
        kind,
        id && ty == Some(true) && function,
        id && ty == Some(false) && custom,
    ))
}

/// Scans a value (at `depth`): whether it is an object whose `name` and `other` members are
/// strings (the last of each), with no member name that is not text.
fn named(sc: &mut Scanner<'_>, depth: usize, other: &[u8]) -> Result<bool, SyntaxError> {
    if sc.peek() != Some(b'{') {
        sc.value(depth)?;
        return Ok(false);
    }
    let (mut name, mut second) = (false, false);
    let (_, unreadable) = super::model_members(sc, depth, |sc, key| {
        let text = matches!(sc.value(depth + 1)?, Kind::Str { .. });
        match key {
            b"name" => name = text,
            k if k == other => second = text,
            _ => {}
        }
        Ok(())
    })?;
    Ok(name && second && !unreadable)
}

/// Scans a harmony message's `author` object: its kind, and whether `Author` may take it (a
/// `role` that is one of harmony's roles, and a `name` that is a string or null).
fn harmony_author(sc: &mut Scanner<'_>, depth: usize) -> Result<(Kind, bool), SyntaxError> {
    const ROLES: [&[u8]; 5] = [b"user", b"assistant", b"system", b"developer", b"tool"];
    let (mut role, mut name) = (false, true);
    let empty = sc.members(depth, |sc, key| {
        let key = key_bytes(sc.text(), key);
        if &key[..] == b"role" && sc.peek() == Some(b'"') {
            let s = sc.string()?;
            role = ROLES.contains(&&key_bytes(sc.text(), s)[..]);
            return Ok(());
        }
        let kind = sc.value(depth + 1)?;
        match &key[..] {
            b"role" => role = false,
            b"name" => name = matches!(kind, Kind::Str { .. } | Kind::Null),
            _ => {}
        }
        Ok(())
    })?;
    Ok((Kind::Object { empty }, role && name))
}
