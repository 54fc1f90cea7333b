//! Pydantic's type checks, as far as they are certain from the JSON kind alone.
//!
//! vLLM validates the body against its pydantic model before any handler runs, so a
//! mistyped field is a 400 before the gate, trusted or not. Pydantic's lax mode coerces a
//! lot (numeric strings to numbers, 0/1 to booleans), so only errors that no coercion can
//! avoid are reported here: a request mmgate calls well-typed may still be refused by
//! vLLM for its types, never the other way round.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::inspect::{Field, Findings, Kind, KindSet, Member, Read, Sign, StrField, Tagged};

/// A simple declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    Float,
    Int,
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
    /// `list[ChatCompletionMessageParam]`: a list of objects, each of which some chat message
    /// type may accept ([`crate::inspect::Member::misshapen`] says when none can).
    ChatMessages,
    /// `list[ChatCompletionToolsParam]`: a list of objects, each a chat tool (as
    /// [`Ty::ChatMessages`]).
    ChatTools,
    /// A list of objects each of which one of these types takes (a union of models told
    /// apart by a required `type`: the Responses API's tools), read from a `tools` list's
    /// [`crate::inspect::Member::tagged`].
    TaggedList(&'static [Tag]),
    /// A list of strings each equal to one of these words (`list[Literal[...]]`), read from
    /// an `include` list's [`crate::inspect::Member::strings`]; judged for no other member.
    WordList(&'static [&'static str]),
    /// An object one of these types takes (the Responses API's object `tool_choice`), read
    /// from `tool_choice`'s [`crate::inspect::Member::tagged`]; judged for no other member.
    Tagged(&'static [Tag]),
    Dict,
    /// An empty object, which a before-validator turns into an empty list with `list()`
    /// (a non-empty one becomes the list of its keys, which the field's list refuses).
    EmptyDict,
    /// An object whose every value is an object (`dict[str, dict[...]]`); known for the
    /// gated fields, read as [`Ty::Dict`] for others.
    DictOfDicts,
    /// A string equal to one of these (`Literal["a", "b"]`).
    Literal(&'static [&'static str]),
}

/// One type of a tagged union: the `type` words it takes and its other required fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tag {
    pub(super) words: &'static [&'static str],
    pub(super) required: &'static [&'static str],
}

impl Ty {
    /// Whether only a list or an object can be of this type (every scalar is refused).
    fn container(self) -> bool {
        !matches!(
            self,
            Ty::Float | Ty::Int | Ty::Bool | Ty::Str | Ty::Bytes | Ty::Literal(_)
        )
    }
}

impl Tag {
    /// Whether no type of the union may take the object.
    fn none_takes(tags: &[Tag], t: &Tagged) -> bool {
        !tags.iter().any(|tag| tag.may_take(t))
    }

    /// Whether this type may take the object: its `type` is one of the words, and it has
    /// every required field (their values are not judged).
    fn may_take(&self, t: &Tagged) -> bool {
        t.tag
            .as_deref()
            .is_some_and(|tag| self.words.iter().any(|w| w.as_bytes() == tag))
            && self
                .required
                .iter()
                .all(|r| t.keys.iter().any(|k| k == r.as_bytes()))
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
    /// A member from which a before-validator fills this field in when that member is a
    /// list (`""`: none): only then is the field's absence not certain.
    pub(super) filled_from: &'static str,
    /// For a field of one number type: its inclusive bounds (`Field(ge=..., le=...)`).
    pub(super) range: Option<(i128, i128)>,
}

/// A request model of a route: the before-validators mmgate reproduces and its fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct ModelTy {
    /// The model's class name in vLLM (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
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
    /// BatchChatCompletionRequest `check_batch_mode`: beam search, or `logprob_token_ids`
    /// without `logprobs`.
    BatchMode,
    /// `check_cache_salt_support`: a `cache_salt` that is neither null nor a valid salt.
    CacheSalt,
    /// ChatCompletionRequest `check_tool_usage`: `tools` an empty array; a `tool_choice`
    /// (not null, not `"none"`) without `tools`, or other than `"auto"`, `"required"` or
    /// an object. (What a named tool choice holds is not judged.)
    ChatToolUsage,
    /// ResponsesRequest `check_tool_usage`: `tool_choice` `"required"` or named (an object
    /// whose `type` is `"function"`) without tools (absent, null or empty). (Whether a named
    /// tool is among the tools is not judged.)
    ResponsesToolUsage,
    /// ResponsesRequest `validate_background`: a truthy `background` with a `store` that is
    /// present and falsy (null included).
    Background,
}

impl Check {
    /// The parameter the check names when it refuses the body.
    fn refuses(self, f: &Findings) -> Option<&'static str> {
        let kind = |member| f.facts.read.get(member);
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
            Check::BatchMode => truthy(Read::UseBeamSearch).then_some("use_beam_search"),
            Check::ChatLogprobs => [
                (Read::PromptLogprobs, "prompt_logprobs"),
                (Read::TopLogprobs, "top_logprobs"),
            ]
            .into_iter()
            .find_map(|(member, name)| not_number(member).then_some(name))
            .or_else(|| prompt_logprobs(f, truthy(Read::Stream)))
            .or_else(|| {
                let top = f.facts.signs.top_logprobs?;
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
            .or_else(|| prompt_logprobs(f, truthy(Read::Stream)))
            .or_else(|| (f.facts.signs.logprobs == Some(Sign::Negative)).then_some("logprobs")),
            Check::PromptOrEmbeds => {
                let prompt_empty =
                    none(Read::Prompt) || kind(Read::Prompt) == Some(Kind::Str { empty: true });
                let embeds_empty = none(Read::PromptEmbeds)
                    || kind(Read::PromptEmbeds) == Some(Kind::Array { empty: true });
                (prompt_empty && embeds_empty).then_some("prompt")
            }
            Check::ResponsesPrompt => (!none(Read::Prompt)).then_some("prompt"),
            Check::CacheSalt => f.facts.cache_salt_refused.then_some("cache_salt"),
            Check::ChatToolUsage => chat_tool_usage(f),
            Check::ResponsesToolUsage => {
                // `len(tools) > 0`: `len` of another kind raises a TypeError, no refusal.
                let no_tools = match kind(Read::Tools) {
                    None | Some(Kind::Null) => true,
                    Some(Kind::Array { empty } | Kind::Object { empty } | Kind::Str { empty }) => {
                        empty
                    }
                    Some(_) => false,
                };
                let required = f.facts.tool_choice.is("required");
                (no_tools && (required || f.facts.named_tool_choice)).then_some("tool_choice")
            }
            Check::Background => (truthy(Read::Background)
                && kind(Read::Store).is_some_and(|k| !k.truthy()))
            .then_some("background"),
        }
    }
}

/// ChatCompletionRequest `check_tool_usage`, as far as top-level kinds and words decide it.
fn chat_tool_usage(f: &Findings) -> Option<&'static str> {
    let kind = |member| f.facts.read.get(member);
    if kind(Read::Tools) == Some(Kind::Array { empty: true }) {
        return Some("tools");
    }
    let choice = &f.facts.tool_choice;
    if !choice.is_set() || choice.is("none") {
        None
    } else if !f.facts.has_tools() {
        Some("tool_choice")
    } else {
        let taken = matches!(choice, StrField::Other(Kind::Object { .. }))
            || choice.is("auto")
            || choice.is("required");
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
            Ty::WordList(words) => {
                !m.elements.within(KindSet::STR.or(KindSet::NOT_INT))
                    || m.strings
                        .iter()
                        .any(|s| !words.iter().any(|w| w.as_bytes() == s))
            }
            Ty::TaggedList(tags) => objects() || m.tagged.iter().any(|t| Tag::none_takes(tags, t)),
            _ => true,
        },
        Kind::Object { empty } => match ty {
            Ty::Dict => false,
            Ty::DictOfDicts => m
                .field
                .is_some_and(|g| findings.field(g).non_object_member.is_some()),
            Ty::EmptyDict => !empty,
            Ty::Tagged(tags) => m.tagged.first().is_some_and(|t| Tag::none_takes(tags, t)),
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
            Ty::Bool => m.coerce().bool.is_none(),
            Ty::Float => false,
            _ => true,
        },
        Kind::Bool(_) => matches!(ty, Ty::Str | Ty::Bytes | Ty::Literal(_)),
    }
}

/// The `prompt_logprobs` rules both logprobs checks share: none with `stream` (unless 0),
/// none below zero but -1.
fn prompt_logprobs(f: &Findings, stream: bool) -> Option<&'static str> {
    let p = f.facts.signs.prompt_logprobs?;
    let streamed = stream && matches!(p, Sign::Positive | Sign::MinusOne);
    (streamed || p == Sign::Negative).then_some("prompt_logprobs")
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
        if let Some(parameter) = checks.find_map(|c| c.refuses(findings)) {
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
                    .is_some_and(|m| matches!(m.kind, Kind::Array { .. }));
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
        let mut seen = [0u64; MAX_FIELDS / 64];
        let mut mistyped = None;
        for m in findings.members.iter().rev() {
            let Some(&i) = self.position.get(findings.name(m)) else {
                continue;
            };
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            if seen[word] & bit != 0 {
                continue;
            }
            seen[word] |= bit;
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
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::contract::fields;

    const ROUTES: [&[ModelTy]; 10] = [
        fields::CHAT,
        fields::CHAT_BATCH,
        fields::COMPLETION,
        fields::RESPONSES,
        fields::TOKENIZE,
        fields::EMBEDDINGS,
        fields::POOLING,
        fields::SCORE,
        fields::RERANK,
        fields::CLASSIFY,
    ];

    /// Every model of every route.
    fn models() -> Vec<&'static ModelTy> {
        ROUTES.iter().flat_map(|r| r.iter()).collect()
    }

    /// The definition: the table in order, each field against the last member of its name.
    fn reference(table: &[FieldTy], findings: &Findings) -> Option<&'static str> {
        table.iter().find_map(|f| match findings.member(f.name) {
            None if f.required
                && (f.filled_from.is_empty()
                    || !findings
                        .member(f.filled_from)
                        .is_some_and(|m| matches!(m.kind, Kind::Array { .. }))) =>
            {
                Some(f.name)
            }
            Some(m) if certainly_invalid(f, m, findings) => Some(f.name),
            _ => None,
        })
    }

    #[test]
    fn the_name_hash_is_fnv_1a() {
        let hash = |b: &[u8]| {
            let mut h = Fnv::default();
            h.write(b);
            h.finish()
        };
        // The published FNV-1a 64-bit test vectors.
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn every_table_fits_and_names_each_field_once() {
        for model in models() {
            assert!(model.fields.len() <= MAX_FIELDS, "{}", model.name);
            assert_eq!(Model::new(model).position.len(), model.fields.len());
        }
    }

    fn refusal(route: &'static [ModelTy], body: &str) -> Option<Refusal> {
        let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        Declared::new(route).refusal(&findings)
    }

    fn error(route: &'static [ModelTy], body: &str) -> Option<&'static str> {
        refusal(route, body).map(|r| match r {
            Refusal::Field(name) | Refusal::Check(name) => name,
        })
    }

    /// The bodies vLLM refuses (naming `param`) paired with `Some(param)`, then the ones it
    /// takes with `None`.
    fn expected<'a>(
        refused: &'a [&'a str],
        taken: &'a [&'a str],
        param: &'static str,
    ) -> impl Iterator<Item = (&'a str, Option<&'static str>)> {
        let refused = refused.iter().map(move |&b| (b, Some(param)));
        refused.chain(taken.iter().map(|&b| (b, None)))
    }

    fn check(route: &'static [ModelTy], body: &str) -> Option<&'static str> {
        match refusal(route, body) {
            Some(Refusal::Check(name)) => Some(name),
            _ => None,
        }
    }

    #[test]
    fn a_union_type_refuses_only_what_none_of_its_types_accepts() {
        // CompletionRequest.prompt: str | list[int] | list[str] | list[list[int]] | None.
        let field_error = |model, body: &str| {
            let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
            Model::new(model).first_error(&findings)
        };
        for ok in [r#""hi""#, "[1]", "null"] {
            assert_eq!(
                field_error(&fields::COMPLETION[0], &format!(r#"{{"prompt":{ok}}}"#)),
                None
            );
        }
        for bad in [r#"{"a":1}"#, "1", "true", "NaN"] {
            assert_eq!(
                field_error(&fields::COMPLETION[0], &format!(r#"{{"prompt":{bad}}}"#)),
                Some("prompt"),
                "{bad}"
            );
        }
    }

    #[test]
    fn chat_messages_are_refused_only_when_no_message_type_takes_one() {
        // Each checked against the real server, chat and tokenize alike.
        let refused = [
            "{}",
            r#"{"content":"hi"}"#,
            r#"{"role":5,"content":"x"}"#,
            r#"{"role":null}"#,
            r#"{"role":"user","content":5}"#,
            r#"{"role":"user","content":true}"#,
            r#"{"role":"user","content":NaN}"#,
            r#"{"author":{"role":"user"},"content":5}"#,
            r#"{"role":"user","content":"x","name":null}"#,
            r#"{"role":"user","content":"x","name":5}"#,
            r#"{"role":"user","role":5,"content":"x"}"#,
        ];
        let taken = [
            r#"{"role":"user"}"#,
            r#"{"role":"x","content":"hi","name":"n"}"#,
            r#"{"role":"user","content":{}}"#,
            r#"{"role":"assistant","content":null}"#,
            r#"{"role":"user","author":5,"content":"x"}"#,
            r#"{"r\u006fle":"user","content":"x"}"#,
            r#"{"role":5,"role":"user","content":"x"}"#,
            r#"{"author":{"role":"user"}}"#,
        ];
        let ok = r#"{"role":"user","content":"hi"}"#;
        for (message, expected) in expected(&refused, &taken, "messages") {
            for list in [format!("[{message}]"), format!("[{ok},{message}]")] {
                let body = format!(r#"{{"messages":{list}}}"#);
                assert_eq!(error(fields::CHAT, &body), expected, "{body}");
                let body = format!(r#"{{"model":"m","messages":{list}}}"#);
                assert_eq!(
                    error(fields::CLASSIFY, &body).is_some(),
                    expected.is_some(),
                    "{body}"
                );
            }
        }
        // The last `messages` counts; a list of messages under `input` is judged too.
        let body = format!(r#"{{"messages":[{{}}],"messages":[{ok}]}}"#);
        assert_eq!(error(fields::CHAT, &body), None);
        let chat_input = fields::EMBEDDINGS
            .iter()
            .find(|m| m.name == "EmbeddingChatInputRequest");
        let chat_input = chat_input.expect("the chat-input embeddings model");
        let field_error = |body: &str| {
            let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
            Model::new(chat_input).first_error(&findings)
        };
        assert_eq!(field_error(&format!(r#"{{"input":[{ok}]}}"#)), None);
        assert_eq!(field_error(r#"{"input":[{}]}"#), Some("input"));
    }

    #[test]
    fn chat_tools_are_refused_only_when_the_tool_type_cannot_take_one() {
        // Each checked against the real server.
        let refused = [
            "{}",
            r#"{"function":{}}"#,
            r#"{"function":"f"}"#,
            r#"{"type":"x","function":{"name":"f"}}"#,
            r#"{"type":null,"function":{"name":"f"}}"#,
            r#"{"function":{"name":5}}"#,
            r#"{"function":{"name":"f","parameters":[]}}"#,
            r#"{"function":{"name":"f","description":5}}"#,
            r#"{"function":{"name":"f","strict":"x"}}"#,
            r#"{"function":{"name":"f"},"defer_loading":"x"}"#,
            r#"{"function":{"name":"f"},"function":{}}"#,
        ];
        let taken = [
            r#"{"function":{"name":"f"}}"#,
            r#"{"type":"\u0066unction","function":{"name":"f"}}"#,
            r#"{"function":{"name":"f","parameters":null,"description":null}}"#,
            r#"{"function":{"name":"f","parameters":{"a":1},"strict":"yes"}}"#,
            r#"{"function":{"name":5,"name":"f"}}"#,
            r#"{"function":{"name":"f"},"defer_loading":0}"#,
        ];
        let messages = r#""messages":[{"role":"user","content":"hi"}]"#;
        for (tool, expected) in expected(&refused, &taken, "tools") {
            let body = format!(r#"{{{messages},"tools":[{tool}]}}"#);
            assert_eq!(error(fields::CHAT, &body), expected, "{body}");
            let tokenize = error(fields::TOKENIZE, &body);
            assert_eq!(tokenize.is_some(), expected.is_some(), "{body}");
        }
    }

    #[test]
    fn responses_tools_are_refused_only_when_no_tool_type_takes_one() {
        // Each checked against the real server.
        let refused = [
            "{}",
            r#"{"type":"function","function":{"name":"f"}}"#,
            r#"{"type":"nope","name":"f"}"#,
            r#"{"type":5,"name":"f"}"#,
            r#"{"type":"function","name":"f","type":null}"#,
            r#"{"type":"file_search"}"#,
            r#"{"type":"mcp"}"#,
        ];
        let taken = [
            r#"{"type":"function","name":"f"}"#,
            r#"{"type":"\u0066unction","name":"f","parameters":{}}"#,
            r#"{"type":"web_search"}"#,
            r#"{"type":"file_search","vector_store_ids":[]}"#,
            r#"{"type":"mcp","server_label":"s"}"#,
            r#"{"type":null,"type":"function","name":"f"}"#,
        ];
        for (tool, expected) in expected(&refused, &taken, "tools") {
            let body = format!(r#"{{"input":"hi","tools":[{tool}]}}"#);
            assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
            let body = format!(r#"{{"input":"hi","tools":[{{"type":"web_search"}},{tool}]}}"#);
            assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
        }
    }

    #[test]
    fn a_responses_tool_choice_object_needs_a_type_that_takes_it() {
        // Each checked against the real server.
        let refused = [
            "{}",
            r#"{"name":"f"}"#,
            r#"{"type":"nope"}"#,
            r#"{"type":"function"}"#,
            r#"{"type":"mcp"}"#,
            r#""nope""#,
        ];
        let taken = [
            r#"{"type":"function","name":"f"}"#,
            r#"{"type":"file_search"}"#,
            r#"{"type":"mcp","server_label":"s"}"#,
            r#"{"type":null,"type":"web_search_preview"}"#,
            r#""auto""#,
        ];
        let tools = r#""tools":[{"type":"function","name":"f"}]"#;
        for (choice, expected) in expected(&refused, &taken, "tool_choice") {
            let body = format!(r#"{{"input":"hi",{tools},"tool_choice":{choice}}}"#);
            assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
        }
    }

    #[test]
    fn a_list_of_literal_words_takes_only_those_words() {
        // Each checked against the real server.
        for (include, expected) in [
            (r#"["a"]"#, Some("include")),
            (r#"["reasoning.encrypted_content","x"]"#, Some("include")),
            (r#"[1]"#, Some("include")),
            ("[]", None),
            (r#"["reasoning.encrypted_content"]"#, None),
            (
                r#"["reas\u006fning.encrypted_content","file_search_call.results"]"#,
                None,
            ),
            ("null", None),
        ] {
            let body = format!(r#"{{"input":"hi","include":{include}}}"#);
            assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
        }
    }

    #[test]
    fn a_body_is_refused_only_when_every_model_refuses_it() {
        // Tokenize: a completion form (prompt: str, required) and a chat form (messages).
        assert_eq!(error(fields::TOKENIZE, r#"{"prompt":"hi"}"#), None);
        assert_eq!(error(fields::TOKENIZE, r#"{"messages":[]}"#), None);
        assert_eq!(
            error(fields::TOKENIZE, r#"{"prompt":{},"messages":[]}"#),
            None
        );
        assert_eq!(
            error(fields::TOKENIZE, r#"{"prompt":{"a":1}}"#),
            Some("prompt"),
            "the completion form's error is named"
        );
        assert_eq!(error(fields::TOKENIZE, r#"{"model":"m"}"#), Some("prompt"));
        // A model without plain required fields never refuses on its own.
        let bare = ModelTy {
            name: "Bare",
            checks: &[],
            fields: &[],
        };
        assert_eq!(
            error(
                std::slice::from_ref(Box::leak(Box::new(bare))),
                r#"{"x":1}"#
            ),
            None
        );
        assert_eq!(error(&[], r#"{"x":1}"#), None);
        // One model's before-validator refuses the body even where another model takes it:
        // its error escapes pydantic's union.
        let both = r#"{"prompt":"p","input":"i","messages":[],"continue_final_message":true,"add_generation_prompt":1}"#;
        for route in [
            fields::TOKENIZE,
            fields::EMBEDDINGS,
            fields::POOLING,
            fields::CHAT,
        ] {
            assert_eq!(
                check(route, both),
                Some("continue_final_message"),
                "{}",
                route[0].name
            );
        }
        assert_eq!(check(fields::SCORE, both), None);
        assert_eq!(check(fields::TOKENIZE, r#"{"prompt":"p"}"#), None);
        // EmbeddingChatInputRequest fills `messages` in from a list `input`.
        let chat_input = &fields::EMBEDDINGS[3];
        assert_eq!(chat_input.name, "EmbeddingChatInputRequest");
        let missing = |body: &str| {
            let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
            Model::new(chat_input).first_error(&findings)
        };
        assert_eq!(missing(r#"{"input":[{"role":"user"}]}"#), None);
        assert_eq!(missing(r#"{"input":"text"}"#), Some("input"));
        assert_eq!(missing(r#"{"x":1}"#), Some("input"));
    }

    #[test]
    fn the_gated_fields_are_typed_per_model() {
        let findings = |body: &str| crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        let gated = |route, body: &str| Declared::new(route).mistyped_gated(&findings(body));
        // Tokenize: the completion form declares neither field, the chat form both.
        let both_forms = r#"{"prompt":[],"messages":[],"media_io_kwargs":{"image":[]}}"#;
        assert_eq!(error(fields::TOKENIZE, both_forms), Some("prompt"));
        assert_eq!(gated(fields::TOKENIZE, both_forms), [Field::MediaIoKwargs]);
        let completion_form = r#"{"prompt":"hi","mm_processor_kwargs":"x"}"#;
        assert_eq!(error(fields::TOKENIZE, completion_form), None);
        // Chat: an object for mm_processor_kwargs, an object of objects for media_io_kwargs,
        // the last duplicate as pydantic reads it.
        for (body, want) in [
            (
                r#"{"messages":[],"mm_processor_kwargs":"x","media_io_kwargs":{"a":1}}"#,
                &[Field::MmProcessorKwargs, Field::MediaIoKwargs][..],
            ),
            (
                r#"{"messages":[],"media_io_kwargs":{"a":{}},"mm_processor_kwargs":null}"#,
                &[],
            ),
            (
                r#"{"messages":[],"media_io_kwargs":{"a":1},"media_io_kwar\u0067s":{"a":{}}}"#,
                &[],
            ),
            (
                r#"{"messages":[],"media_io_kwargs":{"a":{}},"media_io_kwargs":[]}"#,
                &[Field::MediaIoKwargs],
            ),
        ] {
            assert_eq!(gated(fields::CHAT, body), want, "{body}");
            let refused = error(fields::CHAT, body);
            assert_eq!(refused.is_some(), !want.is_empty(), "{body}");
            assert!(refused.is_none_or(|r| want.iter().any(|f| f.name() == r)));
        }
    }

    #[test]
    fn the_checks_read_the_last_duplicate_and_truthiness() {
        let messages = r#""prompt":"p","messages":[]"#;
        // validate_stream_options: stream_options truthy while stream is not.
        for route in [fields::CHAT, fields::CHAT_BATCH, fields::COMPLETION] {
            for (body, refused) in [
                (r#""stream_options":{"include_usage":true}"#, true),
                (r#""stream_options":{"a":1},"stream":0"#, true),
                (r#""stream_options":{"a":1},"stream":true"#, false),
                (r#""stream_options":{},"stream":false"#, false),
                (r#""stream_options":null"#, false),
                (r#""stream_options":{"a":1},"stream_options":{}"#, false),
            ] {
                let got = check(route, &format!("{{{messages},{body}}}"));
                let want = refused.then_some("stream_options");
                assert_eq!(got, want, "{} {body}", route[0].name);
            }
        }
        // check_logprobs (chat) and check_batch_mode.
        for (body, want) in [
            (r#""logprob_token_ids":[1]"#, Some("logprob_token_ids")),
            (r#""logprob_token_ids":[1],"logprobs":true"#, None),
            (
                r#""logprob_token_ids":[1],"logprobs":1,"use_beam_search":true"#,
                Some("logprob_token_ids"),
            ),
            (r#""logprob_token_ids":[],"logprobs":false"#, None),
        ] {
            let body = format!("{{{messages},{body}}}");
            assert_eq!(check(fields::CHAT, &body), want, "{body}");
            assert_eq!(check(fields::CHAT_BATCH, &body), want, "{body}");
        }
        // Not numbers; then the values compared raw (`top_logprobs` -1 or above zero also
        // needs a truthy `logprobs`, absent here).
        for (value, prompt, top) in [
            ("\"1\"", true, true),
            ("[1]", true, true),
            ("{}", true, true),
            ("true", false, true),
            ("NaN", false, false),
            ("-1", false, true),
            ("0", false, false),
            ("-2", true, true),
            ("null", false, false),
        ] {
            for (name, want) in [("prompt_logprobs", prompt), ("top_logprobs", top)] {
                let body = format!(r#"{{{messages},"{name}":{value}}}"#);
                assert_eq!(check(fields::CHAT, &body), want.then_some(name), "{body}");
            }
        }
        let beam = format!(r#"{{{messages},"use_beam_search":1}}"#);
        assert_eq!(check(fields::CHAT_BATCH, &beam), Some("use_beam_search"));
        assert_eq!(check(fields::CHAT, &beam), None);
        // check_generation_prompt: both truthy in the raw body (defaults do not count).
        for (body, refused) in [
            (
                r#""continue_final_message":true,"add_generation_prompt":true"#,
                true,
            ),
            (
                r#""continue_final_message":"x","add_generation_prompt":[0]"#,
                true,
            ),
            (r#""continue_final_message":true"#, false),
            (
                r#""continue_final_message":true,"add_generation_prompt":0"#,
                false,
            ),
        ] {
            let body = format!("{{{messages},{body}}}");
            let want = refused.then_some("continue_final_message");
            assert_eq!(check(fields::CHAT, &body), want, "{body}");
        }
        // check_logprobs (completion): logprobs must be set, and a number.
        for (body, want) in [
            (r#""logprob_token_ids":[1]"#, Some("logprob_token_ids")),
            (
                r#""logprob_token_ids":[1],"logprobs":null"#,
                Some("logprob_token_ids"),
            ),
            (r#""logprob_token_ids":[1],"logprobs":0"#, None),
            (r#""logprobs":"2""#, Some("logprobs")),
            (r#""prompt_logprobs":{}"#, Some("prompt_logprobs")),
        ] {
            let body = format!("{{{messages},{body}}}");
            assert_eq!(check(fields::COMPLETION, &body), want, "{body}");
        }
        // validate_prompt_and_prompt_embeds.
        for (body, refused) in [
            (r#"{}"#, true),
            (r#"{"prompt":""}"#, true),
            (r#"{"prompt":null,"prompt_embeds":[]}"#, true),
            (r#"{"prompt":"x","prompt":""}"#, true),
            (r#"{"prompt":"","prompt":"x"}"#, false),
            (r#"{"prompt":[]}"#, false),
            (r#"{"prompt":"","prompt_embeds":"e"}"#, false),
            (r#"{"prompt_embeds":[""]}"#, false),
        ] {
            assert_eq!(
                check(fields::COMPLETION, body),
                refused.then_some("prompt"),
                "{body}"
            );
        }
        // ResponsesRequest.validate_prompt: any prompt but null.
        assert_eq!(
            check(fields::RESPONSES, r#"{"input":"i","prompt":""}"#),
            Some("prompt")
        );
        assert_eq!(
            check(fields::RESPONSES, r#"{"input":"i","prompt":{}}"#),
            Some("prompt")
        );
        assert_eq!(
            check(fields::RESPONSES, r#"{"input":"i","prompt":null}"#),
            None
        );
        assert_eq!(
            check(
                fields::TOKENIZE,
                r#"{"prompt":"p","stream_options":{"a":1}}"#
            ),
            None
        );
    }

    proptest! {
        #[test]
        fn the_first_error_is_the_tables_first(
            table in any::<prop::sample::Index>(),
            members in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), 0..8usize), 0..24),
        ) {
            let models = models();
            let model = models[table.index(models.len())];
            let table = model.fields;
            prop_assume!(!table.is_empty());
            let values = ["null", "1", "1.5", "\"x\"", "\"12\"", "[1]", "{\"a\":1}", "true"];
            let body = members
                .iter()
                .map(|(name, declared, value)| {
                    let name = if *declared { table[name.index(table.len())].name } else { "not_declared" };
                    format!("\"{name}\":{}", values[*value])
                })
                .collect::<Vec<_>>()
                .join(",");
            let findings = crate::inspect::inspect(format!("{{{body}}}").as_bytes(), 970).unwrap();
            prop_assert_eq!(Model::new(model).first_error(&findings), reference(table, &findings));
        }
    }
}
