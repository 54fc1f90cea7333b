//! Inspection: request body bytes → [`Findings`], with vLLM 0.31's exact JSON semantics.
//!
//! Pure and allocation-light: the body is decoded as Python's `json.loads(bytes)` decodes it
//! ([`decode`]), validated by a scanner with Python's grammar ([`scan`]), and only the
//! top-level members the gate and its earlier checks read are looked at. Duplicate keys:
//! the last occurrence wins, across spellings (`"mm_processor_kwar\u0067s"` is the same key).
//! Spans are reported in the client's original byte offsets so a strip can edit exactly them.

pub mod coerce;
pub mod decode;
mod plain;
pub mod python;
pub mod scan;
mod shapes;
mod unicode;
pub mod values;

use std::ops::Range;

pub use decode::Encoding;
pub use scan::{Kind, KindSet};
use scan::{Scanner, StrSpan, SyntaxError};
pub use shapes::{ChatForm, Key, Name, Object, TagValue, Tagged, CONTENTS};
pub use values::KwargValue;

/// Python's default recursion limit (1000) less the frames vLLM's request path already uses:
/// a real vLLM 0.31 server parses 970 nested containers (the top-level object counts) and
/// refuses 971, on every route.
pub const DEFAULT_MAX_DEPTH: usize = 970;

/// The two gated top-level fields, in the order vLLM checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `mm_processor_kwargs`, checked first.
    MmProcessorKwargs,
    /// `media_io_kwargs`, checked second.
    MediaIoKwargs,
}

impl Field {
    /// Both fields in vLLM's check order.
    pub const ALL: [Field; 2] = [Field::MmProcessorKwargs, Field::MediaIoKwargs];

    /// The JSON key.
    pub fn name(self) -> &'static str {
        match self {
            Field::MmProcessorKwargs => "mm_processor_kwargs",
            Field::MediaIoKwargs => "media_io_kwargs",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What the body says about one gated field (its last occurrence decides).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldFinding {
    /// The key occurs at the top level.
    pub present: bool,
    /// Kind of the last occurrence's value.
    pub kind: Option<Kind>,
    /// Top-level key names of the value when it is an object, first appearance order, deduplicated.
    pub keys: Vec<String>,
    /// For an object value: the index in `keys` of the first key (last-wins) whose value is
    /// not an object (read it with [`FieldFinding::non_object_key`]).
    pub non_object_member: Option<usize>,
    /// How many times the key occurs.
    pub occurrences: u32,
    /// For an object value: each key's value (aligned with `keys`, last duplicate wins).
    pub values: Vec<KwargValue>,
}

impl FieldFinding {
    /// Python truthiness of the value (`getattr(request, name, None)`).
    pub fn truthy(&self) -> bool {
        self.kind.is_some_and(Kind::truthy)
    }

    /// The first key (last-wins) of an object value whose value is not an object.
    pub fn non_object_key(&self) -> Option<&str> {
        self.non_object_member.map(|i| &self.keys[i][..])
    }
}

/// The value of a top-level string-typed field that an earlier vLLM check reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StrField {
    /// Not in the body.
    #[default]
    Absent,
    /// `null`.
    Null,
    /// A string (lossily decoded where it holds lone surrogates).
    Str(String),
    /// Another JSON type, of this kind (pydantic refuses it for a string field).
    Other(Kind),
}

impl StrField {
    /// Present and not null.
    pub fn is_set(&self) -> bool {
        !matches!(self, StrField::Absent | StrField::Null)
    }

    /// Whether the field is a string equal to `word`.
    pub fn is(&self, word: &str) -> bool {
        matches!(self, StrField::Str(s) if s == word)
    }
}

/// Facts about the other top-level fields that vLLM checks before the gate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// `model`.
    pub model: StrField,
    /// `messages` is present (chat form of tokenize/pooling requests).
    pub has_messages: bool,
    /// The kinds of the members that vLLM's request-model checks read ([`Read`]).
    pub read: Kinds,
    /// `input` is present (text form of pooling requests).
    pub has_input: bool,
    /// `chat_template` is present and not null.
    pub chat_template: bool,
    /// `chat_template_kwargs` is an object whose `chat_template` member is not null.
    pub chat_template_kwargs_template: bool,
    /// `tool_choice` (a string value, or `Other` for a named tool choice object).
    pub tool_choice: StrField,
    /// `tool_choice` is an object whose `type` is `"function"` (a named tool choice).
    pub named_tool_choice: bool,
    /// For an object `tool_choice`: its `function`'s `name`, if that is a non-empty string.
    tool_choice_name: Option<Vec<u8>>,
    /// `tool_choice` is an object that names no tool of the (last) `tools` list, as chat's
    /// `check_tool_usage` finds it: its `function` is no object, has no non-empty string
    /// `name`, or no tool's function has that name. (A list with a tool that no chat tool
    /// type takes is refused by its type whatever this says.)
    pub tool_choice_unmatched: bool,
    /// For an object `tool_choice`: its own `name`.
    tool_choice_own_name: shapes::NameValue,
    /// `tool_choice` is an object that names no tool of the (last) `tools` list, as the
    /// Responses API's `check_tool_usage` finds it: its `name` is falsy, or a string that
    /// is none of the names it collects ([`shapes::ToolNames`]). (A name of another kind
    /// is refused by `tool_choice`'s own type, which takes only a string.)
    pub responses_choice_unmatched: bool,
    /// `cache_salt` is neither null nor a string vLLM takes as a salt (non-empty, at most
    /// 128 characters, none of `@`, `/`, `\\` or NUL).
    pub cache_salt_refused: bool,
    /// `previous_response_id` is present and not null (Responses API).
    pub previous_response: bool,
    /// A top-level key holds a lone surrogate (pydantic refuses it as an extra field name).
    pub surrogate_key: bool,
    /// `use_beam_search` (its last occurrence) is true as pydantic reads it: `true`, `1`,
    /// `1.0`, or a string such as `"yes"`.
    pub beam_search: bool,
    /// `stream` is true as pydantic reads it.
    pub stream: bool,
    /// `echo` is true as pydantic reads it.
    pub echo: bool,
    /// `suffix` is present and not null.
    pub suffix: bool,
    /// `truncate_prompt_tokens` is present and not null.
    pub truncate_prompt_tokens: bool,
    /// The shape of `prompt` (its last occurrence).
    pub prompt: PromptForm,
    /// `prompt` is a list whose first element is a Python `int` (an integer or a boolean).
    pub prompt_first_int: bool,
    /// The signs the logprobs checks compare.
    pub signs: Signs,
    /// `n` is present, not null, and not equal to 1 as Python compares (`true` and `1.0`
    /// are; a string never is).
    pub n_not_one: bool,
    /// `response_format` is an object whose `type` is `"json_schema"` with no
    /// `json_schema` (or a null one).
    pub json_schema_missing: bool,
    /// `response_format` is an object of `type` `"text"`, `"json_object"` or
    /// `"json_schema"` whose `json_schema` is an object `JsonSchemaResponseFormat` refuses.
    pub response_format_refused: bool,
    /// How many of `structured_outputs`'s `json`, `regex` and `choice` are set (not null).
    pub structured_constraints: u8,
    /// vLLM's `StructuredOutputsParams` refuses `structured_outputs` (its last occurrence):
    /// not an object or null, a member of a type its field does not take, or not exactly
    /// one constraint set.
    pub structured_outputs_refused: bool,
    /// `logit_bias` (its last occurrence) holds a value pydantic's `float` refuses.
    pub logit_bias_refused: bool,
}

/// The shape of a completion request's `prompt` (`str | list[str] | list[int] |
/// list[list[int]]`), as far as the checks before the gate read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PromptForm {
    /// Absent, or not a string or a list.
    #[default]
    Other,
    /// A string, or a list of strings with at least one.
    Text,
    /// `[]`.
    Empty,
    /// A list of integers or of lists (token ids; inner lists are not looked into).
    Tokens,
    /// A list pydantic takes as none of the four (elements of mixed kinds).
    Mixed,
}

/// Top-level members whose kinds vLLM's request-model checks read from the raw body
/// (`data.get(name)`): the last occurrence of each, noted while the body is scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// `prompt`.
    Prompt,
    /// `prompt_embeds`.
    PromptEmbeds,
    /// `stream`.
    Stream,
    /// `stream_options`.
    StreamOptions,
    /// `continue_final_message`.
    ContinueFinalMessage,
    /// `add_generation_prompt`.
    AddGenerationPrompt,
    /// `logprob_token_ids`.
    LogprobTokenIds,
    /// `use_beam_search`.
    UseBeamSearch,
    /// `logprobs`.
    Logprobs,
    /// `prompt_logprobs`.
    PromptLogprobs,
    /// `top_logprobs`.
    TopLogprobs,
    /// `echo`.
    Echo,
    /// `max_tokens`.
    MaxTokens,
    /// `tools`.
    Tools,
    /// `background` (Responses API).
    Background,
    /// `store` (Responses API).
    Store,
}

impl Read {
    const ALL: [Read; 16] = [
        Read::Prompt,
        Read::PromptEmbeds,
        Read::Stream,
        Read::StreamOptions,
        Read::ContinueFinalMessage,
        Read::AddGenerationPrompt,
        Read::LogprobTokenIds,
        Read::UseBeamSearch,
        Read::Logprobs,
        Read::PromptLogprobs,
        Read::TopLogprobs,
        Read::Echo,
        Read::MaxTokens,
        Read::Tools,
        Read::Background,
        Read::Store,
    ];
}

/// How a raw number compares with the thresholds of vLLM's logprobs checks, which compare
/// the parsed value before validation (`True` is 1, NaN compares false).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// Exactly -1.
    MinusOne,
    /// Below zero, not -1.
    Negative,
    /// Zero (or `false`).
    Zero,
    /// Above zero (or `true`, or `Infinity`).
    Positive,
    /// `NaN`.
    NaN,
}

impl Sign {
    /// The sign of a top-level number, boolean or non-finite value from its token; `None`
    /// for other values.
    fn of(kind: Kind, token: &[u8]) -> Option<Sign> {
        match kind {
            Kind::Bool(true) => Some(Sign::Positive),
            Kind::Bool(false) | Kind::Number { zero: true } => Some(Sign::Zero),
            Kind::NonFinite => Some(match token {
                b"NaN" => Sign::NaN,
                [b'-', ..] => Sign::Negative,
                _ => Sign::Positive,
            }),
            Kind::Number { zero: false } => {
                let x: f64 = std::str::from_utf8(token).ok()?.parse().ok()?;
                Some(if x == -1.0 {
                    Sign::MinusOne
                } else if x < 0.0 {
                    Sign::Negative
                } else {
                    Sign::Positive
                })
            }
            _ => None,
        }
    }
}

/// The signs of the members vLLM's logprobs checks compare (their last occurrences).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Signs {
    /// `prompt_logprobs`.
    pub prompt_logprobs: Option<Sign>,
    /// `top_logprobs`.
    pub top_logprobs: Option<Sign>,
    /// `logprobs` (a number on completions).
    pub logprobs: Option<Sign>,
}

/// The kind of each [`Read`] member (`None`: absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kinds([Option<Kind>; Read::ALL.len()]);

impl Kinds {
    /// The kind of the member's last occurrence, if present.
    pub fn get(&self, member: Read) -> Option<Kind> {
        self.0[member as usize]
    }

    /// Sets the member's kind (`None`: absent).
    pub fn set(&mut self, member: Read, kind: Option<Kind>) {
        self.0[member as usize] = kind;
    }
}

impl Facts {
    /// `use_beam_search` is true once validated (its last occurrence).
    pub fn use_beam_search(&self) -> bool {
        self.beam_search
    }

    /// A chat template reaches vLLM with the request (refused unless the server trusts them).
    pub fn sends_chat_template(&self) -> bool {
        self.chat_template || self.chat_template_kwargs_template
    }

    /// `tools` is present and not null.
    pub fn has_tools(&self) -> bool {
        self.read.get(Read::Tools).is_some_and(|k| k != Kind::Null)
    }

    /// `tool_choice` is set to something other than `"none"`, or left out with `tools` that
    /// are not empty (`check_tool_usage` then makes it `"auto"`): refused without a tool
    /// parser, and without `tools` in any case.
    pub fn needs_tool_parser(&self) -> bool {
        match self.tool_choice {
            StrField::Absent => self.read.get(Read::Tools).is_some_and(Kind::truthy),
            ref choice => choice.is_set() && !choice.is("none"),
        }
    }
}

/// One top-level member, in original body offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// From the opening quote of the key to the end of the value.
    pub span: Range<usize>,
    /// Which gated field this member is, if any.
    pub field: Option<Field>,
    /// Where the decoded key is in [`Findings::names`] (read it with [`Findings::name`]).
    name: Range<usize>,
    /// The value's kind.
    pub kind: Kind,
    /// For an array, the kinds of its elements.
    pub elements: KindSet,
    /// For an array, how many elements it has.
    pub len: usize,
    /// For a member whose insides the request types look into ([`shapes`]): an object in
    /// it has a shape that no type its name has accepts. `messages` and `input`: an element
    /// no chat message type takes, or a conversation (a list in the list) that is empty or
    /// holds one; `tools`: an element that is no chat tool; a score input
    /// ([`CONTENTS`]): an object without a `content` list of objects.
    pub misshapen: bool,
    /// The objects of the member read as tagged types ([`Member::tagged`]).
    objects: Vec<Object>,
    /// Their keys, one object's after another's.
    keys: Vec<Key>,
    /// The kinds of the values inside the member's containers: its lists' elements (a list
    /// under `messages`, `input` and `prompt`), or its objects' member values (an object or
    /// a list of them under the score input names, [`CONTENTS`]); `NONE` for any other.
    pub nested: KindSet,
    /// For a `messages` or `input` list: whether vLLM's embeddings models move it from
    /// `input` to `messages`.
    pub chat_form: ChatForm,
    /// For an `include` list: its string elements, decoded (the Responses API's words).
    pub strings: Vec<Vec<u8>>,
    /// For a `tools` list: the names a named tool choice may name (boxed: most members
    /// have none, and a member is moved as it is collected).
    pub tool_names: Option<Box<shapes::ToolNames>>,
    /// A string or number, for what pydantic's lax mode makes of it as `bool`, `int` and
    /// `float` ([`Member::coerce`]).
    scalar: coerce::Scalar,
}

impl Member {
    /// Each object of the member read as a union of tagged types reads it: the elements of
    /// a `tools` list or an `input` list that opens with an object (the Responses API's
    /// tools and input items), an object `tool_choice` or `response_format`, and the
    /// content parts of a score input.
    pub fn tagged(&self) -> impl Iterator<Item = Tagged<'_>> {
        self.objects.iter().map(|o| o.view(&self.keys))
    }

    /// What pydantic's lax mode makes of the value as `bool`, `int` and `float` (nothing
    /// for values that are neither strings nor numbers).
    pub fn coerce(&self) -> coerce::Coerce {
        self.scalar.coerce()
    }

    /// For a string: whether it is one of `words` (a `Literal`); `None` when that is not
    /// known (a string over [`coerce::SHORT`] bytes as written, or another value).
    pub fn is_one_of(&self, words: &[&str]) -> Option<bool> {
        self.scalar.is_one_of(words)
    }

    /// For a string: whether it holds a lone surrogate (`None` when that is not known).
    pub fn lone_surrogate(&self) -> Option<bool> {
        self.scalar.lone_surrogate()
    }

    /// For a number: whether it lies within `lo..=hi` (`None` when that is not known).
    pub fn number_within(&self, lo: i128, hi: i128) -> Option<bool> {
        self.scalar.number_within(lo, hi)
    }

    /// For a string pydantic's lax `int` (`float`: `float`) reads: whether its value lies
    /// within `lo..=hi` (`None` when that is not known).
    pub fn string_within(&self, lo: i128, hi: i128, float: bool) -> Option<bool> {
        self.scalar.string_within(lo, hi, float)
    }

    /// The value as a `bool` field holds it once validated: pydantic's lax reading of a
    /// boolean, number or string, else its truthiness (a value pydantic refuses before
    /// any check reads it).
    pub fn as_bool(&self) -> bool {
        match self.kind {
            Kind::Bool(b) => b,
            kind => self.coerce().bool.unwrap_or(kind.truthy()),
        }
    }

    /// For a string of up to [`coerce::SHORT`] bytes that pydantic's lax `int` takes: the
    /// sign of its value.
    pub fn int_string_sign(&self) -> Option<Sign> {
        Some(match self.scalar.int_string_sign()? {
            -1 => Sign::MinusOne,
            -2 => Sign::Negative,
            0 => Sign::Zero,
            _ => Sign::Positive,
        })
    }
}

/// Everything inspection learned about a body that parses.
#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    /// The detected text encoding.
    pub encoding: Encoding,
    /// Findings per gated field, indexed in [`Field::ALL`] order.
    pub fields: [FieldFinding; 2],
    /// The other fields vLLM's earlier checks read.
    pub facts: Facts,
    /// The top-level members, for the strip rewrite and pydantic's type checks.
    pub members: Vec<Member>,
    /// The members' decoded keys, one after another (lossy where they hold lone
    /// surrogates): one buffer instead of a string per member.
    names: String,
}

impl Findings {
    /// The finding for one field.
    pub fn field(&self, f: Field) -> &FieldFinding {
        &self.fields[f.index()]
    }

    /// The decoded key of one of [`Findings::members`].
    pub fn name(&self, m: &Member) -> &str {
        &self.names[m.name.clone()]
    }

    /// The last occurrence of a top-level member by name.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.iter().rev().find(|m| self.name(m) == name)
    }

    /// The gated fields whose values are truthy, in vLLM's check order.
    pub fn offending(&self) -> impl Iterator<Item = Field> + '_ {
        Field::ALL.into_iter().filter(|f| self.field(*f).truthy())
    }
}

/// Why a body is not a JSON object that vLLM would parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    /// Empty body (FastAPI reports the body as missing).
    #[error("request body is empty")]
    Empty,
    /// Not decodable text.
    #[error(transparent)]
    Decode(#[from] decode::DecodeError),
    /// Not JSON as Python's `json` module parses it: its `JSONDecodeError`, with the
    /// position as Python counts it (characters of the decoded text).
    #[error("invalid JSON: {what} at character {pos} (line {line} column {column})")]
    Json {
        /// Python's message (`"Expecting value"`, `"Extra data"`, ...).
        what: &'static str,
        /// Characters before the error.
        pos: usize,
        /// Python's line number (1-based).
        line: usize,
        /// Python's column number (1-based).
        column: usize,
    },
    /// Not JSON as Python parses it, for a reason other than its syntax (nesting too deep,
    /// an integer too long): Python raises something other than `JSONDecodeError`.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// Valid JSON, but the top-level value is not an object.
    #[error("the top-level JSON value is {type_name}, not an object")]
    NotObject {
        /// The value's JSON type.
        type_name: &'static str,
        /// The value as vLLM's validation error shows it (its Python `str()`, cut to 200
        /// characters; `None` where mmgate cannot be sure of it).
        input: Option<String>,
        /// Its Python type's name (`NoneType`, `bool`, `int`, `float`, `str`, `list`).
        python_type: &'static str,
        /// Whether `"requestType" in value` may be true (SageMaker's session layer asks):
        /// a string that holds it, or a list that may hold it.
        may_hold_request_type: bool,
    },
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
            input: python::shown(kind, literal, len),
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
        let scalar = coerce::Scalar::new(kind, &sc.text()[value_start..sc.pos]);
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
            objects: shape.objects,
            keys: shape.keys,
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
    for m in &mut members {
        m.span = decoded.original_offset(m.span.start)..decoded.original_offset(m.span.end);
    }
    let names = names_text(names);
    Ok(Findings {
        encoding: decoded.encoding,
        fields,
        facts,
        members,
        names,
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
    // In first-appearance order, last value wins; keys compare as decoded (WTF-8) bytes, so
    // two distinct lone surrogates stay two keys, as in Python.
    // Each key's decoded bytes (what duplicates compare) with whether its value is an object.
    let (mut raw, mut keys, mut values): (Vec<(_, bool)>, _, _) =
        (Vec::new(), Vec::new(), Vec::new());
    let empty = sc.members(2, |sc, key| {
        let name = key_bytes(sc.text(), key);
        let (kind, value) = values::scan_value(sc, 3, true)?;
        let is_object = matches!(kind, Kind::Object { .. });
        match raw.iter().position(|(k, _)| *k == name) {
            Some(i) => (raw[i].1, values[i]) = (is_object, value),
            None => {
                keys.push(lossy(&name));
                raw.push((name, is_object));
                values.push(value);
            }
        }
        Ok(())
    })?;
    Ok(FieldFinding {
        present: true,
        kind: Some(Kind::Object { empty }),
        non_object_member: raw.iter().position(|(_, object)| !object),
        keys,
        occurrences: 0,
        values,
    })
}

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
            facts.named_tool_choice = object.view(&shape.keys).is(b"function");
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
            let format = object.view(&shape.keys);
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
        b"response_format" => {
            facts.json_schema_missing = false;
            facts.response_format_refused = false;
            sc.value(2)?
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
    let (mut texts, mut lists, mut first) = (true, true, true);
    *first_int = false;
    let empty = sc.elements(2, |sc| {
        let start = sc.pos;
        let kind = sc.value(3)?;
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
    // Booleans, and numbers and strings that pydantic's `int` takes (no `NOT_INT`).
    let ints = sc
        .inner()
        .within(KindSet::BOOL.or(KindSet::NUMBER).or(KindSet::STR));
    let form = match (empty, texts, ints || lists) {
        (true, _, _) => PromptForm::Empty,
        (false, true, _) => PromptForm::Text,
        (false, false, true) => PromptForm::Tokens,
        (false, false, false) => PromptForm::Mixed,
    };
    Ok((form, Kind::Array { empty }))
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
