//! vLLM 0.31's verdict on an inspected request: [`verdict`] maps (route, findings, upstream
//! facts) to accept / gate reject / another error that vLLM raises first.
//!
//! Pure. The order of checks per route follows vLLM's source (see `contract/README.md`):
//! content type and JSON → pydantic type checks of declared fields → (generate routes) model
//! name, beam search on render routes, tool choice, chat template trust → the gate. On
//! pooling routes the gate runs before the model check (after, on `/pooling`, its
//! handler's checks of `dimensions` and the task).

mod auth;
mod fields;
mod invocations;
mod types;
mod unparsed;

pub use auth::{ApiKeys, UNAUTHORIZED_BODY};
pub use unparsed::PARSE_ERROR_BODY;

use bytes::Bytes;
use http::StatusCode;

use crate::classify::RouteKind;
use crate::inspect::scan::Kind;
use crate::inspect::RepetitionRefusal;
use crate::inspect::{
    Facts, Field, Findings, InspectError, KindSet, PromptForm, Read, StrField, Tagged,
};
use invocations::{invocations_errors, invocations_route, session_refused, Dispatch};

/// What mmgate knows about the upstream vLLM's configuration, for the checks that run
/// before the gate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamFacts {
    /// Served model names (and LoRA adapters); `None` when unknown, which skips the check.
    pub served_models: Option<Vec<String>>,
    /// The upstream runs `--trust-request-chat-template`.
    pub trust_request_chat_template: bool,
    /// The upstream has a tool parser (`--tool-call-parser`), so `tool_choice` is accepted.
    pub tool_call_parser: bool,
    /// The gated routes the upstream serves (from its `/openapi.json`); `None` when unknown.
    pub served_routes: Option<Vec<RouteKind>>,
    /// The served model uses vLLM's Harmony path (gpt-oss), which never reaches the gate on
    /// chat, chat batch and responses.
    pub harmony: bool,
    /// The upstream keeps responses (`VLLM_ENABLE_RESPONSES_API_STORE`), so a
    /// `previous_response_id` can be found instead of answering 404 before the gate.
    pub responses_store: bool,
    /// The served model renders fill-in-the-middle prompts, so a completion's `suffix` with
    /// a text prompt is accepted (otherwise vLLM refuses it before the gate).
    pub fim_suffix: bool,
    /// The upstream runs a Mistral tokenizer (`--tokenizer-mode mistral`): its chat
    /// renderer skips the tool-parser check and refuses any `chat_template` or
    /// `chat_template_kwargs` instead.
    pub mistral_tokenizer: bool,
    /// The upstream's `VLLM_MAX_COMPLETION_PROMPTS`: the most prompts (or prompt
    /// embeddings) a completion may list; `None` for vLLM's default, 1024.
    pub max_completion_prompts: Option<usize>,
    /// The upstream's pooling task (one of [`POOLING_TASKS`]: what its `/pooling` does with
    /// a request that names none, and the only task other than `plugin` it takes there);
    /// `None` when unknown.
    pub pooling_task: Option<&'static str>,
    /// The upstream loads an IOProcessor plugin (`--io-processor-plugin`), so `/pooling`
    /// takes the `plugin` task.
    pub io_processor_plugin: bool,
    /// The upstream runs SageMaker's stateful sessions (`SAGEMAKER_ENABLE_STATEFUL_SESSIONS`):
    /// an `/invocations` request's session header names a session it may know. Without
    /// them, vLLM refuses any such header.
    pub sagemaker_sessions: bool,
}

impl UpstreamFacts {
    /// The nesting the upstream's parser takes: a render server's (recognised by its routes:
    /// none that generates or pools) or, unless the routes show one, `vllm serve`'s.
    pub fn max_json_depth(&self) -> usize {
        use RouteKind::*;
        let full = [
            Chat,
            ChatBatch,
            Completions,
            Responses,
            Embeddings,
            Pooling,
            Score,
            Rerank,
            Classify,
        ];
        match &self.served_routes {
            Some(routes) if !routes.iter().any(|r| full.contains(r)) => {
                crate::inspect::RENDER_MAX_DEPTH
            }
            _ => crate::inspect::SERVE_MAX_DEPTH,
        }
    }
}

/// vLLM's pooling tasks (`PoolingTask`): the words `/pooling`'s `task` takes.
pub const POOLING_TASKS: [&str; 6] = [
    "embed",
    "classify",
    "token_embed",
    "token_classify",
    "plugin",
    "embed&token_classify",
];

/// vLLM's default `VLLM_MAX_COMPLETION_PROMPTS`.
pub const MAX_COMPLETION_PROMPTS: usize = 1024;

/// vLLM's answer to a request, as far as the gate is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The gate lets it through.
    Accept,
    /// The gate rejects it, naming this field.
    Reject(Field),
    /// vLLM refuses it for another reason (trusted or not), before the gate runs.
    Invalid(Invalid),
}

/// Why vLLM refuses a request before (or instead of) the gate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// The content type is not `application/json`.
    #[error("Unsupported Media Type: Only 'application/json' is allowed")]
    ContentType,
    /// The upstream does not serve this route (it answers 404).
    #[error("the upstream does not serve this route")]
    RouteNotServed,
    /// The body does not parse, or is no JSON object; with vLLM's own answer to it (status
    /// and body) where mmgate knows its very words.
    #[error("{0}")]
    Body(InspectError, Option<(StatusCode, Bytes)>),
    /// A declared field is missing or has the wrong JSON type (a pydantic validation error).
    #[error("{field} must be {expected}")]
    FieldType {
        /// The field.
        field: &'static str,
        /// What pydantic expects.
        expected: &'static str,
        /// The gated fields pydantic refuses as sent: they must reach vLLM unchanged.
        gated: Vec<Field>,
    },
    /// A top-level key with a lone surrogate (pydantic `string_unicode`).
    #[error("a top-level key is not valid Unicode (lone surrogate)")]
    KeyNotUnicode,
    /// A check of the route's request model (a pydantic `model_validator`) refuses the
    /// body, naming this parameter, with an error that is no pydantic validation error
    /// (`VLLMValidationError`, or a `TypeError`).
    #[error("vLLM's request model refuses `{0}`")]
    ModelCheck(&'static str),
    /// `/pooling`'s handler refuses the request before the gate, naming this parameter
    /// (`ServingPooling._verify_pooling_task`): a `dimensions` that is not null, or a task
    /// the upstream does not pool. With the gated fields some model of the route's union
    /// refuses as sent: their types may be what made the body an `IOProcessorRequest`, so
    /// they reach vLLM unchanged.
    #[error("vLLM's pooling handler refuses `{0}` before the gate")]
    PoolingTask(&'static str, Vec<Field>),
    /// The model is not served (404 before the gate).
    #[error("The model `{0}` does not exist.")]
    UnknownModel(String),
    /// `use_beam_search` on a render route.
    #[error("Beam search is not supported by the render endpoint")]
    BeamSearchRender,
    /// `tool_choice` without a tool parser on the upstream.
    #[error("tool_choice requires --tool-call-parser on the upstream")]
    ToolChoice,
    /// `previous_response_id` where vLLM cannot look it up: on the render endpoint, which
    /// is stateless (400), or on a server without a response store (404); before the gate.
    #[error("previous_response_id cannot be looked up (render endpoint, or no response store)")]
    PreviousResponse,
    /// `stream` with `use_beam_search` on a completion (refused before the model check).
    #[error("Streaming is not currently supported with beam search")]
    StreamBeamSearch,
    /// A completion's `suffix` that vLLM cannot render (with `echo`, `prompt_embeds`,
    /// `truncate_prompt_tokens` or token prompts, or a model without FIM rendering).
    #[error("suffix is not supported with this request or model")]
    Suffix,
    /// `prompt_embeds` with `echo` or `prompt_logprobs` on a completion.
    #[error("prompt_embeds is not compatible with echo or prompt_logprobs")]
    PromptEmbeds,
    /// A background response on a server without a response store (`/v1/responses`).
    #[error("background responses need the upstream's response store")]
    BackgroundStore,
    /// A Responses `input` item that the renderer refuses to turn into a chat message (of
    /// a type it does not take, or a reasoning item with encrypted content).
    #[error("the Responses renderer does not take an input item")]
    InputItem,
    /// `/invocations`: no request type of the upstream's handlers takes the body (vLLM's
    /// "Cannot find suitable handler for request").
    #[error("no request type of the upstream's /invocations handlers takes the body")]
    NoHandler,
    /// `/invocations`: a check of a request type its dispatch tries raises an error that is
    /// no validation error ([`Invalid::ModelCheck`]), which ends the dispatch; earlier types
    /// may have refused the gated fields' types, so they reach vLLM as sent.
    #[error("the /invocations dispatch ends at a request model's check of `{0}`")]
    DispatchEnded(&'static str),
    /// A `chat_template` or `chat_template_kwargs` for a Mistral tokenizer.
    #[error("chat_template is not supported for Mistral tokenizers.")]
    MistralTemplate,
    /// A request chat template without `--trust-request-chat-template`.
    #[error("Chat template is passed with request, but --trust-request-chat-template is not set.")]
    ChatTemplate,
    /// `/invocations`: SageMaker's session layer refuses the request before anything else
    /// reads it: a body with a top-level `requestType` (a session request, or a malformed
    /// one), or a session header while stateful sessions are off.
    #[error("SageMaker's session layer refuses the request (a requestType member, or a session header while sessions are off)")]
    SageMakerSession,
}

impl Invalid {
    /// Whether the body itself could not be understood (an unclassifiable body).
    pub fn unclassifiable(&self) -> bool {
        matches!(self, Invalid::ContentType | Invalid::Body(..))
    }

    /// Whether the body is refused at one of mmgate's own inspection bounds (more members
    /// than it records), which vLLM may well take.
    pub fn gateway_bound(&self) -> bool {
        matches!(
            self,
            Invalid::Body(
                InspectError::Syntax(crate::inspect::scan::SyntaxError::TooManyMembers { .. }),
                _
            )
        )
    }

    /// vLLM's own answer to the body, where mmgate knows its very words: the content-type
    /// error, or its refusal of a body it cannot parse.
    pub fn vllm_answer(&self) -> Option<Bytes> {
        match self {
            Invalid::ContentType => Some(Bytes::from_static(
                crate::error::CONTENT_TYPE_BODY.as_bytes(),
            )),
            Invalid::Body(_, answer) => answer.as_ref().map(|(_, body)| body.clone()),
            _ => None,
        }
    }

    /// The status of vLLM's answer: 404 for an unknown model, 500 for the `RecursionError`s
    /// of `/invocations`' own parser, else 400.
    pub fn vllm_status(&self) -> StatusCode {
        match self {
            Invalid::UnknownModel(_) => StatusCode::NOT_FOUND,
            Invalid::Body(_, Some((status, _))) => *status,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The gated fields whose wrong types are part of this error, which must reach vLLM as
    /// sent.
    pub fn mistyped_gated(&self) -> &[Field] {
        match self {
            Invalid::FieldType { gated, .. } | Invalid::PoolingTask(_, gated) => gated,
            // vLLM refuses it whatever the gated fields hold: it goes as sent.
            Invalid::NoHandler | Invalid::DispatchEnded(_) | Invalid::SageMakerSession => {
                &Field::ALL
            }
            _ => &[],
        }
    }
}

/// Whether a `content-type` value passes vLLM's `validate_json_request`: the media type
/// before the first `;`, lowercased, must be exactly `application/json`.
pub fn json_content_type(value: Option<&[u8]>) -> bool {
    let Some(v) = value else { return false };
    let media = v.split(|&c| c == b';').next().unwrap_or(b"");
    // HTTP parsers strip surrounding whitespace of the whole value; vLLM does nothing more.
    media.eq_ignore_ascii_case(b"application/json")
}

/// Which route family decides the check order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Chat { render: bool },
    Completion,
    Responses,
    Tokenize,
    Pooling,
}

fn family(route: RouteKind) -> Family {
    match route {
        RouteKind::Chat | RouteKind::ChatBatch => Family::Chat { render: false },
        RouteKind::ChatRender => Family::Chat { render: true },
        RouteKind::Completions | RouteKind::CompletionsRender => Family::Completion,
        RouteKind::Responses | RouteKind::ResponsesRender => Family::Responses,
        RouteKind::Tokenize => Family::Tokenize,
        RouteKind::Embeddings
        | RouteKind::Pooling
        | RouteKind::Score
        | RouteKind::Rerank
        | RouteKind::Classify
        | RouteKind::Invocations => Family::Pooling,
    }
}

/// Which gated fields the route's pydantic model declares (and so type-checks).
fn declared(route: RouteKind, f: &Findings) -> (bool, bool) {
    let facts = &f.facts;
    match route {
        RouteKind::Chat
        | RouteKind::ChatBatch
        | RouteKind::ChatRender
        | RouteKind::Responses
        | RouteKind::ResponsesRender => (true, true),
        RouteKind::Completions | RouteKind::CompletionsRender => (false, false),
        // Union of a completion form (neither) and a chat form (both).
        RouteKind::Tokenize => {
            let chat = tokenize_chat_form(f);
            (chat, chat)
        }
        // Text and chat forms both declare mm_processor_kwargs; only the chat form declares
        // media_io_kwargs.
        RouteKind::Embeddings | RouteKind::Pooling | RouteKind::Classify => {
            (true, facts.has_messages && !facts.has_input)
        }
        RouteKind::Score | RouteKind::Rerank => (true, false),
        // Judged as the route its body dispatches to ([`invocations_route`]).
        RouteKind::Invocations => (false, false),
    }
}

/// Whether `/tokenize`'s body is its chat form. Both forms take extra members, so a body
/// with `messages` and `prompt` may validate as either; pydantic's smart mode then takes the
/// one that sets more fields ([`types::Declared::chosen`]): the chat form with a message, or
/// with a member only it declares (`mm_processor_kwargs`, `chat_template`, `tools`, ...), and
/// the completion form on a tie. (Checked against pydantic 2.14's `TypeAdapter` and the
/// render server.)
fn tokenize_chat_form(f: &Findings) -> bool {
    if !f.facts.has_messages {
        return false;
    }
    if f.facts.read.get(Read::Prompt).is_none() {
        return true;
    }
    route_declared(RouteKind::Tokenize).chosen(f) == Some("TokenizeChatRequest")
}

/// What pydantic certainly refuses before the gate: a before-validator, a declared field's
/// type or absence in every request model of the route, or `model`'s type.
fn type_errors(route: RouteKind, f: &Findings, up: &UpstreamFacts) -> Option<Invalid> {
    if f.facts.surrogate_key {
        return Some(Invalid::KeyNotUnicode);
    }
    if route == RouteKind::Invocations {
        return invocations_errors(f, up);
    }
    request_errors(route, f, up, true)
}

/// What the route's request models certainly refuse (`model`: whether the body's `model` is
/// validated; on `/invocations` SageMaker's adapter injection replaces it with the adapter
/// header's value, null without one).
fn request_errors(
    route: RouteKind,
    f: &Findings,
    up: &UpstreamFacts,
    model: bool,
) -> Option<Invalid> {
    if matches!(
        route,
        RouteKind::Embeddings | RouteKind::Pooling | RouteKind::Classify
    ) {
        if let Some(parameter) = removed_pooling_parameter(f) {
            return Some(Invalid::ModelCheck(parameter));
        }
    }
    let completion = matches!(route, RouteKind::Completions | RouteKind::CompletionsRender);
    if completion {
        if let Some(parameter) = too_many_prompts(f, up) {
            return Some(Invalid::ModelCheck(parameter));
        }
    }
    if matches!(route, RouteKind::Chat | RouteKind::ChatRender) && chat_raises(f) {
        return Some(Invalid::ModelCheck("messages"));
    }
    let declared = route_declared(route);
    let gated = || declared.mistyped_gated(f);
    let refusal = declared.refusal(f);
    if let Some(types::Refusal::Check(parameter)) = refusal {
        return Some(Invalid::ModelCheck(parameter));
    }
    // Every generating route but the Responses API's declares `response_format` and
    // `repetition_detection`.
    let formats =
        generating(route) && !matches!(route, RouteKind::Responses | RouteKind::ResponsesRender);
    // The dataclass's `__post_init__` raises vLLM's own error while pydantic validates the
    // fields, which ends validation (and /invocations' dispatch) there.
    if formats && f.facts.repetition_detection == RepetitionRefusal::PostInit {
        return Some(Invalid::ModelCheck("repetition_detection"));
    }
    if let Some(types::Refusal::Field(field)) = refusal {
        return Some(field_type(field, "of the type vLLM declares", gated()));
    }
    if generating(route) {
        if f.facts.structured_outputs_refused {
            return Some(field_type(
                "structured_outputs",
                STRUCTURED_OUTPUTS,
                gated(),
            ));
        }
        if formats && f.facts.response_format_refused {
            return Some(field_type("response_format", RESPONSE_FORMAT, gated()));
        }
        if f.facts.logit_bias_refused {
            return Some(field_type("logit_bias", "an object of numbers", gated()));
        }
        // Declared by the chat and completion requests; the batch request keeps it as an
        // extra member, which its rebuilt chat requests validate.
        if formats && f.facts.repetition_detection == RepetitionRefusal::Mistyped {
            return Some(field_type(
                "repetition_detection",
                "RepetitionDetectionParams",
                gated(),
            ));
        }
    }
    if let (true, StrField::Other(_)) = (model, &f.facts.model) {
        return Some(field_type("model", "a string", gated()));
    }
    // The batch route then validates each conversation as a chat request, built from the
    // batch request's fields (extra ones included) with the conversation as `messages`: its
    // before-validators, then its types.
    if route == RouteKind::ChatBatch {
        if f.member("messages").is_some_and(|m| m.misshapen_chat) {
            return Some(field_type("messages", "of the type vLLM declares", gated()));
        }
        let chat = route_declared(RouteKind::Chat);
        if let Some(parameter) = chat.rebuilt_check(f) {
            return Some(Invalid::ModelCheck(parameter));
        }
        if let Some(field) = chat.rebuilt_refusal(f, "messages") {
            return Some(field_type(field, "of the type vLLM declares", gated()));
        }
    }
    if completion && f.facts.prompt == PromptForm::Mixed {
        return Some(field_type("prompt", MIXED_PROMPT, gated()));
    }
    None
}

/// Whether the chat request's before-validators raise a `TypeError`: on a `messages` that
/// Python cannot iterate (null, a bool, a number), or on one of its messages
/// ([`crate::inspect::Member::chat_raises`]).
fn chat_raises(f: &Findings) -> bool {
    f.member("messages").is_some_and(|m| {
        m.chat_raises
            || matches!(
                m.kind,
                Kind::Null | Kind::Bool(_) | Kind::Number { .. } | Kind::NonFinite
            )
    })
}

/// `reject_removed_pooling_parameters`, the before-validator of the embeddings, pooling and
/// classification request unions (so ahead of every model's own checks and types): a
/// `normalize` member of any value, null included, or a `task` naming a removed task.
fn removed_pooling_parameter(f: &Findings) -> Option<&'static str> {
    if f.member("normalize").is_some() {
        return Some("normalize");
    }
    let task = f.member("task")?;
    (task.is_one_of(&["score", "encode"]) == Some(true)).then_some("task")
}

/// What `/pooling`'s handler refuses before the gate (`ServingPooling._verify_pooling_task`),
/// in its order: a `dimensions` that is not null (an undeclared one of an
/// `IOProcessorRequest` too), then the task, which is `plugin` for an `IOProcessorRequest`
/// (the body validates as no other model) and otherwise the body's `task`, or the
/// upstream's own when it names none. `plugin` is refused without an IOProcessor plugin;
/// any other task but the upstream's pooling task is refused. With that task unknown, only
/// `embed` and `classify` are judged: the upstream supports them exactly when it serves
/// their routes.
fn pooling_handler(f: &Findings, up: &UpstreamFacts) -> Option<&'static str> {
    if f.member("dimensions").is_some_and(|m| m.kind != Kind::Null) {
        return Some("dimensions");
    }
    let task = f.member("task").filter(|m| m.kind != Kind::Null);
    let is = |word: &str| task.and_then(|t| t.is_one_of(&[word])) == Some(true);
    let refused = if route_declared(RouteKind::Pooling).chosen(f) == Some("IOProcessorRequest")
        || is("plugin")
    {
        !up.io_processor_plugin && up.pooling_task != Some("plugin")
    } else {
        let task = task?;
        match (up.pooling_task, &up.served_routes) {
            (Some(pooling), _) => task.is_one_of(&[pooling]) == Some(false),
            (None, Some(routes)) => [
                ("embed", RouteKind::Embeddings),
                ("classify", RouteKind::Classify),
            ]
            .into_iter()
            .any(|(word, route)| is(word) && !routes.contains(&route)),
            (None, None) => false,
        }
    };
    refused.then_some("task")
}

/// `CompletionRequest.validate_prompt_list_length`: a `prompt` list of more than the
/// server's `VLLM_MAX_COMPLETION_PROMPTS` elements, unless it is a token list (its first
/// element a Python `int`: vLLM's `is_list_of` looks at that one only), or a
/// `prompt_embeds` list of more.
fn too_many_prompts(f: &Findings, up: &UpstreamFacts) -> Option<&'static str> {
    let max = up.max_completion_prompts.unwrap_or(MAX_COMPLETION_PROMPTS);
    let listed = |name| {
        f.member(name)
            .filter(|m| matches!(m.kind, Kind::Array { .. }))
            .map_or(0, |m| m.len)
    };
    if listed("prompt") > max && !f.facts.prompt_first_int {
        return Some("prompt");
    }
    (listed("prompt_embeds") > max).then_some("prompt_embeds")
}

/// The routes of vLLM's generating request models (chat, batch, completion, Responses),
/// which declare `structured_outputs` (its `StructuredOutputsParams`, a dataclass the
/// generated tables do not describe) and `logit_bias` (`dict[str, float]`, whose values
/// they do not describe).
fn generating(route: RouteKind) -> bool {
    matches!(
        route,
        RouteKind::Chat
            | RouteKind::ChatRender
            | RouteKind::ChatBatch
            | RouteKind::Completions
            | RouteKind::CompletionsRender
            | RouteKind::Responses
            | RouteKind::ResponsesRender
    )
}

const RESPONSE_FORMAT: &str = "a response format whose json_schema has a string name";

const STRUCTURED_OUTPUTS: &str =
    "an object of StructuredOutputsParams' fields with exactly one constraint";

const MIXED_PROMPT: &str = "a string or a list of strings, integers or integer lists";

fn field_type(field: &'static str, expected: &'static str, gated: Vec<Field>) -> Invalid {
    Invalid::FieldType {
        field,
        expected,
        gated,
    }
}

/// The fields the route's pydantic model declares, indexed once ([`types::Declared`]).
fn route_declared(route: RouteKind) -> &'static types::Declared {
    use std::sync::LazyLock;
    use types::Declared;
    static CHAT: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::CHAT));
    static CHAT_BATCH: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::CHAT_BATCH));
    static COMPLETION: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::COMPLETION));
    static RESPONSES: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::RESPONSES));
    static TOKENIZE: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::TOKENIZE));
    static EMBEDDINGS: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::EMBEDDINGS));
    static POOLING: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::POOLING));
    static SCORE: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::SCORE));
    static RERANK: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::RERANK));
    static CLASSIFY: LazyLock<Declared> = LazyLock::new(|| Declared::new(fields::CLASSIFY));
    static NONE: LazyLock<Declared> = LazyLock::new(|| Declared::new(&[]));
    match route {
        RouteKind::Chat | RouteKind::ChatRender => &CHAT,
        RouteKind::ChatBatch => &CHAT_BATCH,
        RouteKind::Completions | RouteKind::CompletionsRender => &COMPLETION,
        RouteKind::Responses | RouteKind::ResponsesRender => &RESPONSES,
        RouteKind::Tokenize => &TOKENIZE,
        RouteKind::Embeddings => &EMBEDDINGS,
        RouteKind::Pooling => &POOLING,
        RouteKind::Score => &SCORE,
        RouteKind::Rerank => &RERANK,
        RouteKind::Classify => &CLASSIFY,
        RouteKind::Invocations => &NONE,
    }
}

fn gate(f: &Findings) -> Verdict {
    f.offending()
        .next()
        .map_or(Verdict::Accept, Verdict::Reject)
}

/// vLLM 0.31's verdict for an untrusted server on a parsed body sent to a route it serves
/// (without the SageMaker adapter header, [`judge`]).
pub fn verdict(route: RouteKind, f: &Findings, up: &UpstreamFacts) -> Verdict {
    verdict_with(route, f, up, Head::default())
}

/// [`verdict`], with what SageMaker's layers read from the request's head on
/// `/invocations`: the session header, and the adapter header, which its adapter injection
/// makes the body's `model` (see `request_errors`).
fn verdict_with(route: RouteKind, f: &Findings, up: &UpstreamFacts, head: Head<'_>) -> Verdict {
    if route == RouteKind::Invocations && session_refused(f, up, head) {
        return Verdict::Invalid(Invalid::SageMakerSession);
    }
    if let Some(e) = type_errors(route, f, up) {
        return Verdict::Invalid(e);
    }
    let target = match route {
        // Found by `type_errors`, which refuses the body when there is none.
        RouteKind::Invocations => match invocations_route(f, up) {
            Dispatch::To(route) => route,
            Dispatch::Ends(_) | Dispatch::Nowhere => RouteKind::Embeddings,
        },
        r => r,
    };
    let fam = family(target);
    if fam == Family::Pooling {
        if target == RouteKind::Pooling {
            if let Some(parameter) = pooling_handler(f, up) {
                // On `/invocations`, earlier request types may have refused the gated
                // fields' types too.
                let gated = match route {
                    RouteKind::Invocations => Field::ALL.to_vec(),
                    _ => route_declared(RouteKind::Pooling).mistyped_gated(f),
                };
                return Verdict::Invalid(Invalid::PoolingTask(parameter, gated));
            }
        }
        return gate(f);
    }
    // The completion handler's first check, before the model's (not on /render).
    if fam == Family::Completion
        && route != RouteKind::CompletionsRender
        && f.facts.stream
        && f.facts.beam_search
    {
        return Verdict::Invalid(Invalid::StreamBeamSearch);
    }
    // Starlette decodes header values as Latin-1.
    let adapter = |v: &[u8]| v.iter().map(|&b| char::from(b)).collect::<String>();
    let model = match (route, &f.facts.model) {
        (RouteKind::Invocations, _) => head.adapter.map(adapter).map(std::borrow::Cow::Owned),
        (_, StrField::Str(model)) => Some(std::borrow::Cow::Borrowed(model.as_str())),
        _ => None,
    };
    if let (Some(served), Some(model)) = (&up.served_models, model) {
        if !model.is_empty() && !served.iter().any(|m| *m == model) {
            return Verdict::Invalid(Invalid::UnknownModel(model.into_owned()));
        }
    }
    let facts = &f.facts;
    let harmony_route = matches!(
        route,
        RouteKind::Chat
            | RouteKind::ChatBatch
            | RouteKind::Responses
            | RouteKind::ChatRender
            | RouteKind::ResponsesRender
    );
    // The render endpoint's own check, after the model's and before any rendering.
    if route == RouteKind::ResponsesRender && facts.previous_response {
        return Verdict::Invalid(Invalid::PreviousResponse);
    }
    if up.harmony && harmony_route {
        return Verdict::Accept;
    }
    if route == RouteKind::Responses && !up.responses_store && stored_background(f) {
        return Verdict::Invalid(Invalid::BackgroundStore);
    }
    if route == RouteKind::Responses && facts.previous_response && !up.responses_store {
        return Verdict::Invalid(Invalid::PreviousResponse);
    }
    match fam {
        Family::Chat { render } => {
            if render && facts.use_beam_search() {
                return Verdict::Invalid(Invalid::BeamSearchRender);
            }
            // The batch route renders its conversations without the renderer's tool-choice
            // check (and its `tool_choice` can only be `"none"`).
            let batch = route == RouteKind::ChatBatch;
            if !batch && up.mistral_tokenizer {
                // `validate_request_params` of vLLM's Mistral tokenizer, instead of the
                // tool-parser check.
                let given = |name| f.member(name).is_some_and(|m| m.kind != Kind::Null);
                if given("chat_template") || given("chat_template_kwargs") {
                    return Verdict::Invalid(Invalid::MistralTemplate);
                }
            } else if !batch
                && facts.needs_tool_parser()
                && (!up.tool_call_parser || !facts.has_tools())
            {
                return Verdict::Invalid(Invalid::ToolChoice);
            }
            if !up.trust_request_chat_template && facts.sends_chat_template() {
                return Verdict::Invalid(Invalid::ChatTemplate);
            }
        }
        Family::Responses | Family::Tokenize => {
            let chat_form = fam == Family::Responses || declared(route, f).0;
            let template = if fam == Family::Responses {
                facts.chat_template_kwargs_template
            } else {
                facts.sends_chat_template()
            };
            if chat_form && !up.trust_request_chat_template && template {
                return Verdict::Invalid(Invalid::ChatTemplate);
            }
            if fam == Family::Responses && unsupported_input_item(f) {
                return Verdict::Invalid(Invalid::InputItem);
            }
        }
        Family::Completion => {
            if let Some(e) = completion_check(&f.facts, up) {
                return Verdict::Invalid(e);
            }
        }
        Family::Pooling => {}
    }
    gate(f)
}

/// Whether a Responses request asks for a stored background response (`background`, and
/// `store`, which is true unless given): vLLM's generating route refuses it without a
/// response store, after the model check (`_validate_create_responses_input`).
fn stored_background(f: &Findings) -> bool {
    let flag = |name, default| match f.member(name) {
        None => default,
        Some(m) => m.as_bool(),
    };
    flag("background", false) && flag("store", true)
}

/// Whether the Responses renderer refuses an `input` item as it turns the items into chat
/// messages, before the gate (`_construct_message_from_response_item`, on the non-Harmony
/// path). `input_item_parsing` made models of the function calls and reasoning items that
/// fit them (string `arguments`, `call_id` and `name`; a `summary` list); the renderer takes
/// those, but a reasoning item with encrypted content. Of the items left as they came, it
/// takes a function call's output and any that keeps a `role` (every message; pydantic
/// keeps the other keys of an item it reads as a dict).
fn unsupported_input_item(f: &Findings) -> bool {
    let Some(input) = f.member("input") else {
        return false;
    };
    let is = |item: Tagged<'_>, key: &[u8], kinds: KindSet| {
        item.get(key).is_some_and(|k| k.kinds.within(kinds))
    };
    let text = KindSet::STR.or(KindSet::NOT_INT);
    input.tagged().any(|item| {
        let tag = item.tag();
        if tag.is(b"reasoning") && is(item, b"summary", KindSet::ARRAY) {
            // `if item.encrypted_content:` refuses a non-empty one.
            return item
                .get(b"encrypted_content")
                .is_some_and(|k| !matches!(k.kind, Kind::Null | Kind::Str { empty: true }));
        }
        if tag.is(b"message") && (empty_answer(item) || refusal_answer(item)) {
            // `item.content[0]` raises, or has no `text`: vLLM answers 500.
            return true;
        }
        let call = tag.is(b"function_call")
            && [&b"arguments"[..], b"call_id", b"name"]
                .iter()
                .all(|key| is(item, key, text));
        !(call || tag.is(b"function_call_output") || item.get(b"role").is_some())
    })
}

/// Whether `input_item_parsing` makes an assistant message of a `"message"` item whose
/// content is an empty list, which the renderer then reads the first part of.
fn empty_answer(item: Tagged<'_>) -> bool {
    output_message(item)
        && item
            .get(b"content")
            .is_some_and(|k| k.kind == Kind::Array { empty: true })
}

/// Whether `input_item_parsing` surely makes an assistant message of a `"message"` item
/// whose first content part is a refusal, whose `text` the renderer then reads: every part
/// an object of a string `refusal` (`"refusal"`) or `text` (`"output_text"`) and nothing
/// else, so that the model surely takes them.
fn refusal_answer(item: Tagged<'_>) -> bool {
    let text = KindSet::STR.or(KindSet::NOT_INT);
    let Some(list) = item.get(b"content").and_then(|k| k.list.as_ref()) else {
        return false;
    };
    let plain = |part: Tagged<'_>| {
        let field: &[u8] = if part.is(b"refusal") {
            b"refusal"
        } else if part.is(b"output_text") {
            b"text"
        } else {
            return false;
        };
        part.get(field).is_some_and(|k| k.kinds.within(text))
            && part
                .keys
                .iter()
                .all(|k| k.name.is(b"type") || k.name.is(field))
    };
    output_message(item)
        && list.elements.within(KindSet::OBJECT)
        && item.objects(list).next().is_some_and(|p| p.is(b"refusal"))
        && item.objects(list).all(plain)
}

/// Whether a `"message"` item is one `input_item_parsing` makes an assistant message of, its
/// content being a list: `role` `"assistant"`, and an `id` and `status` that the model takes,
/// if any.
fn output_message(item: Tagged<'_>) -> bool {
    let word = |key: &[u8], words: &[&[u8]]| {
        item.get(key)
            .and_then(|k| k.text)
            .is_some_and(|t| words.iter().any(|w| t.is(w)))
    };
    word(b"role", &[b"assistant"])
        && item
            .get(b"id")
            .is_none_or(|k| k.kinds.within(KindSet::STR.or(KindSet::NOT_INT)))
        && (item.get(b"status").is_none()
            || word(b"status", &[b"in_progress", b"completed", b"incomplete"]))
}

/// The completion renderer's checks, in its order, before it reaches the gate.
fn completion_check(facts: &Facts, up: &UpstreamFacts) -> Option<Invalid> {
    let embeds = !matches!(facts.read.get(Read::PromptEmbeds), None | Some(Kind::Null));
    if facts.suffix {
        if facts.echo || embeds || facts.truncate_prompt_tokens {
            return Some(Invalid::Suffix);
        }
        match facts.prompt {
            PromptForm::Text if !up.fim_suffix => return Some(Invalid::Suffix),
            PromptForm::Text | PromptForm::Empty => {}
            PromptForm::Tokens | PromptForm::Mixed | PromptForm::Other => {
                return Some(Invalid::Suffix)
            }
        }
    }
    let prompt_logprobs = !matches!(
        facts.read.get(Read::PromptLogprobs),
        None | Some(Kind::Null)
    );
    if embeds && (facts.echo || prompt_logprobs) {
        return Some(Invalid::PromptEmbeds);
    }
    None
}

/// What vLLM reads from a request's head besides its route.
#[derive(Debug, Clone, Copy, Default)]
pub struct Head<'a> {
    /// `Content-Type`.
    pub content_type: Option<&'a [u8]>,
    /// The first `X-Amzn-SageMaker-Adapter-Identifier`, which SageMaker's adapter
    /// injection makes an `/invocations` body's `model`.
    pub adapter: Option<&'a [u8]>,
    /// The first `X-Amzn-SageMaker-Session-Id`, which SageMaker's session layer checks on
    /// `/invocations`.
    pub session: Option<&'a [u8]>,
}

impl<'a> Head<'a> {
    /// The header that names the model SageMaker's adapter injection puts in the body.
    pub const ADAPTER: &'static str = "x-amzn-sagemaker-adapter-identifier";

    /// The header that names a SageMaker stateful session.
    pub const SESSION: &'static str = "x-amzn-sagemaker-session-id";

    /// A head with only a content type.
    pub fn content_type(content_type: Option<&'a [u8]>) -> Self {
        Head {
            content_type,
            ..Head::default()
        }
    }

    /// The head of a request to `route`: its content type and, on `/invocations` (the only
    /// route whose layers read them), SageMaker's headers (their first values).
    pub fn of(headers: &'a http::HeaderMap, route: RouteKind) -> Self {
        let first = |name| headers.get(name).map(http::HeaderValue::as_bytes);
        let content_type = first(http::header::CONTENT_TYPE);
        if route != RouteKind::Invocations {
            return Head::content_type(content_type);
        }
        Head {
            content_type,
            adapter: first(http::HeaderName::from_static(Head::ADAPTER)),
            session: first(http::HeaderName::from_static(Head::SESSION)),
        }
    }
}

/// Classifies a whole request in vLLM's order: the route (FastAPI routes before it reads
/// anything: a route the upstream does not serve is its 404), the content type, the body,
/// then [`verdict`].
pub fn judge(
    route: RouteKind,
    head: Head<'_>,
    body: &[u8],
    max_depth: usize,
    up: &UpstreamFacts,
) -> (Verdict, Option<Findings>) {
    let content_type = head.content_type;
    let max_depth = match route {
        RouteKind::Invocations => max_depth.min(crate::inspect::INVOCATIONS_MAX_DEPTH),
        _ => max_depth,
    };
    let findings = crate::inspect::inspect(body, max_depth);
    if up
        .served_routes
        .as_ref()
        .is_some_and(|r| !r.contains(&route))
    {
        return (Verdict::Invalid(Invalid::RouteNotServed), findings.ok());
    }
    let session = unparsed::Session::of(head.session, up.sagemaker_sessions);
    let unparsed = |e: InspectError| {
        let answer = unparsed::answer(route, &e, body, session);
        (Verdict::Invalid(Invalid::Body(e, answer)), None)
    };
    if !json_content_type(content_type) {
        // FastAPI parses an `application/*+json` body before vLLM checks the content type
        // (not on /invocations, which reads the body itself).
        return match findings {
            Err(e)
                if route != RouteKind::Invocations
                    && parsed_by_fastapi(content_type)
                    && !matches!(e, InspectError::Empty | InspectError::NotObject { .. }) =>
            {
                unparsed(e)
            }
            f => (Verdict::Invalid(Invalid::ContentType), f.ok()),
        };
    }
    match findings {
        // `/invocations` encodes the parsed body again, which takes one container less
        // (looked for again, for its place, only in a body that nests that deep).
        Ok(f)
            if route == RouteKind::Invocations
                && f.deepest >= crate::inspect::INVOCATIONS_MAX_DEPTH =>
        {
            let limit = crate::inspect::INVOCATIONS_MAX_DEPTH - 1;
            match crate::inspect::containers_within(body, limit) {
                Ok(()) => (verdict_with(route, &f, up, head), Some(f)),
                Err(e) => {
                    let answer = Some(unparsed::reencoding_too_deep());
                    (Verdict::Invalid(Invalid::Body(e, answer)), Some(f))
                }
            }
        }
        Ok(f) => (verdict_with(route, &f, up, head), Some(f)),
        Err(e) => unparsed(e),
    }
}

/// Whether FastAPI reads a body of this content type as JSON: Python's `email.message`
/// media type (before the first `;`, stripped, lowercased, exactly one `/`) is
/// `application/json` or `application/<anything>+json`.
fn parsed_by_fastapi(content_type: Option<&[u8]>) -> bool {
    let Some(v) = content_type else { return false };
    let media = v.split(|&c| c == b';').next().unwrap_or(b"");
    // Python's str.strip() of the Latin-1 text: ASCII whitespace, \x1c-\x1f, \x85, \xa0.
    let space = |c: &u8| c.is_ascii_whitespace() || matches!(c, 0x0b | 0x1c..=0x1f | 0x85 | 0xa0);
    let start = media.iter().position(|c| !space(c)).unwrap_or(media.len());
    let end = media
        .iter()
        .rposition(|c| !space(c))
        .map_or(start, |i| i + 1);
    let media = media[start..end].to_ascii_lowercase();
    let mut parts = media.split(|&c| c == b'/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(b"application"), Some(sub), None) => sub == b"json" || sub.ends_with(b"+json"),
        _ => false,
    }
}

/// How many models a route's body may validate as (each refuses a body that is no object).
fn route_models(route: RouteKind) -> usize {
    route_declared(route).models()
}

#[cfg(test)]
mod tests;
