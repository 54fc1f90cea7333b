//! What inspection finds: the gated fields, the facts vLLM's earlier checks read, the
//! top-level members and why a body is refused. Built by the walk in [`super`].

use std::ops::Range;

use super::coerce;
use super::decode::{self, Encoding};
use super::scan::{Kind, KindSet, SyntaxError};
use super::shapes::{self, ChatForm};
use super::tagged::{Key, Object, Parts, Tagged};
use super::values::KwargValue;

/// Python's default recursion limit (1000) less the frames vLLM's request path already uses:
/// a real vLLM 0.31 render server (`vllm launch render`) parses 970 nested containers (the
/// top-level object counts) and refuses 971, on every route.
pub const RENDER_MAX_DEPTH: usize = 970;

/// The same for `vllm serve` (generating or pooling), whose request path runs two frames
/// deeper: 968 nested containers parse and 969 are refused, on every route.
pub const SERVE_MAX_DEPTH: usize = 968;

/// `/invocations` on `vllm serve`, which parses the body with its own `json.loads` from a
/// deeper frame: 965 levels parse (`NaN` and the infinities take one, as everywhere), 966
/// are refused; and vLLM's encoding of the parsed body again takes only 964 containers
/// (it counts no constant). Each is a `RecursionError`, answered with a 500.
pub const INVOCATIONS_MAX_DEPTH: usize = 965;

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

    pub(super) fn index(self) -> usize {
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
    pub(super) tool_choice_name: Option<Vec<u8>>,
    /// `tool_choice` is an object that names no tool of the (last) `tools` list, as chat's
    /// `check_tool_usage` finds it: its `function` is no object, has no non-empty string
    /// `name`, or no tool's function has that name. (A list with a tool that no chat tool
    /// type takes is refused by its type whatever this says.)
    pub tool_choice_unmatched: bool,
    /// For an object `tool_choice`: its own `name`.
    pub(super) tool_choice_own_name: shapes::NameValue,
    /// `tool_choice` is an object that names no tool of the (last) `tools` list, as the
    /// Responses API's `check_tool_usage` finds it: its `name` is falsy, or a string that
    /// is none of the names it collects (`shapes::ToolNames`). (A name of another kind
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
    /// Whether and how `RepetitionDetectionParams` refuses the (last)
    /// `repetition_detection`.
    pub repetition_detection: super::RepetitionRefusal,
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
    /// A list pydantic takes as none of the four (elements of mixed kinds, or a token id
    /// below zero, which `list[Annotated[int, Field(ge=0)]]` refuses).
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
    pub(super) fn of(kind: Kind, token: &[u8]) -> Option<Sign> {
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
pub struct Kinds(pub(super) [Option<Kind>; Read::ALL.len()]);

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
    pub(super) name: Range<usize>,
    /// The value's kind.
    pub kind: Kind,
    /// For an array, the kinds of its elements.
    pub elements: KindSet,
    /// For an array, how many elements it has.
    pub len: usize,
    /// For a member whose insides the request types look into (`shapes`): an object in
    /// it has a shape that no type its name has accepts. `messages` and `input`: an element
    /// no chat message type takes, or a conversation (a list in the list) that is empty or
    /// holds one; `tools`: an element that is no chat tool; a score input
    /// ([`CONTENTS`](super::CONTENTS)): an object without a `content` list of objects.
    pub misshapen: bool,
    /// For `messages`: an element that no message type takes after the chat request's
    /// validators (`ChatCompletionRequest`'s), as [`Member::misshapen`] says of other
    /// requests' validation; for a list of conversations, such an element in the first
    /// one (which the batch route rebuilds as a chat request).
    pub misshapen_chat: bool,
    /// For `messages`: the chat request's before-validators raise a `TypeError` on an
    /// element ([`message`](super::message)'s `Fits::raises`), not a validation error.
    pub chat_raises: bool,
    /// The objects of the member read as tagged types ([`Member::tagged`]).
    pub(super) objects: Vec<Object>,
    /// Their keys, one object's after another's.
    pub(super) keys: Vec<Key>,
    /// The objects in their lists and object members, where those were read (the Responses
    /// API's input items, the tools, and the one-model members, [`super::MODELS`]).
    pub(super) parts: Option<Box<Parts>>,
    /// The kinds of the values inside the member's containers: its lists' elements (a list
    /// under `messages`, `input` and `prompt`), or its objects' member values (an object or
    /// a list of them under the score input names, [`CONTENTS`](super::CONTENTS)), or an
    /// object's member values (any other object but the gated fields' and those read for
    /// facts); `NONE` for any other.
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
    pub(super) scalar: coerce::Scalar,
}

impl Member {
    /// Each object of the member read as a union of tagged types reads it: the elements of
    /// a `tools` list or an `input` list that opens with an object (the Responses API's
    /// tools and input items), an object `tool_choice` or `response_format`, and the
    /// content parts of a score input.
    pub fn tagged(&self) -> impl Iterator<Item = Tagged<'_>> {
        let parts = self.parts.as_deref().unwrap_or(Parts::none());
        self.objects.iter().map(move |o| o.view(&self.keys, parts))
    }

    /// What pydantic's lax mode makes of the value as `bool`, `int` and `float` (nothing
    /// for values that are neither strings nor numbers).
    pub fn coerce(&self) -> coerce::Coerce {
        self.scalar.coerce()
    }

    /// For a string: whether it is one of `words` (a `Literal`); `None` for another value.
    pub fn is_one_of(&self, words: &[&str]) -> Option<bool> {
        self.scalar.is_one_of(words)
    }

    /// For a string: whether it holds a lone surrogate (`None` for another value).
    pub fn lone_surrogate(&self) -> Option<bool> {
        self.scalar.lone_surrogate()
    }

    /// For a number: whether it lies within `lo..=hi` (`None` for another value).
    pub fn number_within(&self, lo: i128, hi: i128) -> Option<bool> {
        self.scalar.number_within(lo, hi)
    }

    /// For a number: whether `json.loads` makes it a Python `int` (written without fraction
    /// or exponent); `None` for another value.
    pub fn json_int(&self) -> Option<bool> {
        self.scalar.json_int()
    }

    /// For a string pydantic's lax `int` (`float`: `float`) reads: whether its value lies
    /// within `lo..=hi` (`None` for another value).
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

    /// For a string that pydantic's lax `int` takes: the sign of its value.
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
    pub(super) names: String,
    /// The level of the deepest container (the top-level object is 1; `NaN` and the
    /// infinities not counted).
    pub deepest: usize,
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
        /// The value as vLLM's validation error shows it: the `repr()` of its Python
        /// `str()` cut to 200 characters.
        input: String,
        /// Its Python type's name (`NoneType`, `bool`, `int`, `float`, `str`, `list`).
        python_type: &'static str,
        /// Whether `"requestType" in value` may be true (SageMaker's session layer asks):
        /// a string that holds it, or a list that may hold it.
        may_hold_request_type: bool,
    },
}
