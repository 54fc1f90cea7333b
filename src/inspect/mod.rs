//! Inspection: request body bytes → [`Findings`], with vLLM 0.31's exact JSON semantics.
//!
//! Pure and allocation-light: the body is decoded as Python's `json.loads(bytes)` decodes it
//! ([`decode`]), validated by a scanner with Python's grammar ([`scan`]), and only the
//! top-level members the gate and its earlier checks read are looked at. Duplicate keys:
//! the last occurrence wins, across spellings (`"mm_processor_kwar\u0067s"` is the same key).
//! Spans are reported in the client's original byte offsets so a strip can edit exactly them.
//! This module is the walk; the types of what it finds are in `findings.rs`.

pub mod coerce;
pub mod decode;
mod distinct;
mod findings;
mod message;
mod plain;
pub mod python;
pub mod scan;
mod shapes;
mod tagged;
mod unicode;
pub mod values;

pub use decode::Encoding;
pub use findings::{
    Facts, Field, FieldFinding, Findings, InspectError, Kinds, Member, PromptForm, Read, Sign,
    Signs, StrField, INVOCATIONS_MAX_DEPTH, RENDER_MAX_DEPTH, SERVE_MAX_DEPTH,
};
pub use scan::{Kind, KindSet};
use scan::{Scanner, StrSpan, SyntaxError};
pub use shapes::{ChatForm, RepetitionRefusal, CONTENTS};
pub use tagged::{Key, List, Name, Object, Parts, TagValue, Tagged};
pub use values::KwargValue;

/// The most members mmgate reads in the top-level object, duplicates included. Each is
/// recorded, so this bounds what inspecting a body can take (tens of megabytes of keys
/// would otherwise take many times their size); real requests hold a few dozen. (What is
/// recorded inside members is bounded by [`scan::MAX_RECORDED`].)
pub const MAX_MEMBERS: usize = 10_000;

/// Refuses a member at `key` when `read` members of its object were read already.
fn within_members(read: usize, key: scan::StrSpan) -> Result<(), SyntaxError> {
    if read < MAX_MEMBERS {
        return Ok(());
    }
    Err(SyntaxError::TooManyMembers {
        offset: key.start - 1,
        limit: MAX_MEMBERS,
        scope: "in the top-level object",
    })
}

/// Inspects a body: decodes, validates and extracts the findings.
pub fn inspect(body: &[u8], max_depth: usize) -> Result<Findings, InspectError> {
    if body.is_empty() {
        return Err(InspectError::Empty);
    }
    let decoded = decode::decode(body)?;
    findings(&decoded, max_depth).map_err(|e| match e {
        // Python decodes the whole body before it parses: an undecodable byte anywhere wins
        // over a syntax error (the scanner validated everything before the error).
        InspectError::Syntax(SyntaxError::NotText { offset }) => {
            decoded.undecodable_at(offset).into()
        }
        InspectError::Syntax(e) => match (decoded.first_undecodable(e.offset()), e) {
            (Some(d), _) => d.into(),
            (None, SyntaxError::Invalid { offset, what }) => {
                json_error(&decoded.text, offset, what)
            }
            (None, e) => e.into(),
        },
        other => other,
    })
}

/// Whether a body that parses nests no container deeper than `max_depth` (constants not
/// counted, as Python's JSON encoder counts): the nesting error at the first one if it does.
pub fn containers_within(body: &[u8], max_depth: usize) -> Result<(), InspectError> {
    let decoded = decode::decode(body)?;
    let mut sc = Scanner::new(&decoded.text, max_depth).containers_only();
    sc.ws();
    sc.value(1)?;
    Ok(())
}

/// Python's `JSONDecodeError` for `what` at byte `offset` of the decoded text: positions
/// in characters (each starts with a non-continuation byte, a lone surrogate included).
fn json_error(text: &[u8], offset: usize, what: &'static str) -> InspectError {
    let before = &text[..offset];
    let chars = |b: &[u8]| b.iter().filter(|&&c| c & 0xC0 != 0x80).count();
    let line_start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    InspectError::Json {
        what,
        pos: chars(before),
        line: 1 + memchr::memchr_iter(b'\n', before).count(),
        column: 1 + chars(&before[line_start..]),
    }
}

/// The findings of a decoded body (its UTF-8 validated as it is scanned).
fn findings(decoded: &decode::Decoded<'_>, max_depth: usize) -> Result<Findings, InspectError> {
    let mut sc = Scanner::new(&decoded.text, max_depth);
    sc.ws();
    let mut fields: [FieldFinding; 2] = Default::default();
    let mut facts = Facts::default();
    // Most requests have a handful of top-level members: one allocation for them, and one
    // for their names.
    let mut members = Vec::with_capacity(16);
    let mut names = Vec::with_capacity(256);
    if sc.peek() != Some(b'{') {
        let start = sc.pos;
        let kind = sc.value(1)?;
        let (end, len) = (sc.pos, sc.inner_len());
        trailing(&mut sc)?;
        let literal = &decoded.text[start..end];
        return Err(InspectError::NotObject {
            type_name: kind.type_name(),
            // Never an object here.
            input: python::shown(kind, literal, len).unwrap_or_default(),
            python_type: python::type_name(kind, literal),
            may_hold_request_type: match kind {
                Kind::Str { .. } => memchr::memmem::find(
                    &scan::decoded(&literal[1..literal.len() - 1]),
                    b"requestType",
                )
                .is_some(),
                Kind::Array { .. } => {
                    memchr::memmem::find(literal, b"requestType").is_some()
                        || literal.contains(&b'\\')
                }
                _ => false,
            },
        });
    }
    sc.members(1, |sc, key| {
        within_members(members.len(), key)?;
        let start = key.start - 1;
        let name = key_bytes(sc.text(), key);
        let at = names.len();
        if has_surrogate(&name) {
            facts.surrogate_key = true;
            names.extend_from_slice(String::from_utf8_lossy(&name).as_bytes());
        } else {
            names.extend_from_slice(&name);
        }
        let field = match &name[..] {
            b"mm_processor_kwargs" => Some(Field::MmProcessorKwargs),
            b"media_io_kwargs" => Some(Field::MediaIoKwargs),
            _ => None,
        };
        let value_start = sc.pos;
        let mut shape = shapes::Shape::default();
        let kind = match field {
            Some(f) => {
                let finding = &mut fields[f.index()];
                let occurrences = finding.occurrences + 1;
                *finding = field_value(sc)?;
                finding.occurrences = occurrences;
                finding.kind.unwrap_or(Kind::Null)
            }
            None => match shapes::walk(sc, &name, &mut shape)? {
                Some(kind) => {
                    note_read(&name, kind, &mut facts);
                    kind
                }
                None => fact_value(sc, &name, &mut facts, &mut shape)?,
            },
        };
        let (elements, len) = match kind {
            Kind::Array { .. } => (sc.inner(), sc.inner_len()),
            _ => (KindSet::NONE, 0),
        };
        let scalar = coerce::Scalar::new(kind, &sc.text()[value_start..sc.pos], sc.surrogate());
        let on = || kind == Kind::Bool(true) || scalar.coerce().bool == Some(true);
        match &name[..] {
            b"use_beam_search" => facts.beam_search = on(),
            b"n" => {
                let one = kind == Kind::Bool(true) || scalar.number_within(1, 1) == Some(true);
                facts.n_not_one = kind != Kind::Null && !one;
            }
            b"stream" => facts.stream = on(),
            b"echo" => facts.echo = on(),
            b"suffix" => facts.suffix = kind != Kind::Null,
            b"truncate_prompt_tokens" => facts.truncate_prompt_tokens = kind != Kind::Null,
            b"prompt_logprobs" | b"top_logprobs" | b"logprobs" => {
                let sign = Sign::of(kind, &sc.text()[value_start..sc.pos]);
                match &name[..] {
                    b"prompt_logprobs" => facts.signs.prompt_logprobs = sign,
                    b"top_logprobs" => facts.signs.top_logprobs = sign,
                    _ => facts.signs.logprobs = sign,
                }
            }
            _ => {}
        }
        members.push(Member {
            span: start..sc.pos,
            field,
            name: at..names.len(),
            kind,
            elements,
            len,
            misshapen: shape.misshapen,
            misshapen_chat: shape.misshapen_chat,
            chat_raises: shape.chat_raises,
            objects: shape.objects,
            keys: shape.keys,
            parts: shape.parts,
            strings: shape.strings,
            tool_names: shape.tool_names.any().then(|| Box::new(shape.tool_names)),
            nested: shape.nested,
            chat_form: shape.chat_form,
            scalar,
        });
        Ok(())
    })?;
    trailing(&mut sc)?;
    if let StrField::Other(Kind::Object { .. }) = facts.tool_choice {
        let tools = members
            .iter()
            .rev()
            .find(|m| &names[m.name.clone()] == b"tools");
        let tool_names = tools.and_then(|t| t.tool_names.as_deref());
        match_tool_choice(&mut facts, tool_names);
    }
    // Members come in order: one pass maps their spans (UTF-16/32 bodies count characters).
    let mut offsets = decoded.offsets();
    for m in &mut members {
        m.span = offsets.map(m.span.start)..offsets.map(m.span.end);
    }
    let names = names_text(names);
    Ok(Findings {
        encoding: decoded.encoding,
        fields,
        facts,
        members,
        names,
        deepest: sc.deepest(),
    })
}

fn trailing(sc: &mut Scanner<'_>) -> Result<(), SyntaxError> {
    sc.ws();
    if sc.pos != sc.text().len() {
        return Err(SyntaxError::Invalid {
            offset: sc.pos,
            what: "Extra data",
        });
    }
    Ok(())
}

fn key_bytes(text: &[u8], key: StrSpan) -> std::borrow::Cow<'_, [u8]> {
    let raw = &text[key.start..key.end];
    if key.escaped {
        std::borrow::Cow::Owned(scan::unescape(raw))
    } else {
        std::borrow::Cow::Borrowed(raw)
    }
}

/// Notes whether an object `tool_choice` names none of the tools, as chat's and the
/// Responses API's `check_tool_usage` each find it.
fn match_tool_choice(facts: &mut Facts, tools: Option<&shapes::ToolNames>) {
    let chat = facts.tool_choice_name.as_ref();
    facts.tool_choice_unmatched = !chat.is_some_and(|n| tools.is_some_and(|t| t.chat.contains(n)));
    facts.responses_choice_unmatched = match &facts.tool_choice_own_name {
        shapes::NameValue::None => true,
        shapes::NameValue::Text(name) => {
            name.is_empty() || !tools.is_some_and(|t| t.responses_any || t.responses.contains(name))
        }
        shapes::NameValue::Other(truthy) => !truthy,
    };
}

/// Whether a member name (decoded) holds a lone surrogate, which pydantic cannot read as
/// text: a model, a `TypedDict` or a dataclass refuses the object (`string_unicode`); a
/// `dict[str, ...]` takes it.
fn unreadable_name(name: &[u8]) -> bool {
    name.contains(&0xED) && has_surrogate(name)
}

/// Walks the members of the object at the cursor (at `depth`) as a model reads them:
/// `on` gets each decoded name and must consume the value. Whether the object is empty,
/// and whether one of its names is not text ([`unreadable_name`]).
fn model_members<F>(
    sc: &mut Scanner<'_>,
    depth: usize,
    mut on: F,
) -> Result<(bool, bool), SyntaxError>
where
    F: FnMut(&mut Scanner<'_>, &[u8]) -> Result<(), SyntaxError>,
{
    let mut unreadable = false;
    let empty = sc.members(depth, |sc, key| {
        let key = key_bytes(sc.text(), key);
        unreadable |= unreadable_name(&key);
        on(sc, &key)
    })?;
    Ok((empty, unreadable))
}

/// Whether WTF-8 text holds a surrogate code point (`ED A0..BF ..`).
fn has_surrogate(text: &[u8]) -> bool {
    memchr::memchr_iter(0xED, text)
        .any(|i| text.get(i + 1).is_some_and(|b| (0xA0..=0xBF).contains(b)))
}

/// The member names as text. The scanner validated the body as WTF-8 and names with a
/// surrogate went in lossily, so this is one UTF-8 check. It stays total all the same: a stray
/// byte would become `?`, which keeps every name's range on its character boundaries.
fn names_text(names: Vec<u8>) -> String {
    String::from_utf8(names).unwrap_or_else(|e| {
        let mut text = String::with_capacity(e.as_bytes().len());
        for chunk in e.as_bytes().utf8_chunks() {
            text.push_str(chunk.valid());
            text.extend(std::iter::repeat_n('?', chunk.invalid().len()));
        }
        text
    })
}

/// WTF-8 text as a `String`, each byte of a surrogate replaced by U+FFFD. Text without
/// surrogates is valid UTF-8 (the scanner validated it), so that check is the fast one.
fn lossy(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Scans a gated field's value: its kind, and for objects the member keys and which
/// members are not objects (the `dict[str, dict]` check of `media_io_kwargs`).
fn field_value(sc: &mut Scanner<'_>) -> Result<FieldFinding, SyntaxError> {
    if sc.peek() != Some(b'{') {
        let kind = sc.value(2)?;
        return Ok(FieldFinding {
            present: true,
            kind: Some(kind),
            ..Default::default()
        });
    }
    // In first-appearance order, last value wins (`distinct`), with whether each value is
    // an object.
    let mut distinct = distinct::Distinct::default();
    let (mut keys, mut objects, mut values) = (Vec::new(), Vec::new(), Vec::new());
    let empty = sc.members(2, |sc, key| {
        sc.record()?;
        let name = key_bytes(sc.text(), key);
        let (kind, value) = values::scan_value(sc, 3, true)?;
        let is_object = matches!(kind, Kind::Object { .. });
        match distinct.place(name.clone()) {
            (i, false) => (objects[i], values[i]) = (is_object, value),
            (_, true) => {
                keys.push(lossy(&name));
                objects.push(is_object);
                values.push(value);
            }
        }
        Ok(())
    })?;
    Ok(FieldFinding {
        present: true,
        kind: Some(Kind::Object { empty }),
        non_object_member: objects.iter().position(|object| !object),
        keys,
        occurrences: 0,
        values,
    })
}

/// The most distinct keys of an object whose values' kinds [`dict_value`] tells: beyond
/// them, keeping every key to find the last of duplicates would take more memory than the
/// check is worth.
const DICT_KEYS: usize = 1024;

/// Scans a top-level object read for no fact, putting its values' kinds into `nested` as
/// `json.loads` leaves them (of duplicate keys, the last one's), for a `dict[str, V]`
/// field; with more than [`DICT_KEYS`] distinct keys, none (nothing is refused for them).
fn dict_value(sc: &mut Scanner<'_>, nested: &mut KindSet) -> Result<Kind, SyntaxError> {
    let mut distinct = distinct::Distinct::default();
    let mut last: Vec<KindSet> = Vec::new();
    let mut known = true;
    let empty = sc.members(2, |sc, key| {
        let start = sc.pos;
        let kind = sc.value(3)?;
        if known {
            let mut kinds = sc.kinds(kind, start);
            // A list value's elements: `vllm_xargs` takes lists of strings and numbers (a
            // bool is an int) only, and no field takes a list as an object; so a list of
            // anything else is marked as an object too, which no list-taking type takes.
            let scalars = KindSet::BOOL
                .or(KindSet::NUMBER)
                .or(KindSet::NON_FINITE)
                .or(KindSet::STR)
                .or(KindSet::NOT_INT)
                .or(KindSet::NOT_FLOAT);
            if matches!(kind, Kind::Array { .. }) && !sc.inner().within(scalars) {
                kinds = kinds.or(KindSet::OBJECT);
            }
            match distinct.place(key_bytes(sc.text(), key)) {
                (i, false) => last[i] = kinds,
                (_, true) if last.len() < DICT_KEYS => last.push(kinds),
                (_, true) => known = false,
            }
        }
        Ok(())
    })?;
    if known {
        *nested = last.iter().fold(KindSet::NONE, |all, k| all.or(*k));
    }
    Ok(Kind::Object { empty })
}

/// The top-level members whose type is one model (no union), read as a tagged object and
/// the objects in its members as its parts: `StreamOptions`, and the Responses API's
/// `ResponseTextConfig`, `Reasoning` and `ResponsePrompt`.
pub const MODELS: [&[u8]; 4] = [b"stream_options", b"text", b"reasoning", b"prompt"];

/// Scans a non-gated top-level value, recording what the earlier checks read. An object
/// `tool_choice` is added to `shape.tagged`, for the Responses API's tool-choice types; a
/// `prompt` list's lists' element kinds go into `shape.nested`.
fn fact_value(
    sc: &mut Scanner<'_>,
    name: &[u8],
    facts: &mut Facts,
    shape: &mut shapes::Shape,
) -> Result<Kind, SyntaxError> {
    let kind = match name {
        b"model" => {
            let (v, kind) = str_value(sc)?;
            facts.model = v;
            kind
        }
        b"tool_choice" if sc.peek() == Some(b'{') => {
            // `tool_choice.get("type") == "function"` (the last `type`).
            let shapes::ToolChoice {
                kind,
                object,
                function_name,
                name,
            } = shapes::tool_choice(sc, shape)?;
            facts.named_tool_choice = object.view(&shape.keys, Parts::none()).is(b"function");
            facts.tool_choice_name = function_name;
            facts.tool_choice_own_name = name;
            facts.tool_choice = StrField::Other(kind);
            shape.objects.push(object);
            kind
        }
        b"tool_choice" => {
            let (v, kind) = str_value(sc)?;
            facts.tool_choice = v;
            facts.named_tool_choice = false;
            facts.tool_choice_name = None;
            facts.tool_choice_own_name = shapes::NameValue::None;
            kind
        }
        b"cache_salt" => {
            let (refused, kind) = cache_salt(sc)?;
            facts.cache_salt_refused = refused;
            kind
        }
        b"prompt" if sc.peek() == Some(b'[') => {
            let (form, kind) = prompt_list(sc, &mut shape.nested, &mut facts.prompt_first_int)?;
            facts.prompt = form;
            kind
        }
        // `validate_response_format` and `check_structured_outputs_count` read these.
        b"response_format" if sc.peek() == Some(b'{') => {
            // Also read as the tagged union of response formats it is.
            let (kind, object, schema_refused) = shapes::response_format(sc, shape)?;
            let format = object.view(&shape.keys, Parts::none());
            let schema = format
                .get(b"json_schema")
                .is_some_and(|k| k.kind != Kind::Null);
            facts.json_schema_missing = format.is(b"json_schema") && !schema;
            // `ResponseFormat`, the only format of these words, validates its `json_schema`.
            facts.response_format_refused = schema_refused
                && [&b"text"[..], b"json_object", b"json_schema"]
                    .iter()
                    .any(|&w| format.is(w));
            shape.objects.push(object);
            kind
        }
        // [`MODELS`], spelled out: one decision with the other names.
        b"stream_options" | b"text" | b"reasoning" | b"prompt" if sc.peek() == Some(b'{') => {
            let seen = tagged::Reader::with_parts(&mut shape.keys, &mut shape.parts).lenient();
            let (kind, object) = seen.object(sc, 2)?;
            shape.objects.push(object);
            kind
        }
        b"response_format" => {
            facts.json_schema_missing = false;
            facts.response_format_refused = false;
            sc.value(2)?
        }
        b"repetition_detection" => {
            let (kind, refusal) = shapes::repetition_detection(sc)?;
            facts.repetition_detection = refusal;
            kind
        }
        b"logit_bias" => {
            let (kind, refused) = shapes::logit_bias(sc)?;
            facts.logit_bias_refused = refused;
            kind
        }
        b"structured_outputs" => {
            let (kind, read) = shapes::structured_outputs(sc)?;
            facts.structured_constraints = read.constraints;
            facts.structured_outputs_refused = read.refused;
            kind
        }
        b"chat_template_kwargs" if sc.peek() == Some(b'{') => {
            let mut template = false;
            let empty = sc.members(2, |sc, key| {
                let is_template = &key_bytes(sc.text(), key)[..] == b"chat_template";
                let kind = sc.value(3)?;
                if is_template {
                    template = kind != Kind::Null;
                }
                Ok(())
            })?;
            facts.chat_template_kwargs_template = template;
            Kind::Object { empty }
        }
        _ if sc.peek() == Some(b'{') => dict_value(sc, &mut shape.nested)?,
        _ => sc.value(2)?,
    };
    note_read(name, kind, facts);
    Ok(kind)
}

/// Notes a top-level member's kind where vLLM's checks read it: the facts, and the kinds the
/// request models' checks read (one match per member).
fn note_read(name: &[u8], kind: Kind, facts: &mut Facts) {
    let read = match name {
        b"messages" => {
            facts.has_messages = true;
            None
        }
        b"input" => {
            facts.has_input = true;
            None
        }
        b"chat_template" => {
            facts.chat_template = kind != Kind::Null;
            None
        }
        b"use_beam_search" => Some(Read::UseBeamSearch),
        b"tools" => Some(Read::Tools),
        b"background" => Some(Read::Background),
        b"store" => Some(Read::Store),
        b"previous_response_id" => {
            facts.previous_response = kind != Kind::Null;
            None
        }
        b"chat_template_kwargs" => {
            if !matches!(kind, Kind::Object { .. }) {
                facts.chat_template_kwargs_template = false;
            }
            None
        }
        b"prompt" => {
            match kind {
                Kind::Str { .. } => facts.prompt = PromptForm::Text,
                Kind::Array { .. } => {}
                _ => facts.prompt = PromptForm::Other,
            }
            Some(Read::Prompt)
        }
        b"prompt_embeds" => Some(Read::PromptEmbeds),
        b"stream" => Some(Read::Stream),
        b"stream_options" => Some(Read::StreamOptions),
        b"continue_final_message" => Some(Read::ContinueFinalMessage),
        b"add_generation_prompt" => Some(Read::AddGenerationPrompt),
        b"logprob_token_ids" => Some(Read::LogprobTokenIds),
        b"logprobs" => Some(Read::Logprobs),
        b"prompt_logprobs" => Some(Read::PromptLogprobs),
        b"top_logprobs" => Some(Read::TopLogprobs),
        b"echo" => Some(Read::Echo),
        b"max_tokens" => Some(Read::MaxTokens),
        _ => None,
    };
    if let Some(read) = read {
        facts.read.0[read as usize] = Some(kind);
    }
}

/// Scans a `prompt` list: which of pydantic's list types its elements fit (and the kinds of
/// its lists' elements, into `nested`).
fn prompt_list(
    sc: &mut Scanner<'_>,
    nested: &mut KindSet,
    first_int: &mut bool,
) -> Result<(PromptForm, Kind), SyntaxError> {
    let (mut texts, mut lists, mut first, mut negative) = (true, true, true, false);
    *first_int = false;
    let empty = sc.elements(2, |sc| {
        let start = sc.pos;
        let kind = if sc.peek() == Some(b'[') {
            // An inner list of token ids: each is bounded too.
            let empty = sc.elements(3, |sc| {
                let start = sc.pos;
                let kind = sc.value(4)?;
                negative |= below_zero(kind, &sc.text()[start..sc.pos]);
                Ok(kind)
            })?;
            Kind::Array { empty }
        } else {
            let kind = sc.value(3)?;
            negative |= below_zero(kind, &sc.text()[start..sc.pos]);
            kind
        };
        if std::mem::take(&mut first) {
            // A Python `int` (a `bool` is one too): an integer literal, not `1.0`.
            let literal = &sc.text()[start..sc.pos];
            *first_int = matches!(kind, Kind::Bool(_))
                || (matches!(kind, Kind::Number { .. })
                    && !literal.iter().any(|b| matches!(b, b'.' | b'e' | b'E')));
        }
        texts &= matches!(kind, Kind::Str { .. });
        lists &= matches!(kind, Kind::Array { .. });
        if lists {
            *nested = nested.or(sc.inner());
        }
        Ok(kind)
    })?;
    // Booleans, and numbers and strings that pydantic's `int` takes (no `NOT_INT`; an
    // integer too large for a float is still an int).
    let ints = sc.inner().within(
        KindSet::BOOL
            .or(KindSet::NUMBER)
            .or(KindSet::STR)
            .or(KindSet::NOT_FLOAT),
    );
    let form = match (empty, texts, ints || lists) {
        (true, _, _) => PromptForm::Empty,
        (false, true, _) => PromptForm::Text,
        // A token id below zero: `ge=0` refuses it (`/tokenize` reads no token list).
        (false, false, true) if negative => PromptForm::Mixed,
        (false, false, true) => PromptForm::Tokens,
        (false, false, false) => PromptForm::Mixed,
    };
    Ok((form, Kind::Array { empty }))
}

/// Whether a list element is certainly refused by `Annotated[int, Field(ge=0)]` for being
/// below zero or no integer: a number, or a string (ASCII white space around it), that
/// starts with `-` and has a digit other than 0 before any exponent. (A negative number
/// that is no integer is refused as well, just for another reason.)
fn below_zero(kind: Kind, token: &[u8]) -> bool {
    let decoded;
    let text = match kind {
        Kind::Number { .. } => token,
        Kind::Str { .. } => {
            let raw = token[1..token.len() - 1].trim_ascii_start();
            // Most are words: decoded only when a sign or an escape comes first.
            if !matches!(raw.first(), Some(b'-' | b'\\')) {
                return false;
            }
            decoded = scan::decoded(raw);
            decoded.trim_ascii()
        }
        _ => return false,
    };
    text.first() == Some(&b'-')
        && text
            .iter()
            .take_while(|b| !matches!(b, b'e' | b'E'))
            .any(|b| matches!(b, b'1'..=b'9'))
}

/// Scans `cache_salt`: whether vLLM's `validate_cache_salt` refuses it (anything but null
/// or a non-empty string of at most 128 characters without `@`, `/`, `\\` or NUL).
fn cache_salt(sc: &mut Scanner<'_>) -> Result<(bool, Kind), SyntaxError> {
    if sc.peek() != Some(b'"') {
        let kind = sc.value(2)?;
        return Ok((kind != Kind::Null, kind));
    }
    let s = sc.string()?;
    let text = key_bytes(sc.text(), s);
    // WTF-8: one character per byte that does not continue one (a lone surrogate is one).
    let chars = text.iter().filter(|&&b| b & 0xC0 != 0x80).count();
    let forbidden = text.iter().any(|b| matches!(b, b'@' | b'/' | b'\\' | 0));
    let refused = chars == 0 || chars > 128 || forbidden;
    Ok((refused, Kind::Str { empty: chars == 0 }))
}

fn str_value(sc: &mut Scanner<'_>) -> Result<(StrField, Kind), SyntaxError> {
    if sc.peek() == Some(b'"') {
        let s = sc.string()?;
        let kind = Kind::Str {
            empty: s.start == s.end,
        };
        return Ok((StrField::Str(lossy(&key_bytes(sc.text(), s))), kind));
    }
    let kind = sc.value(2)?;
    Ok(match kind {
        Kind::Null => (StrField::Null, kind),
        other => (StrField::Other(other), kind),
    })
}

#[cfg(test)]
mod tests;
