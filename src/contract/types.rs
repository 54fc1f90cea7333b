//! Pydantic's type checks, as far as they are certain from the JSON kind alone.
//!
//! vLLM validates the body against its pydantic model before any handler runs, so a
//! mistyped field is a 400 before the gate, trusted or not. Pydantic's lax mode coerces a
//! lot (numeric strings to numbers, 0/1 to booleans), so only errors that no coercion can
//! avoid are reported here: a request mmgate calls well-typed may still be refused by
//! vLLM for its types, never the other way round.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::inspect::{
    ChatForm, Facts, Field, Findings, Kind, KindSet, Member, Read, Sign, StrField, TagValue, Tagged,
};

/// A simple declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    Float,
    Int,
    /// An `int` that a before-validator takes only as `json.loads` made it: a number
    /// written without fraction or exponent, never a bool or a string
    /// (`validate_thinking_token_budget`).
    JsonInt,
    Bool,
    Str,
    /// `bytes`, or a `str` with constraints (`min_length` ...), which pydantic reads as
    /// Rust text: from JSON a string that encodes as UTF-8 (no lone surrogate).
    Bytes,
    /// A list whose elements may be of these kinds (pydantic certainly refuses an element of
    /// another kind; `KindSet::ANY` when the element type does not decide it), with at least
    /// and at most this many elements (`Field(min_length=..., max_length=...)`; else 0 and
    /// `usize::MAX`).
    List(KindSet, usize, usize),
    /// A list of containers of the first kind (lists or objects) whose values may be of the
    /// second kinds (`list[list[int]]`, `list[dict[str, str]]`), read from
    /// [`crate::inspect::Member::nested`] (known for some names only, accepted for others).
    Nested(KindSet, KindSet),
    /// `list[ChatCompletionMessageParam]`: a list of objects, each of which some chat message
    /// type may accept ([`crate::inspect::Member::misshapen`] says when none can).
    ChatMessages,
    /// The chat request's `messages` (`ChatCompletionRequest`): as [`Ty::ChatMessages`],
    /// each message as its `_normalize_messages_before` leaves it
    /// ([`crate::inspect::Member::misshapen_chat`]).
    ChatRequestMessages,
    /// `list[ChatCompletionToolsParam]`: a list of objects, each a chat tool (as
    /// [`Ty::ChatMessages`]).
    ChatTools,
    /// `list[list[ChatCompletionMessageParam]]`: a non-empty list of conversations, each a
    /// non-empty list of objects that some chat message type may accept (as
    /// [`Ty::ChatMessages`]).
    ChatBatches,
    /// A list of objects each of which one of these types takes (a union of types told
    /// apart by their `type`: the Responses API's tools and input items), read from the
    /// list's [`crate::inspect::Member::tagged`].
    TaggedList(&'static [Tag]),
    /// A list of strings and objects each of which has a `content` list of objects that
    /// these types take (`list[str | ScoreMultiModalParam]`, a score input's), read from
    /// [`crate::inspect::Member::tagged`] and [`crate::inspect::Member::misshapen`] (an
    /// object without such a list) for the members [`crate::inspect::CONTENTS`] names.
    ContentList(&'static [Tag]),
    /// A list of strings each equal to one of these words (`list[Literal[...]]`), read from
    /// an `include` list's [`crate::inspect::Member::strings`]; judged for no other member.
    WordList(&'static [&'static str]),
    /// An object one of these types takes (an object `tool_choice`, a `response_format`,
    /// or a one-model member of [`crate::inspect::MODELS`], whose one tag has no words),
    /// read from the member's [`crate::inspect::Member::tagged`]; judged for no other
    /// member.
    Tagged(&'static [Tag]),
    /// One object of [`Ty::ContentList`] (`ScoreMultiModalParam`).
    Content(&'static [Tag]),
    /// Any object (`dict`, `dict[str, Any]`, a model whose fields are not judged).
    Dict,
    /// An object whose member values may be of these kinds (`dict[str, V]`, as
    /// [`Ty::List`]'s elements), read from [`crate::inspect::Member::nested`] (known for
    /// objects read for no fact, accepted for others).
    DictOf(KindSet),
    /// An empty object, which a before-validator turns into an empty list with `list()`
    /// (a non-empty one becomes the list of its keys, which the field's list refuses).
    EmptyDict,
    /// An object whose every value is an object (`dict[str, dict[...]]`); known for the
    /// gated fields, read as [`Ty::Dict`] for others.
    DictOfDicts,
    /// A string equal to one of these (`Literal["a", "b"]`).
    Literal(&'static [&'static str]),
}

/// One type of a tagged union: the `type` words it takes (none for a model alone, whose
/// `type`, if any, is another member), whether it also takes an object without a `type`
/// (`NotRequired`) or with a null one (`Optional`), and its other fields that are required
/// or of decided kinds: each with the kinds it may have (as [`Ty::List`]'s elements),
/// whether it is required, and for a `Literal` of strings its words; and its fields that
/// are lists of tagged types (`list[...]`, which pydantic validates element by element) or
/// one such object, with those types (whose own parts are not judged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tag {
    pub(super) words: &'static [&'static str],
    pub(super) omitted: bool,
    pub(super) null: bool,
    pub(super) fields: &'static [TagField],
    pub(super) parts: &'static [(&'static str, &'static [Tag])],
}

/// A field of a [`Tag`]: name, kinds, required, `Literal` words (empty: any string), and
/// the scalar type its strings and numbers are read as.
pub(super) type TagField = (
    &'static str,
    KindSet,
    bool,
    &'static [&'static str],
    ScalarTy,
);

/// The scalar type a field of a tagged object declares, whose strings and numbers pydantic's
/// lax mode reads ([`crate::inspect::coerce`]); `Any` for every other type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScalarTy {
    Any,
    Bool,
    Int,
}

impl ScalarTy {
    /// Whether the type may take the member's value, as far as its string or number
    /// decides (its kind is judged apart).
    fn takes(self, k: &crate::inspect::Key) -> bool {
        let c = k.coerce;
        match (self, k.kind) {
            (ScalarTy::Bool, Kind::Str { .. } | Kind::Number { .. }) => c.bool.is_some(),
            (ScalarTy::Int, Kind::Str { .. } | Kind::Number { .. }) => c.int,
            _ => true,
        }
    }
}

impl Ty {
    /// Whether only a list or an object can be of this type (every scalar is refused).
    fn container(self) -> bool {
        !matches!(
            self,
            Ty::Float | Ty::Int | Ty::JsonInt | Ty::Bool | Ty::Str | Ty::Bytes | Ty::Literal(_)
        )
    }
}

impl Tag {
    /// Whether no type of the union may take the object.
    fn none_takes(tags: &[Tag], t: Tagged<'_>) -> bool {
        let tag = t.tag();
        !tags.iter().any(|type_| type_.may_take(t, tag))
    }

    /// Whether this type may take the object, whose `type` is `tag`: its member names are
    /// text (none holds a lone surrogate), its `type` is one of the words (or absent or
    /// null, where the type allows), it has every required field, and
    /// each field it has is of a kind the field may have, for a `Literal` a short string one
    /// of its words, and for a `bool`, `int` or `float` a string or number that type takes
    /// (what is inside containers is not judged), and each object in a list of tagged types
    /// where the object's lists were read ([`crate::inspect::Parts`]) is one of them.
    fn may_take(&self, t: Tagged<'_>, tag: TagValue) -> bool {
        if t.unreadable {
            return false;
        }
        // Not all its members are known: nothing is certain.
        if t.overflow {
            return true;
        }
        let typed = match tag {
            // A model alone, with no `type` field: any `type` is another member.
            _ if self.words.is_empty() => true,
            TagValue::Absent => self.omitted,
            TagValue::Null => self.null,
            TagValue::Word(tag) => self.words.iter().any(|w| tag.is(w.as_bytes())),
            TagValue::Other => false,
        };
        typed
            && self
                .fields
                .iter()
                .all(
                    |&(name, kinds, required, words, scalar)| match t.get(name.as_bytes()) {
                        Some(k) => {
                            k.kinds.within(kinds)
                                && scalar.takes(k)
                                && (words.is_empty()
                                    || !matches!(k.kind, Kind::Str { .. })
                                    // A longer string than any word is none of them.
                                    || k.text.is_some_and(|text| {
                                        words.iter().any(|w| text.is(w.as_bytes()))
                                    }))
                        }
                        None => !required,
                    },
                )
            && self.parts.iter().all(|&(name, tags)| {
                let list = t.get(name.as_bytes()).and_then(|k| k.list.as_ref());
                list.is_none_or(|list| {
                    list.elements.within(KindSet::OBJECT)
                        && t.objects(list).all(|o| !Tag::none_takes(tags, o))
                })
            })
    }
}

/// A declared top-level field: the types it accepts (a union when more than one; none
/// listed for a type the JSON kind does not decide).
#[derive(Debug, Clone, Copy)]
pub(super) struct FieldTy {
    pub(super) name: &'static str,
    pub(super) tys: &'static [Ty],
    pub(super) nullable: bool,
    pub(super) required: bool,
    /// A member from which a before-validator fills this field in when that member is of
    /// the field's chat form (`""`: none): only then is the field's absence not certain.
    pub(super) filled_from: &'static str,
    /// For a field of one number type: its inclusive bounds (`Field(ge=..., le=...)`).
    pub(super) range: Option<(i128, i128)>,
}

impl FieldTy {
    /// Whether a list of this chat form fills the field in (`normalize_input_messages`
    /// moves `input` to `messages` when `_is_chat_messages`, or `_is_batched_chat_messages`
    /// for a list of conversations, says so).
    fn filled_by(&self, form: ChatForm) -> bool {
        match self.tys {
            [Ty::ChatMessages] => form == ChatForm::Messages,
            [Ty::ChatBatches] => form == ChatForm::Conversations,
            _ => form != ChatForm::Neither,
        }
    }
}

/// A request model of a route: the before-validators mmgate reproduces and its fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct ModelTy {
    /// The model's class name in vLLM.
    pub(super) name: &'static str,
    pub(super) checks: &'static [Check],
    pub(super) fields: &'static [FieldTy],
}

/// A check a request model runs on the raw body before validating it (pydantic
/// `model_validator(mode="before")`), as far as JSON kinds decide it. Each reads
/// `data.get(name)`, so the last duplicate, and Python truthiness; the kinds are noted while
/// the body is scanned ([`Read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// `validate_stream_options`: `stream_options` while `stream` is falsy.
    StreamOptions,
    /// `check_generation_prompt`: both `continue_final_message` and
    /// `add_generation_prompt`.
    GenerationPrompt,
    /// ChatCompletionRequest `check_logprobs`: `logprob_token_ids` with beam search or
    /// without `logprobs`; `prompt_logprobs` or `top_logprobs` not a number, below zero but
    /// -1, `prompt_logprobs` with `stream` (unless 0), `top_logprobs` -1 or above zero
    /// without `logprobs`.
    ChatLogprobs,
    /// CompletionRequest `check_logprobs`: `logprob_token_ids` with beam search, without
    /// `logprobs`, or with `echo` and `max_tokens` 0; `prompt_logprobs` or `logprobs` not a
    /// number or below zero but -1, `prompt_logprobs` with `stream` (unless 0).
    CompletionLogprobs,
    /// `validate_prompt_and_prompt_embeds`: neither a non-empty `prompt` nor a non-empty
    /// `prompt_embeds`.
    PromptOrEmbeds,
    /// ResponsesRequest `validate_prompt`: any `prompt` but null.
    ResponsesPrompt,
    /// BatchChatCompletionRequest `check_batch_mode`: beam search, `logprob_token_ids`
    /// without `logprobs`, or an `n` other than 1.
    BatchMode,
    /// `check_cache_salt_support`: a `cache_salt` that is neither null nor a valid salt.
    CacheSalt,
    /// ChatCompletionRequest `check_tool_usage`: `tools` an empty array; a `tool_choice`
    /// (not null, not `"none"`) without `tools`, or other than `"auto"`, `"required"` or
    /// an object; an object that names no tool of `tools`.
    ChatToolUsage,
    /// ResponsesRequest `check_tool_usage`: `tool_choice` `"required"` or named (an object
    /// whose `type` is `"function"`) without tools (absent, null or empty), or naming none
    /// of them.
    ResponsesToolUsage,
    /// ResponsesRequest `validate_background`: a truthy `background` with a `store` that is
    /// present and falsy (null included).
    Background,
    /// `validate_response_format`: a `response_format` of `type` `"json_schema"` without a
    /// `json_schema`. (Structural tags are not judged.)
    ResponseFormat,
    /// ChatCompletionRequest `check_structured_outputs_count`: more than one of
    /// `structured_outputs`'s `json`, `regex` and `choice`, or one with a `tool_choice`
    /// that is present and neither `"none"`, `"auto"` nor `"required"` (null included).
    StructuredOutputs,
    /// CompletionRequest `check_structured_outputs_count`: more than one of
    /// `structured_outputs`'s `json`, `regex` and `choice` (`tool_choice` is not read).
    StructuredOutputsCount,
}

impl Check {
    /// The parameter the check names when it refuses the body.
    fn refuses(self, facts: &Facts) -> Option<&'static str> {
        let kind = |member| facts.read.get(member);
        let truthy = |member| kind(member).is_some_and(Kind::truthy);
        let none = |member| matches!(kind(member), None | Some(Kind::Null));
        // Not `isinstance(value, (int, float))` (a bool is an int; NaN, Infinity are floats).
        let not_number = |member| {
            !matches!(
                kind(member),
                None | Some(Kind::Null | Kind::Number { .. } | Kind::NonFinite | Kind::Bool(_))
            )
        };
        let token_ids = truthy(Read::LogprobTokenIds);
        match self {
            Check::StreamOptions => {
                (truthy(Read::StreamOptions) && !truthy(Read::Stream)).then_some("stream_options")
            }
            Check::GenerationPrompt => (truthy(Read::ContinueFinalMessage)
                && truthy(Read::AddGenerationPrompt))
            .then_some("continue_final_message"),
            Check::ChatLogprobs | Check::BatchMode
                if token_ids && (truthy(Read::UseBeamSearch) || !truthy(Read::Logprobs)) =>
            {
                Some("logprob_token_ids")
            }
            Check::BatchMode if truthy(Read::UseBeamSearch) => Some("use_beam_search"),
            Check::BatchMode => facts.n_not_one.then_some("n"),
            Check::ChatLogprobs => [
                (Read::PromptLogprobs, "prompt_logprobs"),
                (Read::TopLogprobs, "top_logprobs"),
            ]
            .into_iter()
            .find_map(|(member, name)| not_number(member).then_some(name))
            .or_else(|| prompt_logprobs(facts, truthy(Read::Stream)))
            .or_else(|| {
                let top = facts.signs.top_logprobs?;
                let on = matches!(top, Sign::MinusOne | Sign::Positive);
                (top == Sign::Negative || (on && !truthy(Read::Logprobs))).then_some("top_logprobs")
            }),
            Check::CompletionLogprobs
                if token_ids
                    && (truthy(Read::UseBeamSearch)
                        || none(Read::Logprobs)
                        // `data.get("max_tokens") == 0`: 0, 0.0 and false.
                        || (truthy(Read::Echo)
                            && matches!(
                                kind(Read::MaxTokens),
                                Some(Kind::Number { zero: true } | Kind::Bool(false))
                            ))) =>
            {
                Some("logprob_token_ids")
            }
            Check::CompletionLogprobs => [
                (Read::PromptLogprobs, "prompt_logprobs"),
                (Read::Logprobs, "logprobs"),
            ]
            .into_iter()
            .find_map(|(member, name)| not_number(member).then_some(name))
            .or_else(|| prompt_logprobs(facts, truthy(Read::Stream)))
            .or_else(|| (facts.signs.logprobs == Some(Sign::Negative)).then_some("logprobs")),
            Check::PromptOrEmbeds => {
                let prompt_empty =
                    none(Read::Prompt) || kind(Read::Prompt) == Some(Kind::Str { empty: true });
                let embeds_empty = none(Read::PromptEmbeds)
                    || kind(Read::PromptEmbeds) == Some(Kind::Array { empty: true });
                (prompt_empty && embeds_empty).then_some("prompt")
            }
            Check::ResponsesPrompt => (!none(Read::Prompt)).then_some("prompt"),
            Check::CacheSalt => facts.cache_salt_refused.then_some("cache_salt"),
            Check::ChatToolUsage => chat_tool_usage(facts),
            Check::ResponsesToolUsage => {
                // `len(tools) > 0`: `len` of another kind raises a TypeError, no refusal.
                let no_tools = match kind(Read::Tools) {
                    None | Some(Kind::Null) => true,
                    Some(Kind::Array { empty } | Kind::Object { empty } | Kind::Str { empty }) => {
                        empty
                    }
                    Some(_) => false,
                };
                let required = facts.tool_choice.is("required");
                let named = facts.named_tool_choice;
                let unmatched = named && facts.responses_choice_unmatched;
                ((no_tools && (required || named)) || unmatched).then_some("tool_choice")
            }
            Check::ResponseFormat => facts.json_schema_missing.then_some("response_format"),
            Check::StructuredOutputs => {
                let n = facts.structured_constraints;
                let choice = &facts.tool_choice;
                let taken = ["none", "auto", "required"].iter().any(|w| choice.is(w));
                let tools = !(matches!(choice, StrField::Absent) || taken);
                (n > 1 || (n > 0 && tools)).then_some("structured_outputs")
            }
            Check::StructuredOutputsCount => {
                (facts.structured_constraints > 1).then_some("structured_outputs")
            }
            Check::Background => (truthy(Read::Background)
                && kind(Read::Store).is_some_and(|k| !k.truthy()))
            .then_some("background"),
        }
    }
}

/// ChatCompletionRequest `check_tool_usage`, as far as top-level kinds and words decide it.
fn chat_tool_usage(facts: &Facts) -> Option<&'static str> {
    let kind = |member| facts.read.get(member);
    if kind(Read::Tools) == Some(Kind::Array { empty: true }) {
        return Some("tools");
    }
    let choice = &facts.tool_choice;
    if !choice.is_set() || choice.is("none") {
        None
    } else if !facts.has_tools() {
        Some("tool_choice")
    } else {
        let named = matches!(choice, StrField::Other(Kind::Object { .. }));
        let taken =
            (named && !facts.tool_choice_unmatched) || choice.is("auto") || choice.is("required");
        (!taken).then_some("tool_choice")
    }
}

/// Why every request model of a route refuses a body (that of its first model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// A before-validator refuses it, naming this parameter.
    Check(&'static str),
    /// This declared field is missing or mistyped.
    Field(&'static str),
}

/// Whether pydantic (lax mode) refuses a value of the member's JSON kind for `ty`.
fn refuses(ty: Ty, m: &Member, findings: &Findings) -> bool {
    let objects = || !m.elements.within(KindSet::OBJECT);
    match m.kind {
        Kind::Null => true,
        Kind::Array { .. } => match ty {
            Ty::List(accepted, lo, hi) => {
                !m.elements.within(accepted) || !(lo..=hi).contains(&m.len)
            }
            Ty::ChatMessages | Ty::ChatTools => objects() || m.misshapen,
            Ty::ChatRequestMessages => objects() || m.misshapen_chat,
            Ty::WordList(words) => {
                !m.elements.within(KindSet::STR.or(KindSet::NOT_INT))
                    || m.strings
                        .iter()
                        .any(|s| !words.iter().any(|w| w.as_bytes() == s))
            }
            Ty::Nested(outer, inner) => !m.elements.within(outer) || !m.nested.within(inner),
            Ty::ChatBatches => !m.elements.within(KindSet::ARRAY) || m.misshapen || m.len == 0,
            Ty::TaggedList(tags) => objects() || m.tagged().any(|t| Tag::none_takes(tags, t)),
            Ty::ContentList(tags) => {
                !m.elements
                    .within(KindSet::STR.or(KindSet::NOT_INT).or(KindSet::OBJECT))
                    || m.misshapen
                    || m.tagged().any(|t| Tag::none_takes(tags, t))
            }
            _ => true,
        },
        Kind::Object { empty } => match ty {
            Ty::Dict => false,
            Ty::DictOf(accepted) => !m.nested.within(accepted),
            Ty::DictOfDicts => m
                .field
                .is_some_and(|g| findings.field(g).non_object_member.is_some()),
            Ty::EmptyDict => !empty,
            Ty::Tagged(tags) => m.tagged().next().is_some_and(|t| Tag::none_takes(tags, t)),
            Ty::Content(tags) => m.misshapen || m.tagged().any(|t| Tag::none_takes(tags, t)),
            _ => true,
        },
        _ if ty.container() => true,
        Kind::Str { .. } => match ty {
            Ty::Float => !m.coerce().float,
            Ty::Int => !m.coerce().int,
            Ty::Bool => m.coerce().bool.is_none(),
            Ty::Str => false,
            Ty::Bytes => m.lone_surrogate() == Some(true),
            Ty::Literal(words) => m.is_one_of(words) == Some(false),
            _ => true,
        },
        Kind::NonFinite => ty != Ty::Float,
        Kind::Number { .. } => match ty {
            Ty::Int => !m.coerce().int,
            Ty::JsonInt => m.json_int() == Some(false),
            Ty::Bool => m.coerce().bool.is_none(),
            // An integer too large for a float (`float_type`).
            Ty::Float => !m.coerce().float,
            _ => true,
        },
        Kind::Bool(_) => matches!(ty, Ty::Str | Ty::Bytes | Ty::JsonInt | Ty::Literal(_)),
    }
}

/// The `prompt_logprobs` rules both logprobs checks share: none with `stream` (unless 0),
/// none below zero but -1.
fn prompt_logprobs(facts: &Facts, stream: bool) -> Option<&'static str> {
    let p = facts.signs.prompt_logprobs?;
    let streamed = stream && matches!(p, Sign::Positive | Sign::MinusOne);
    (streamed || p == Sign::Negative).then_some("prompt_logprobs")
}

/// The facts of the chat request that vLLM's batch route builds for each conversation, from
/// the batch request's `model_dump(exclude_none=True)`: the batch model's own fields as it
/// validated them, their defaults filled in and nulls gone; its extra members (`stream`,
/// `tools`, `prompt_logprobs` ...) as sent.
fn batch_rebuilt(f: &Findings) -> Facts {
    /// A batch field as `model_dump(exclude_none=True)` leaves it.
    enum Dumped<'a> {
        /// Null: dropped.
        Gone,
        /// Not sent: its default.
        Default,
        /// As validated from this member.
        Sent(&'a Member),
    }
    let dumped = |name| match f.member(name) {
        None => Dumped::Default,
        Some(m) if m.kind == Kind::Null => Dumped::Gone,
        Some(m) => Dumped::Sent(m),
    };
    let mut facts = f.facts.clone();
    for (member, name, default) in [
        (Read::ContinueFinalMessage, "continue_final_message", false),
        (Read::AddGenerationPrompt, "add_generation_prompt", true),
        (Read::Logprobs, "logprobs", false),
        (Read::UseBeamSearch, "use_beam_search", false),
    ] {
        let value = match dumped(name) {
            Dumped::Gone => None,
            Dumped::Default => Some(default),
            Dumped::Sent(m) => Some(m.as_bool()),
        };
        facts.read.set(member, value.map(Kind::Bool));
    }
    let sign = match dumped("top_logprobs") {
        Dumped::Gone => None,
        Dumped::Default => Some(Sign::Zero),
        Dumped::Sent(m) => match m.kind {
            Kind::Bool(b) => Some(if b { Sign::Positive } else { Sign::Zero }),
            Kind::Number { .. } => f.facts.signs.top_logprobs,
            _ => m.int_string_sign(),
        },
    };
    // An int by then: a number, whatever was sent.
    let kind = match dumped("top_logprobs") {
        Dumped::Gone => None,
        _ => Some(Kind::Number {
            zero: sign == Some(Sign::Zero),
        }),
    };
    facts.read.set(Read::TopLogprobs, kind);
    facts.signs.top_logprobs = sign;
    // `tool_choice: Literal["none"] | None = "none"`.
    facts.tool_choice = match dumped("tool_choice") {
        Dumped::Gone => StrField::Absent,
        _ => StrField::Str("none".into()),
    };
    facts.named_tool_choice = false;
    facts
}

/// Whether pydantic refuses the member for `f` whatever else the value holds (a field of
/// no plain type, `tys: &[]`, never is). `m` is the last member of its name, the one a
/// gated field's findings describe.
fn certainly_invalid(f: &FieldTy, m: &Member, findings: &Findings) -> bool {
    match m.kind {
        _ if f.tys.is_empty() => false,
        Kind::Null => !f.nullable,
        Kind::Number { .. }
            if f.range
                .is_some_and(|(lo, hi)| m.number_within(lo, hi) == Some(false)) =>
        {
            true
        }
        // NaN and the infinities lie outside any bounds (an `int` refuses them anyway).
        Kind::NonFinite if f.range.is_some() => true,
        // A bool is read as the number 0 or 1, then bounded.
        Kind::Bool(b)
            if matches!(f.tys, [Ty::Int] | [Ty::Float])
                && f.range
                    .is_some_and(|(lo, hi)| !(lo..=hi).contains(&i128::from(b))) =>
        {
            true
        }
        // A numeric string is read as the one number type, then bounded.
        Kind::Str { .. }
            if matches!(f.tys, [Ty::Int] | [Ty::Float])
                && f.range.is_some_and(|(lo, hi)| {
                    m.string_within(lo, hi, f.tys == [Ty::Float]) == Some(false)
                }) =>
        {
            true
        }
        _ => f.tys.iter().all(|&ty| refuses(ty, m, findings)),
    }
}

/// A route's request models (pydantic refuses a body only when every one of them does),
/// each indexed once.
pub(super) struct Declared {
    models: Vec<Model>,
}

/// One model's checks, and its declared fields in pydantic's order with each one's position
/// by name: a body's members are looked up by name instead of the table being scanned for
/// each of them.
struct Model {
    name: &'static str,
    checks: &'static [Check],
    fields: &'static [FieldTy],
    position: HashMap<&'static str, usize, BuildHasherDefault<Fnv>>,
    required: Vec<usize>,
}

/// FNV-1a, for the name index. The index holds only the tables' own names and is never
/// written after it is built, so a client's keys can only miss in it: a keyed hash buys
/// nothing, and SipHash cost more than the rest of the check.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The most fields a table may declare (the width of the seen-set in
/// [`Model::first_error`]).
const MAX_FIELDS: usize = 256;

impl Declared {
    /// Indexes each model of a route.
    pub(super) fn new(models: &'static [ModelTy]) -> Self {
        Declared {
            models: models.iter().map(Model::new).collect(),
        }
    }

    /// How many models the route's body may validate as (a union when more than one).
    pub(super) fn models(&self) -> usize {
        self.models.len()
    }

    /// The gated fields that some model declares and certainly refuses as sent.
    pub(super) fn mistyped_gated(&self, findings: &Findings) -> Vec<Field> {
        Field::ALL
            .into_iter()
            .filter(|&g| {
                let Some(m) = findings.member(g.name()) else {
                    return false;
                };
                self.models.iter().any(|model| {
                    model
                        .position
                        .get(g.name())
                        .is_some_and(|&i| certainly_invalid(&model.fields[i], m, findings))
                })
            })
            .collect()
    }

    /// Why the body is certainly refused: a before-validator of any model refuses it (its
    /// error is no pydantic validation error, so it escapes the union: pydantic's smart
    /// mode tries every model), or every model refuses a field (the first model's, by
    /// [`Model::first_error`]); `None` when some model may accept it.
    pub(super) fn refusal(&self, findings: &Findings) -> Option<Refusal> {
        let mut checks = self.models.iter().flat_map(|m| m.checks);
        if let Some(parameter) = checks.find_map(|c| c.refuses(&findings.facts)) {
            return Some(Refusal::Check(parameter));
        }
        let mut first = None;
        for model in &self.models {
            let field = model.first_error(findings)?;
            first.get_or_insert(Refusal::Field(field));
        }
        first
    }
}

impl Declared {
    /// The first before-validator of the (first) model that refuses a batch request's
    /// conversation once rebuilt ([`batch_rebuilt`]), by the parameter it names.
    pub(super) fn rebuilt_check(&self, findings: &Findings) -> Option<&'static str> {
        let model = self.models.first()?;
        let facts = batch_rebuilt(findings);
        model.checks.iter().find_map(|c| c.refuses(&facts))
    }

    /// The first field the (first) model certainly refuses when it is rebuilt from another
    /// model's `model_dump(exclude_none=True)`, as vLLM's batch route builds each
    /// conversation's request: members that are null are gone, required fields were the
    /// other model's to check, `replaced` is given another value (each conversation), and
    /// only the types of the members left matter.
    pub(super) fn rebuilt_refusal(
        &self,
        findings: &Findings,
        replaced: &str,
    ) -> Option<&'static str> {
        let model = self.models.first()?;
        let replaced = model.position.get(replaced).copied();
        model
            .first_mistyped(findings, true, replaced)
            .map(|i| model.fields[i].name)
    }
}

impl Model {
    /// Indexes a model's fields (at most 256, names unique: checked by the tests for every
    /// table).
    fn new(model: &ModelTy) -> Self {
        let fields = model.fields;
        let mut position = HashMap::with_capacity_and_hasher(fields.len(), Default::default());
        for (i, f) in fields.iter().enumerate().take(MAX_FIELDS) {
            position.entry(f.name).or_insert(i);
        }
        Model {
            name: model.name,
            checks: model.checks,
            fields,
            position,
            required: (0..fields.len()).filter(|&i| fields[i].required).collect(),
        }
    }

    /// The first declared field (in declaration order) that pydantic certainly refuses:
    /// missing when required, or mistyped; by name. Linear in the body's members.
    fn first_error(&self, findings: &Findings) -> Option<&'static str> {
        let missing = self.required.iter().copied().find(|&i| {
            let f = &self.fields[i];
            let filled = !f.filled_from.is_empty()
                && findings
                    .member(f.filled_from)
                    .is_some_and(|m| f.filled_by(m.chat_form));
            !filled && findings.member(f.name).is_none()
        });
        missing
            .into_iter()
            .chain(self.first_mistyped(findings, false, None))
            .min()
            .map(|i| self.fields[i].name)
    }

    /// The first declared field (in declaration order) whose member pydantic certainly
    /// refuses, each member read as pydantic reads it (the last of duplicate keys); with
    /// `skip_null`, a null member counts as absent; the field `skip` is not checked.
    fn first_mistyped(
        &self,
        findings: &Findings,
        skip_null: bool,
        skip: Option<usize>,
    ) -> Option<usize> {
        let mut mistyped = None;
        for (i, m) in self.declared_members(findings) {
            if Some(i) != skip
                && !(skip_null && m.kind == Kind::Null)
                && certainly_invalid(&self.fields[i], m, findings)
                && mistyped.is_none_or(|first| i < first)
            {
                mistyped = Some(i);
            }
        }
        mistyped
    }

    /// The body's members this model declares, each field once with its member as pydantic
    /// reads it (the last of duplicate keys): the field's position, and the member.
    fn declared_members<'f>(
        &self,
        findings: &'f Findings,
    ) -> impl Iterator<Item = (usize, &'f Member)> + use<'_, 'f> {
        let mut seen = [0u64; MAX_FIELDS / 64];
        findings.members.iter().rev().filter_map(move |m| {
            let i = *self.position.get(findings.name(m))?;
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            let first = seen[word] & bit == 0;
            seen[word] |= bit;
            first.then_some((i, m))
        })
    }
}

#[cfg(test)]
mod tests;
mod union;
