//! The top-level lists and objects whose insides vLLM's request types look into before the
//! gate: chat messages and conversations, chat tools, the Responses API's tagged items and
//! tools, its `include` words, and the score inputs' content parts.
//!
//! Each walk notes what the types in [`crate::contract`] judge ([`Shape`]); none decides
//! anything itself. Only what no coercion can avoid is noted, so a body read as well shaped
//! may still be refused by vLLM, never the other way round. The last duplicate key counts,
//! keys compared after unescaping, as in Python's dict.

use super::message::{chat_message, Fits};
use super::scan::{Kind, KindSet, Scanner, SyntaxError};
use super::tagged::{Key, Object, Parts, Reader, TagValue};
use super::{coerce, key_bytes};

/// What the walk of a shaped member found.
#[derive(Debug, Default)]
pub(super) struct Shape {
    /// See [`super::Member::misshapen`].
    pub misshapen: bool,
    /// See [`super::Member::misshapen_chat`].
    pub misshapen_chat: bool,
    /// See [`super::Member::chat_raises`].
    pub chat_raises: bool,
    /// The objects read as tagged types ([`super::Member::tagged`]), their keys in `keys`.
    pub objects: Vec<Object>,
    /// The keys of all `objects`, one after another.
    pub keys: Vec<Key>,
    /// The objects in their lists, where those are read.
    pub parts: Option<Box<Parts>>,
    /// See [`super::Member::strings`].
    pub strings: Vec<Vec<u8>>,
    /// See [`super::Member::nested`].
    pub nested: KindSet,
    /// See [`super::Member::chat_form`].
    pub chat_form: ChatForm,
    /// See [`super::Member::tool_names`].
    pub tool_names: ToolNames,
}

/// The names in a `tools` list that a named tool choice may name, as the request models'
/// `check_tool_usage` collect them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNames {
    /// Chat's: the function names its check compares (`tool["function"]["name"]` of each
    /// tool in turn, on the raw objects), the strings among them decoded, up to the first
    /// tool it cannot read so (where it raises).
    pub chat: Vec<Vec<u8>>,
    /// Chat's check reached a tool it cannot read: it looks no further.
    pub(super) chat_stopped: bool,
    /// The Responses API's: each tool's `name`, and a namespace's tools' names alone and
    /// after the namespace's (`{namespace}__{name}`), the strings among them decoded.
    pub responses: Vec<Vec<u8>>,
    /// The Responses API's check may take any name: a namespace without a list of tools
    /// (the check returns), or a name it writes as text that is not read here.
    pub responses_any: bool,
}

impl ToolNames {
    /// Whether any name was collected (or the Responses API's check takes any).
    pub(super) fn any(&self) -> bool {
        !self.chat.is_empty() || !self.responses.is_empty() || self.responses_any
    }
}

/// A `name` member's value as Python compares it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum NameValue {
    /// Absent or null (`None`).
    #[default]
    None,
    /// A string, decoded.
    Text(Vec<u8>),
    /// Any other value, and whether it is truthy.
    Other(bool),
}

impl NameValue {
    /// Scans the value at the cursor (at `depth`).
    fn read(sc: &mut Scanner<'_>, depth: usize) -> Result<(Kind, NameValue), SyntaxError> {
        if sc.peek() == Some(b'"') {
            let s = sc.string()?;
            let text = key_bytes(sc.text(), s).into_owned();
            return Ok((
                Kind::Str {
                    empty: text.is_empty(),
                },
                NameValue::Text(text),
            ));
        }
        let kind = sc.value(depth)?;
        let value = match kind {
            Kind::Null => NameValue::None,
            _ => NameValue::Other(kind.truthy()),
        };
        Ok((kind, value))
    }

    /// Its `str()`, where that is known here.
    fn python_str(&self) -> Option<&[u8]> {
        match self {
            NameValue::None => Some(b"None"),
            NameValue::Text(text) => Some(text),
            NameValue::Other(_) => None,
        }
    }
}

/// What vLLM's embeddings models' `_is_chat_messages` and `_is_batched_chat_messages` say of
/// a list: whether a before-validator moves it from `input` to `messages`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ChatForm {
    /// Neither.
    #[default]
    Neither,
    /// A non-empty list of objects, each with a string `role`.
    Messages,
    /// A non-empty list of such lists.
    Conversations,
}

/// Scans the value at the cursor if `name` is a member whose shape the request types look
/// into, noting it in `shape`; `None` (nothing read) for any other member or value.
pub(super) fn walk(
    sc: &mut Scanner<'_>,
    name: &[u8],
    shape: &mut Shape,
) -> Result<Option<Kind>, SyntaxError> {
    // A `messages` list is walked whatever its first element: the chat request's
    // validators skip what is not an object and raise on a later message.
    let messages = name == b"messages" && sc.peek() == Some(b'[') && !starts_with(sc, b'[');
    let kind = match name {
        b"messages" | b"input" | b"tools" if messages || starts_with(sc, b'{') => {
            let input = name == b"input";
            let (mut all, mut roles) = (Fits::BOTH, true);
            let empty = sc.elements(2, |sc| {
                if sc.peek() != Some(b'{') {
                    // Not an object: the list's element kinds judge it.
                    roles = false;
                    shape.tool_names.chat_stopped |= name == b"tools";
                    return sc.value(3);
                }
                let (kind, fits) = match name {
                    b"tools" => {
                        let (kind, fits) = chat_tool(sc, shape)?;
                        (kind, Fits::same(fits))
                    }
                    _ if input => {
                        let mut seen = Reader::with_parts(&mut shape.keys, &mut shape.parts);
                        let read = chat_message(sc, 3, Some(&mut seen), &mut roles)?;
                        let object = seen.finish();
                        shape.objects.push(object);
                        read
                    }
                    _ => chat_message(sc, 3, None, &mut roles)?,
                };
                all.plain &= fits.plain;
                all.chat &= fits.chat;
                all.raises |= fits.raises;
                Ok(kind)
            })?;
            (shape.misshapen, shape.misshapen_chat) = (!all.plain, !all.chat);
            shape.chat_raises = all.raises;
            if roles && !empty && name != b"tools" {
                shape.chat_form = ChatForm::Messages;
            }
            Kind::Array { empty }
        }
        b"messages" | b"input" if starts_with(sc, b'[') => {
            conversations(sc, shape, name == b"messages")?
        }
        b"include" if sc.peek() == Some(b'[') => word_list(sc, &mut shape.strings)?,
        _ if CONTENTS.contains(&name) && matches!(sc.peek(), Some(b'[' | b'{')) => {
            score_inputs(sc, shape)?
        }
        _ => return Ok(None),
    };
    Ok(Some(kind))
}

/// The top-level members that hold score inputs (`str | {"content": [part, ...]}`, or a
/// list of those): the score, rerank and chat requests' fields of these names.
pub const CONTENTS: [&[u8]; 8] = [
    b"query",
    b"queries",
    b"documents",
    b"items",
    b"data_1",
    b"data_2",
    b"text_1",
    b"text_2",
];

/// Whether the value at the cursor is a list whose first element opens with `open`. Lists
/// of messages and tools are walked only when it is an object: in any other list one element
/// at least is not an object, which the element kinds refuse already (and token lists stay
/// on the fast path).
pub(super) fn starts_with(sc: &Scanner<'_>, open: u8) -> bool {
    let rest = &sc.text()[sc.pos..];
    rest.first() == Some(&b'[')
        && rest[1..]
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            == Some(&open)
}

/// Scans a list of lists (a batch of conversations, or of token lists): its kind. The kinds
/// of the lists' elements go into `shape.nested`, and `shape.misshapen` is set when a list
/// is no conversation: empty, or holding an element that no chat message type may accept
/// (one that is not an object, or [`chat_message`] says so). Lists that do not open with
/// an object are scanned as they are.
///
/// The batch route validates its conversations plainly, then rebuilds the first one as a
/// chat request before its gate runs (and stops at the first error): that request's
/// `_normalize_messages_before` reads each `tool_calls` the batch validation left unread
/// in a message dict. For `messages` (`rebuilt`), `shape.misshapen_chat` is set when a
/// message of the first conversation does not fit as the chat request takes it; other
/// batched requests (the embeddings') rebuild nothing and read their `tool_calls` after the
/// gate.
fn conversations(
    sc: &mut Scanner<'_>,
    shape: &mut Shape,
    rebuilt: bool,
) -> Result<Kind, SyntaxError> {
    let mut roles = true;
    let mut first = true;
    let empty = sc.elements(2, |sc| {
        let first = std::mem::replace(&mut first, false);
        if !starts_with(sc, b'{') {
            let kind = sc.value(3)?;
            if matches!(kind, Kind::Array { .. }) {
                shape.misshapen = true;
                shape.nested = shape.nested.or(sc.inner());
            }
            roles = false;
            return Ok(kind);
        }
        let empty = sc.elements(3, |sc| {
            if sc.peek() != Some(b'{') {
                (shape.misshapen, roles) = (true, false);
                return sc.value(4);
            }
            // A system part's unhashable `type` raises nothing there: the batch validation
            // leaves OpenAI's content lists unread, so they are no lists to look into.
            let (kind, fits) = chat_message(sc, 4, None, &mut roles)?;
            shape.misshapen |= !fits.plain;
            // One harmony's type takes stays an object there, which they skip.
            shape.misshapen_chat |= rebuilt && first && !fits.chat && !fits.harmony;
            Ok(kind)
        })?;
        shape.nested = shape.nested.or(sc.inner());
        Ok(Kind::Array { empty })
    })?;
    if roles && !empty {
        shape.chat_form = ChatForm::Conversations;
    }
    Ok(Kind::Array { empty })
}

/// Scans an `include` list, its string elements decoded into `strings`.
fn word_list(sc: &mut Scanner<'_>, strings: &mut Vec<Vec<u8>>) -> Result<Kind, SyntaxError> {
    let empty = sc.elements(2, |sc| {
        if sc.peek() != Some(b'"') {
            return sc.value(3);
        }
        sc.record()?;
        let s = sc.string()?;
        strings.push(key_bytes(sc.text(), s).into_owned());
        Ok(Kind::Str {
            empty: s.start == s.end,
        })
    })?;
    Ok(Kind::Array { empty })
}

/// Scans a score input object, or a list (of strings and such objects): its kind. An
/// object's content parts are added to `shape.tagged`, the kinds of its member values to
/// `shape.nested`, and `shape.misshapen` is set when an object has no list `content`, a
/// part that is not an object, or a member name that is not text (`ScoreMultiModalParam`).
fn score_inputs(sc: &mut Scanner<'_>, shape: &mut Shape) -> Result<Kind, SyntaxError> {
    if sc.peek() == Some(b'{') {
        return score_input(sc, 2, shape);
    }
    let empty = sc.elements(2, |sc| {
        if sc.peek() == Some(b'{') {
            score_input(sc, 3, shape)
        } else {
            sc.value(3)
        }
    })?;
    Ok(Kind::Array { empty })
}

/// Scans one score input object (its members at `depth`), as [`score_inputs`].
fn score_input(sc: &mut Scanner<'_>, depth: usize, shape: &mut Shape) -> Result<Kind, SyntaxError> {
    // The parts of the last `content` go after these; `false` when that is no list of
    // objects.
    let (objects, keys) = (shape.objects.len(), shape.keys.len());
    let mut parts = false;
    let (empty, unreadable) = super::model_members(sc, depth, |sc, key| {
        let (start, content) = (sc.pos, key == b"content");
        if content {
            // A later `content` replaces the parts of an earlier one.
            shape.objects.truncate(objects);
            shape.keys.truncate(keys);
        }
        if !content || sc.peek() != Some(b'[') {
            let kind = sc.value(depth + 1)?;
            shape.nested = shape.nested.or(sc.kinds(kind, start));
            parts &= !content;
            return Ok(());
        }
        shape.nested = shape.nested.or(KindSet::ARRAY);
        parts = true;
        sc.elements(depth + 1, |sc| {
            if sc.peek() != Some(b'{') {
                parts = false;
                return sc.value(depth + 2);
            }
            // Its object members (an `image_url`, a `prompt_cache_breakpoint`) are read one
            // level down too: vLLM's score part types are strict `TypedDict`s.
            let reader = Reader::with_parts(&mut shape.keys, &mut shape.parts);
            let (kind, part) = reader.object(sc, depth + 2)?;
            shape.objects.push(part);
            Ok(kind)
        })?;
        Ok(())
    })?;
    if !parts || unreadable {
        shape.objects.truncate(objects);
        shape.keys.truncate(keys);
        shape.misshapen = true;
    }
    Ok(Kind::Object { empty })
}

/// Scans an element of a `tools` list: its kind, and whether `ChatCompletionToolsParam` may
/// accept it (`false` only when it cannot): a `type` that is `"function"`, a `function`
/// object with a string `name`, `description` a string or null, `parameters` an object or
/// null, `strict` and `defer_loading` booleans (as pydantic's lax mode reads them) or null,
/// and no member name that is not text. The element is also read as a tagged object, for
/// the Responses API's tool types.
fn chat_tool(sc: &mut Scanner<'_>, shape: &mut Shape) -> Result<(Kind, bool), SyntaxError> {
    // Whether the (last) `function` is one `FunctionDefinition` may take, and its (last)
    // `name` as chat's check reads it.
    let (mut function, mut defer) = (false, true);
    let mut raw = RawName::Unreadable;
    // For the Responses API's names: the last `name`, and the last `tools` if a list.
    let (mut name, mut tools) = (NameValue::None, None);
    // The objects in its other members (a custom tool's `format`) are read as parts,
    // leniently (see `Reader`).
    let mut seen = Reader::with_parts(&mut shape.keys, &mut shape.parts).lenient();
    let empty = sc.members(3, |sc, key| {
        let key = key_bytes(sc.text(), key);
        let start = sc.pos;
        let (mut read, mut read_raw) = (false, RawName::Unreadable);
        let read_here = |sc: &mut Scanner<'_>| match &key[..] {
            b"function" if sc.peek() == Some(b'{') => {
                let (kind, name, fits) = function_definition(sc)?;
                (read, read_raw) = (fits, name);
                Ok(kind)
            }
            b"name" => {
                let (kind, value) = NameValue::read(sc, 4)?;
                name = value;
                Ok(kind)
            }
            b"tools" if sc.peek() == Some(b'[') => {
                let (kind, names) = namespaced_names(sc)?;
                tools = Some(names);
                Ok(kind)
            }
            _ => sc.value(4),
        };
        let kind = match &key[..] {
            b"function" | b"name" | b"tools" => seen.member(sc, &key, read_here)?,
            _ => seen.member_listed(sc, &key, 4, read_here)?,
        };
        match &key[..] {
            b"function" => (function, raw) = (read, read_raw),
            b"tools" if !matches!(kind, Kind::Array { .. }) => tools = None,
            b"defer_loading" => defer = bool_or_null(kind, &sc.text()[start..sc.pos]),
            _ => {}
        }
        Ok(())
    })?;
    // `type` defaults to "function", the only word it takes.
    let object = seen.finish();
    let tag = object.view(&shape.keys, Parts::none()).tag();
    let typed = match tag {
        TagValue::Absent => true,
        TagValue::Word(w) => w.is(b"function"),
        _ => false,
    };
    let fits = typed && function && defer && !object.unreadable();
    shape.objects.push(object);
    let names = &mut shape.tool_names;
    if !names.chat_stopped {
        match raw {
            RawName::Text(text) => names.chat.push(text),
            RawName::Other => {}
            RawName::Unreadable => names.chat_stopped = true,
        }
    }
    match (tag.is(b"namespace"), tools) {
        (false, _) => {
            if let NameValue::Text(text) = name {
                names.responses.push(text);
            }
        }
        (true, None) => names.responses_any = true,
        (true, Some(tools)) => {
            for tool in tools {
                match (name.python_str(), tool.python_str()) {
                    (Some(space), Some(inner)) => {
                        names.responses.push([space, b"__", inner].concat());
                    }
                    _ => names.responses_any = true,
                }
                if let NameValue::Text(text) = tool {
                    names.responses.push(text);
                }
            }
        }
    }
    Ok((Kind::Object { empty }, fits))
}

/// Scans a namespace tool's `tools` list at the cursor: its kind, and the `name` of each
/// element (`None` for an element that is no object, as `getattr` finds it).
fn namespaced_names(sc: &mut Scanner<'_>) -> Result<(Kind, Vec<NameValue>), SyntaxError> {
    let mut names = Vec::new();
    let empty = sc.elements(4, |sc| {
        if sc.peek() != Some(b'{') {
            names.push(NameValue::None);
            return sc.value(5);
        }
        let mut name = NameValue::None;
        let empty = sc.members(5, |sc, key| {
            if &key_bytes(sc.text(), key)[..] == b"name" {
                name = NameValue::read(sc, 6)?.1;
            } else {
                sc.value(6)?;
            }
            Ok(())
        })?;
        names.push(name);
        Ok(Kind::Object { empty })
    })?;
    Ok((Kind::Array { empty }, names))
}

/// A chat tool's function name as chat's `check_tool_usage` reads it from the raw object
/// (`tool["function"]["name"]`).
enum RawName {
    /// No `function` object, or no `name` in it: the check raises.
    Unreadable,
    /// A string, decoded.
    Text(Vec<u8>),
    /// Another value, which equals no name.
    Other,
}

/// Scans a chat tool's `function` object: its kind, its (last) `name` ([`RawName`]), and
/// whether `FunctionDefinition` may accept it (`false` only when it cannot, a member name
/// that is not text included; a `name` that is not a string is refused).
fn function_definition(sc: &mut Scanner<'_>) -> Result<(Kind, RawName, bool), SyntaxError> {
    let (mut name, mut description, mut parameters, mut strict) =
        (RawName::Unreadable, true, true, true);
    let (empty, unreadable) = super::model_members(sc, 4, |sc, key| {
        let start = sc.pos;
        if key == b"name" && sc.peek() == Some(b'"') {
            let s = sc.string()?;
            name = RawName::Text(key_bytes(sc.text(), s).into_owned());
            return Ok(());
        }
        let kind = sc.value(5)?;
        match key {
            b"name" => name = RawName::Other,
            b"description" => description = matches!(kind, Kind::Str { .. } | Kind::Null),
            b"parameters" => parameters = matches!(kind, Kind::Object { .. } | Kind::Null),
            b"strict" => strict = bool_or_null(kind, &sc.text()[start..sc.pos]),
            _ => {}
        }
        Ok(())
    })?;
    let fits = !unreadable && description && parameters && strict;
    let named = matches!(name, RawName::Text(_));
    Ok((Kind::Object { empty }, name, fits && named))
}

/// Scans an object `tool_choice` at the cursor (a top-level member's value) as a tagged
/// object, its keys into `shape`: the object; the name of the tool it names as chat's
/// `check_tool_usage` reads it (the last `function`'s last `name`), `None` unless that is
/// an object whose name is a non-empty string; and its own `name`, which the Responses
/// API's reads.
pub(super) fn tool_choice(
    sc: &mut Scanner<'_>,
    shape: &mut Shape,
) -> Result<ToolChoice, SyntaxError> {
    let mut seen = Reader::new(&mut shape.keys);
    let (mut named, mut top_name) = (None, NameValue::None);
    let empty = sc.members(2, |sc, key| {
        let key = key_bytes(sc.text(), key);
        let function = &key[..] == b"function";
        let mut name = None;
        seen.member(sc, &key, |sc| {
            if &key[..] == b"name" {
                let (kind, value) = NameValue::read(sc, 3)?;
                top_name = value;
                return Ok(kind);
            }
            if !function || sc.peek() != Some(b'{') {
                return sc.value(3);
            }
            let empty = sc.members(3, |sc, key| {
                if &key_bytes(sc.text(), key)[..] != b"name" {
                    sc.value(4)?;
                    return Ok(());
                }
                name = match NameValue::read(sc, 4)?.1 {
                    NameValue::Text(text) if !text.is_empty() => Some(text),
                    _ => None,
                };
                Ok(())
            })?;
            Ok(Kind::Object { empty })
        })?;
        if function {
            named = name;
        }
        Ok(())
    })?;
    Ok(ToolChoice {
        kind: Kind::Object { empty },
        object: seen.finish(),
        function_name: named,
        name: top_name,
    })
}

/// An object `tool_choice`, as [`tool_choice`] reads it.
pub(super) struct ToolChoice {
    pub(super) kind: Kind,
    pub(super) object: Object,
    /// Its `function`'s name (chat's reading).
    pub(super) function_name: Option<Vec<u8>>,
    /// Its own `name` (the Responses API's reading).
    pub(super) name: NameValue,
}

/// Whether pydantic's lax mode takes the value as `bool | None`.
fn bool_or_null(kind: Kind, token: &[u8]) -> bool {
    kind == Kind::Null || bool_like(kind, token)
}

/// Whether pydantic's lax mode takes the value as `bool`.
fn bool_like(kind: Kind, token: &[u8]) -> bool {
    matches!(kind, Kind::Bool(_)) || coerce::of(kind, token).bool.is_some()
}

/// What a request's `structured_outputs` holds, read as vLLM's `StructuredOutputsParams`
/// dataclass reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct StructuredOutputs {
    /// How many of `json`, `regex` and `choice` are set (not null), which the request
    /// models' own check counts.
    pub(super) constraints: u8,
    /// Whether the dataclass refuses it: a value that is neither an object nor null, a
    /// member of a type its field does not take, or not exactly one of its six constraints
    /// set (its `__post_init__`).
    pub(super) refused: bool,
}

/// The type of a field of a dataclass or model that vLLM reads inside a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberTy {
    /// `str`.
    Text,
    /// `str | dict`.
    TextOrObject,
    /// `dict`.
    Object,
    /// `list[str]`.
    Words,
    /// `bool`, as pydantic's lax mode reads it (its words, and the numbers 0 and 1).
    Flag,
}

impl MemberTy {
    /// Scans the value at the cursor (its members or elements at `depth`): its kind, and
    /// whether the type (or null, if `nullable`) takes it.
    fn read(
        self,
        sc: &mut Scanner<'_>,
        depth: usize,
        nullable: bool,
    ) -> Result<(Kind, bool), SyntaxError> {
        let start = sc.pos;
        let (kind, fits) = match self {
            MemberTy::Words if sc.peek() == Some(b'[') => {
                let mut words = true;
                let empty = sc.elements(depth, |sc| {
                    let kind = sc.value(depth + 1)?;
                    words &= matches!(kind, Kind::Str { .. });
                    Ok(kind)
                })?;
                (Kind::Array { empty }, words)
            }
            _ => {
                let kind = sc.value(depth)?;
                let fits = match (self, kind) {
                    (MemberTy::Text | MemberTy::TextOrObject, Kind::Str { .. }) => true,
                    (MemberTy::TextOrObject | MemberTy::Object, Kind::Object { .. }) => true,
                    (MemberTy::Flag, _) => bool_like(kind, &sc.text()[start..sc.pos]),
                    _ => false,
                };
                (kind, fits)
            }
        };
        Ok((kind, fits || (nullable && kind == Kind::Null)))
    }
}

/// The dataclass's fields: type, whether null is taken, and whether it is one of the
/// constraints of which exactly one must be set.
const STRUCTURED_FIELDS: [(&[u8], MemberTy, bool, bool); 9] = [
    (b"json", MemberTy::TextOrObject, true, true),
    (b"regex", MemberTy::Text, true, true),
    (b"choice", MemberTy::Words, true, true),
    (b"grammar", MemberTy::Text, true, true),
    (b"json_object", MemberTy::Flag, true, true),
    (b"structural_tag", MemberTy::Text, true, true),
    (b"disable_any_whitespace", MemberTy::Flag, false, false),
    (
        b"disable_additional_properties",
        MemberTy::Flag,
        false,
        false,
    ),
    (b"whitespace_pattern", MemberTy::Text, true, false),
];

/// Scans `structured_outputs` at the cursor (a top-level member's value).
pub(super) fn structured_outputs(
    sc: &mut Scanner<'_>,
) -> Result<(Kind, StructuredOutputs), SyntaxError> {
    if sc.peek() != Some(b'{') {
        let kind = sc.value(2)?;
        let refused = kind != Kind::Null;
        return Ok((
            kind,
            StructuredOutputs {
                constraints: 0,
                refused,
            },
        ));
    }
    // Each field's last value: whether it is set (not null), and whether its type takes it.
    let mut fields: [Option<(bool, bool)>; STRUCTURED_FIELDS.len()] = Default::default();
    let (empty, unreadable) = super::model_members(sc, 2, |sc, key| {
        let Some(i) = STRUCTURED_FIELDS.iter().position(|f| f.0 == key) else {
            sc.value(3)?;
            return Ok(());
        };
        let (_, ty, nullable, _) = STRUCTURED_FIELDS[i];
        let (kind, fits) = ty.read(sc, 3, nullable)?;
        fields[i] = Some((kind != Kind::Null, fits));
        Ok(())
    })?;
    let (mut read, mut set, mut refused) = (0, 0, false);
    for (i, field) in fields.iter().enumerate() {
        let Some((not_null, fits)) = *field else {
            continue;
        };
        refused |= !fits;
        if not_null {
            set += u8::from(STRUCTURED_FIELDS[i].3);
            read += u8::from(i < 3);
        }
    }
    let read = StructuredOutputs {
        constraints: read,
        refused: refused || unreadable || set != 1,
    };
    Ok((Kind::Object { empty }, read))
}

/// Scans a `response_format` object at the cursor (a top-level member's value) as the
/// tagged union of formats it is, its keys into `shape`: the object, and whether its last
/// `json_schema` is an object that `JsonSchemaResponseFormat` refuses.
pub(super) fn response_format(
    sc: &mut Scanner<'_>,
    shape: &mut Shape,
) -> Result<(Kind, Object, bool), SyntaxError> {
    let mut seen = Reader::new(&mut shape.keys);
    let mut refused = false;
    let empty = sc.members(2, |sc, key| {
        let key = key_bytes(sc.text(), key);
        let mut fits = true;
        let kind = seen.member(sc, &key, |sc| match &key[..] {
            b"json_schema" => {
                let (kind, ok) = json_schema(sc, 3)?;
                fits = ok;
                Ok(kind)
            }
            _ => sc.value(3),
        })?;
        if &key[..] == b"json_schema" {
            refused = matches!(kind, Kind::Object { .. }) && !fits;
        }
        Ok(())
    })?;
    Ok((Kind::Object { empty }, seen.finish(), refused))
}

/// Scans a `response_format` object's `json_schema` at the cursor (its members at `depth`):
/// its kind, and whether `JsonSchemaResponseFormat | None` takes it (a string `name`,
/// `description` a string or null, `schema` an object or null, `strict` a boolean or null,
/// and no member name that is not text).
fn json_schema(sc: &mut Scanner<'_>, depth: usize) -> Result<(Kind, bool), SyntaxError> {
    const FIELDS: [(&[u8], MemberTy, bool); 4] = [
        (b"name", MemberTy::Text, false),
        (b"description", MemberTy::Text, true),
        (b"schema", MemberTy::Object, true),
        (b"strict", MemberTy::Flag, true),
    ];
    if sc.peek() != Some(b'{') {
        let kind = sc.value(depth)?;
        return Ok((kind, kind == Kind::Null));
    }
    // Each field's last value: whether its type takes it.
    let mut fields = [None; FIELDS.len()];
    let (empty, unreadable) = super::model_members(sc, depth, |sc, key| {
        match FIELDS.iter().position(|f| f.0 == key) {
            Some(i) => fields[i] = Some(FIELDS[i].1.read(sc, depth + 1, FIELDS[i].2)?.1),
            None => {
                sc.value(depth + 1)?;
            }
        }
        Ok(())
    })?;
    // `name` is required; the others have defaults.
    let fits =
        !unreadable && fields[0].is_some() && fields.iter().all(|f| f.is_none_or(|fits| fits));
    Ok((Kind::Object { empty }, fits))
}

/// Scans a top-level object's members, handing `on` the index in `names` of each member so
/// named, its value's kind and its token (a later duplicate's after an earlier one's).
/// Whether the object is empty, and whether a member name is one a model cannot read
/// ([`super::unreadable_name`]).
fn named_members(
    sc: &mut Scanner<'_>,
    names: &[&[u8]],
    mut on: impl FnMut(usize, Kind, &[u8]),
) -> Result<(bool, bool), SyntaxError> {
    super::model_members(sc, 2, |sc, key| {
        let at = names.iter().position(|&n| n == key);
        let start = sc.pos;
        let kind = sc.value(3)?;
        if let Some(at) = at {
            on(at, kind, &sc.text()[start..sc.pos]);
        }
        Ok(())
    })
}

/// How vLLM's `RepetitionDetectionParams` (a pydantic dataclass) refuses a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RepetitionRefusal {
    /// It takes the value.
    #[default]
    None,
    /// A validation error: neither an object nor null, a member name that is not text, a
    /// member pydantic's lax `int` refuses (null included).
    Mistyped,
    /// Its `__post_init__` raises vLLM's own error, which is no validation error.
    PostInit,
}

/// Scans `repetition_detection`: whether vLLM's `RepetitionDetectionParams` refuses it, and
/// how ([`RepetitionRefusal`]); its `__post_init__` refuses sizes below zero, the minimum size above
/// the maximum, or `min_count` below 2 once the maximum is set (the last of duplicates
/// counting).
pub(super) fn repetition_detection(
    sc: &mut Scanner<'_>,
) -> Result<(Kind, RepetitionRefusal), SyntaxError> {
    use coerce::IntValue;
    if sc.peek() != Some(b'{') {
        let kind = sc.value(2)?;
        let refusal = if kind == Kind::Null {
            RepetitionRefusal::None
        } else {
            RepetitionRefusal::Mistyped
        };
        return Ok((kind, refusal));
    }
    // Each 0 by default.
    let names: [&[u8]; 3] = [b"max_pattern_size", b"min_pattern_size", b"min_count"];
    let mut values = [IntValue::Value(0); 3];
    let (empty, unreadable) = named_members(sc, &names, |at, kind, token| {
        values[at] = coerce::int_value(kind, token);
    })?;
    let refusal = match values {
        _ if unreadable || values.contains(&IntValue::Refused) => RepetitionRefusal::Mistyped,
        [IntValue::Value(max), IntValue::Value(min), IntValue::Value(count)]
            if max < 0 || min < 0 || min > max || (max > 0 && count < 2) =>
        {
            RepetitionRefusal::PostInit
        }
        // Taken, or a value not read here: nothing is certain.
        _ => RepetitionRefusal::None,
    };
    Ok((Kind::Object { empty }, refusal))
}

/// Scans `logit_bias` at the cursor (a top-level member's value, `dict[str, float] | None`):
/// whether the last value of some key is one pydantic's lax `float` refuses (null, a list,
/// an object, or a string that spells no number).
pub(super) fn logit_bias(sc: &mut Scanner<'_>) -> Result<(Kind, bool), SyntaxError> {
    if sc.peek() != Some(b'{') {
        return Ok((sc.value(2)?, false));
    }
    // From the first refused value on, each key's last value (an earlier value cannot
    // replace a later one): whether it is refused.
    let mut last: Option<std::collections::HashMap<Vec<u8>, bool>> = None;
    let empty = sc.members(2, |sc, key| {
        let start = sc.pos;
        let kind = sc.value(3)?;
        let number = match kind {
            // An integer too large for a float is refused (`float_type`).
            Kind::Number { .. } => !coerce::overflows_float(&sc.text()[start..sc.pos]),
            Kind::NonFinite | Kind::Bool(_) => true,
            Kind::Str { .. } => {
                let raw = &sc.text()[start + 1..sc.pos - 1];
                coerce::text(&super::scan::decoded(raw)).float
            }
            _ => false,
        };
        if !number || last.is_some() {
            let key = key_bytes(sc.text(), key).into_owned();
            last.get_or_insert_default().insert(key, !number);
        }
        Ok(())
    })?;
    let any = last.is_some_and(|last| last.values().any(|&refused| refused));
    Ok((Kind::Object { empty }, any))
}
