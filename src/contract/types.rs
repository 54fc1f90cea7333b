//! Pydantic's type checks, as far as they are certain from the JSON kind alone.
//!
//! vLLM validates the body against its pydantic model before any handler runs, so a
//! mistyped field is a 400 before the gate, trusted or not. Pydantic's lax mode coerces a
//! lot (numeric strings to numbers, 0/1 to booleans), so only errors that no coercion can
//! avoid are reported here: a request mmgate calls well-typed may still be refused by
//! vLLM for its types, never the other way round.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::classify::RouteKind;
use crate::inspect::{Findings, Kind, Member};

/// A simple declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    Float,
    Int,
    Bool,
    Str,
    List,
    Dict,
}

/// A declared top-level field: the types it accepts (a union when more than one; none
/// listed for a type the JSON kind does not decide).
#[derive(Debug, Clone, Copy)]
pub(super) struct FieldTy {
    pub(super) name: &'static str,
    pub(super) tys: &'static [Ty],
    pub(super) nullable: bool,
    pub(super) required: bool,
}

/// Whether pydantic (lax mode) refuses a value of the member's JSON kind for `ty`.
fn refuses(ty: Ty, m: &Member) -> bool {
    match m.kind {
        Kind::Null => true,
        Kind::Array { .. } => ty != Ty::List,
        Kind::Object { .. } => ty != Ty::Dict,
        Kind::Str { .. } => match ty {
            Ty::Float | Ty::Int => !m.numeric_str,
            Ty::List | Ty::Dict => true,
            Ty::Bool | Ty::Str => false,
        },
        Kind::NonFinite => ty != Ty::Float,
        Kind::Number { .. } | Kind::Bool(_) => matches!(ty, Ty::Str | Ty::List | Ty::Dict),
    }
}

/// Whether pydantic refuses the member for `f` whatever else the value holds (a field of
/// no plain type, `tys: &[]`, never is).
fn certainly_invalid(f: &FieldTy, m: &Member) -> bool {
    match m.kind {
        _ if f.tys.is_empty() => false,
        Kind::Null => !f.nullable,
        _ => f.tys.iter().all(|&ty| refuses(ty, m)),
    }
}

/// A route's request models (pydantic refuses a body only when every one of them does),
/// each indexed once.
pub(super) struct Declared {
    models: Vec<Model>,
}

/// One model's declared fields in pydantic's order, with each one's position by name: a
/// body's members are looked up by name instead of the table being scanned for each of them.
struct Model {
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
    /// Indexes each model's table of a route.
    pub(super) fn new(models: &'static [&'static [FieldTy]]) -> Self {
        Declared {
            models: models.iter().map(|fields| Model::new(fields)).collect(),
        }
    }

    /// The field pydantic certainly refuses when every model refuses the body (that of the
    /// first model, [`Model::first_error`]); `None` when some model may accept it.
    pub(super) fn first_error(&self, findings: &Findings) -> Option<&'static str> {
        let mut first = None;
        for model in &self.models {
            let error = model.first_error(findings)?;
            first.get_or_insert(error);
        }
        first
    }
}

impl Model {
    /// Indexes `fields` (at most 256, names unique: checked by the tests for every table).
    fn new(fields: &'static [FieldTy]) -> Self {
        let mut position = HashMap::with_capacity_and_hasher(fields.len(), Default::default());
        for (i, f) in fields.iter().enumerate().take(MAX_FIELDS) {
            position.entry(f.name).or_insert(i);
        }
        Model {
            fields,
            position,
            required: (0..fields.len()).filter(|&i| fields[i].required).collect(),
        }
    }

    /// The first declared field (in declaration order) that pydantic certainly refuses:
    /// missing when required, or mistyped; by name. Linear in the body's members.
    fn first_error(&self, findings: &Findings) -> Option<&'static str> {
        let missing = self
            .required
            .iter()
            .copied()
            .find(|&i| findings.member(self.fields[i].name).is_none());
        // Each declared member as pydantic reads it: the last of duplicate keys.
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
            if certainly_invalid(&self.fields[i], m) && mistyped.is_none_or(|first| i < first) {
                mistyped = Some(i);
            }
        }
        missing
            .into_iter()
            .chain(mistyped)
            .min()
            .map(|i| self.fields[i].name)
    }
}

/// The checks vLLM's request models run on the raw body before validating it (pydantic
/// `model_validator(mode="before")`) that the JSON kinds decide: the parameter of the first
/// that refuses the body. Each reads `data.get(name)`, so the last duplicate, and Python
/// truthiness (the kinds are noted while the body is scanned, [`crate::inspect::Facts`]).
pub(super) fn model_check(route: RouteKind, f: &Findings) -> Option<&'static str> {
    let facts = &f.facts;
    let truthy = |kind: Option<Kind>| kind.is_some_and(Kind::truthy);
    let none = |kind: Option<Kind>| matches!(kind, None | Some(Kind::Null));
    // The batch route builds a ChatCompletionRequest per conversation before its gate.
    let chat_or_completion = matches!(
        route,
        RouteKind::Chat
            | RouteKind::ChatBatch
            | RouteKind::ChatRender
            | RouteKind::Completions
            | RouteKind::CompletionsRender
    );
    // ChatCompletionRequest and CompletionRequest.validate_stream_options.
    if chat_or_completion && truthy(facts.stream_options) && !truthy(facts.stream) {
        return Some("stream_options");
    }
    match route {
        // CompletionRequest.validate_prompt_and_prompt_embeds: "Either prompt or
        // prompt_embeds must be provided and non-empty."
        RouteKind::Completions | RouteKind::CompletionsRender => {
            let prompt_empty =
                none(facts.prompt) || facts.prompt == Some(Kind::Str { empty: true });
            let embeds_empty = none(facts.prompt_embeds)
                || facts.prompt_embeds == Some(Kind::Array { empty: true });
            (prompt_empty && embeds_empty).then_some("prompt")
        }
        // ResponsesRequest.validate_prompt: "prompt template is not supported".
        RouteKind::Responses | RouteKind::ResponsesRender => {
            (!none(facts.prompt)).then_some("prompt")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::contract::fields;

    const ROUTES: [&[&[FieldTy]]; 10] = [
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

    /// Every model's table of every route.
    fn tables() -> Vec<&'static [FieldTy]> {
        ROUTES.iter().flat_map(|r| r.iter().copied()).collect()
    }

    /// The definition: the table in order, each field against the last member of its name.
    fn reference(table: &[FieldTy], findings: &Findings) -> Option<&'static str> {
        table.iter().find_map(|f| match findings.member(f.name) {
            None if f.required => Some(f.name),
            Some(m) if certainly_invalid(f, m) => Some(f.name),
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
        for table in tables() {
            assert!(table.len() <= MAX_FIELDS);
            assert_eq!(Model::new(table).position.len(), table.len());
        }
    }

    fn error(route: &'static [&'static [FieldTy]], body: &str) -> Option<&'static str> {
        let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        Declared::new(route).first_error(&findings)
    }

    #[test]
    fn a_union_type_refuses_only_what_none_of_its_types_accepts() {
        // CompletionRequest.prompt: str | list[int] | list[str] | list[list[int]] | None.
        for ok in [r#""hi""#, "[1]", "null"] {
            assert_eq!(
                error(fields::COMPLETION, &format!(r#"{{"prompt":{ok}}}"#)),
                None
            );
        }
        for bad in [r#"{"a":1}"#, "1", "true", "NaN"] {
            assert_eq!(
                error(fields::COMPLETION, &format!(r#"{{"prompt":{bad}}}"#)),
                Some("prompt"),
                "{bad}"
            );
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
        assert_eq!(error(&[&[]], r#"{"x":1}"#), None);
        assert_eq!(error(&[], r#"{"x":1}"#), None);
    }

    #[test]
    fn the_model_checks_read_the_last_duplicate_and_truthiness() {
        let check = |route, body: &str| {
            model_check(
                route,
                &crate::inspect::inspect(body.as_bytes(), 970).unwrap(),
            )
        };
        use RouteKind::*;
        // validate_stream_options: stream_options truthy while stream is not.
        for route in [Chat, ChatBatch, ChatRender, Completions, CompletionsRender] {
            let prompt = r#""prompt":"p","messages":[]"#;
            for (body, refused) in [
                (r#""stream_options":{"include_usage":true}"#, true),
                (r#""stream_options":{"a":1},"stream":0"#, true),
                (r#""stream_options":{"a":1},"stream":true"#, false),
                (r#""stream_options":{},"stream":false"#, false),
                (r#""stream_options":null"#, false),
                (r#""stream_options":{"a":1},"stream_options":{}"#, false),
            ] {
                let got = check(route, &format!("{{{prompt},{body}}}"));
                assert_eq!(got, refused.then_some("stream_options"), "{route:?} {body}");
            }
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
                check(Completions, body),
                refused.then_some("prompt"),
                "{body}"
            );
            assert_eq!(check(Chat, body), None, "{body}");
        }
        // ResponsesRequest.validate_prompt: any prompt but null.
        assert_eq!(
            check(Responses, r#"{"input":"i","prompt":""}"#),
            Some("prompt")
        );
        assert_eq!(
            check(ResponsesRender, r#"{"input":"i","prompt":{}}"#),
            Some("prompt")
        );
        assert_eq!(check(Responses, r#"{"input":"i","prompt":null}"#), None);
        assert_eq!(check(Tokenize, r#"{"stream_options":{"a":1}}"#), None);
    }

    proptest! {
        #[test]
        fn the_first_error_is_the_tables_first(
            table in any::<prop::sample::Index>(),
            members in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), 0..8usize), 0..24),
        ) {
            let tables = tables();
            let table = tables[table.index(tables.len())];
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
            prop_assert_eq!(Model::new(table).first_error(&findings), reference(table, &findings));
        }
    }
}
