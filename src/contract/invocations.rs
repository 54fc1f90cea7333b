//! SageMaker's `/invocations`: its session layer, and its dispatch of a body to the first
//! request type of the server's handlers that validates it.

use super::*;

/// The request types `/invocations` tries, in vLLM's order, named by the routes whose
/// handlers take them: a generating server's chat and completion types, then a pooling
/// server's embedding or classification type, rerank, score and pooling.
const INVOCATION_TYPES: [RouteKind; 7] = [
    RouteKind::Chat,
    RouteKind::Completions,
    RouteKind::Embeddings,
    RouteKind::Classify,
    RouteKind::Rerank,
    RouteKind::Score,
    RouteKind::Pooling,
];

/// Where SageMaker's dispatch takes an `/invocations` body.
pub(super) enum Dispatch {
    /// To the first request type that validates it, named by its route.
    To(RouteKind),
    /// A request type's check raised an error that is no pydantic `ValidationError` (a
    /// `VLLMValidationError`, a `TypeError`), naming this parameter: the dispatch ends.
    Ends(&'static str),
    /// No request type validates it.
    Nowhere,
}

/// The route an `/invocations` body dispatches to (SageMaker's dispatch: the first request
/// type of the server's handlers that validates it, moving on only past validation
/// errors). With the served routes known, each type is judged in turn: a check that
/// refuses the body ([`Invalid::ModelCheck`]) ends the dispatch, other certain refusals move
/// it on. Unknown, the type the body's shape names.
pub(super) fn invocations_route(f: &Findings, up: &UpstreamFacts) -> Dispatch {
    let Some(served) = &up.served_routes else {
        return Dispatch::To(if f.facts.has_messages {
            RouteKind::Chat
        } else if f.facts.read.get(Read::Prompt).is_some() {
            RouteKind::Completions
        } else {
            RouteKind::Embeddings
        });
    };
    for route in INVOCATION_TYPES.into_iter().filter(|r| served.contains(r)) {
        match request_errors(route, f, up, false) {
            None => return Dispatch::To(route),
            Some(Invalid::ModelCheck(parameter)) => return Dispatch::Ends(parameter),
            Some(_) => {}
        }
    }
    Dispatch::Nowhere
}

/// What pydantic certainly refuses of an `/invocations` body: no request type of the
/// server's handlers takes it, or (the handlers unknown) the type its shape names refuses
/// its `prompt` or a gated field. Its `model` is not the body's ([`request_errors`]).
pub(super) fn invocations_errors(f: &Findings, up: &UpstreamFacts) -> Option<Invalid> {
    let target = match invocations_route(f, up) {
        Dispatch::To(route) => route,
        Dispatch::Ends(parameter) => return Some(Invalid::DispatchEnded(parameter)),
        Dispatch::Nowhere => return Some(Invalid::NoHandler),
    };
    if up.served_routes.is_some() {
        // The first type that may take it; nothing more is certain.
        return None;
    }
    let gated = invocations_mistyped(f, target);
    if target == RouteKind::Completions && f.facts.prompt == PromptForm::Mixed {
        return Some(field_type("prompt", MIXED_PROMPT, gated));
    }
    let first = gated.first()?.name();
    Some(field_type(first, "of the type vLLM declares", gated))
}

/// The gated fields of an /invocations body that the model of the handler its shape names
/// refuses: `mm_processor_kwargs` not an object, `media_io_kwargs` not an object of objects.
fn invocations_mistyped(f: &Findings, target: RouteKind) -> Vec<Field> {
    let (mm, media) = declared(target, f);
    let object_or_null = |field: Field| {
        matches!(
            f.field(field).kind,
            None | Some(Kind::Null) | Some(Kind::Object { .. })
        )
    };
    let mut mistyped = Vec::new();
    if mm && !object_or_null(Field::MmProcessorKwargs) {
        mistyped.push(Field::MmProcessorKwargs);
    }
    if media
        && (!object_or_null(Field::MediaIoKwargs)
            || f.field(Field::MediaIoKwargs).non_object_member.is_some())
    {
        mistyped.push(Field::MediaIoKwargs);
    }
    mistyped
}

/// Whether SageMaker's session layer refuses an `/invocations` request: its body has a
/// top-level `requestType` (`SessionRequest` forbids every other member, so a body with the
/// gated fields is never a valid one, and without sessions none is), or it names a session
/// (a non-empty header) while the upstream keeps none.
pub(super) fn session_refused(f: &Findings, up: &UpstreamFacts, head: Head<'_>) -> bool {
    let session = unparsed::Session::of(head.session, up.sagemaker_sessions);
    f.member("requestType").is_some() || session == unparsed::Session::Refused
}
