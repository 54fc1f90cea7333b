//! Which model of a union pydantic's smart mode takes when more than one validates a body.
//!
//! pydantic-core validates the body against each model in turn and keeps the one that set
//! the most fields (the fields its nested models and typed dicts set count too); of those
//! that set as many, the first with the better exactness: exact (every value as its type
//! takes it without coercion) above lax (some value coerced: `1.0`, `"1"` or `true` for an
//! `int`, `1` for a `bool`, `"1"` for a `float`). FastAPI validates what `json.loads` made,
//! so a JSON integer is exact for a `float` too. (Checked with `TypeAdapter` on vLLM 0.31's
//! `/pooling` and `/tokenize` unions and on single-field models of each type.)

use super::{Declared, FieldTy, Model, Ty};
use crate::inspect::{Findings, Kind, KindSet, Member};

impl Declared {
    /// The class name of the model pydantic's smart mode takes for the body, of those that
    /// may accept it; `None` when every model refuses it.
    pub(in crate::contract) fn chosen(&self, findings: &Findings) -> Option<&'static str> {
        let mut best: Option<(&'static str, usize, bool)> = None;
        for model in &self.models {
            if model.first_error(findings).is_some() {
                continue;
            }
            let (set, exact) = model.rank(findings);
            let better = best.is_none_or(|(_, best_set, best_exact)| {
                if set == best_set {
                    exact && !best_exact
                } else {
                    set > best_set
                }
            });
            if better {
                best = Some((model.name, set, exact));
            }
        }
        best.map(|(name, ..)| name)
    }
}

impl Model {
    /// How many fields validating the body as this model sets (its declared members, null
    /// ones included, and at least one per message of a non-empty chat message list: each
    /// message type requires its `role`), and whether every member's value is exact.
    fn rank(&self, findings: &Findings) -> (usize, bool) {
        let (mut set, mut exact) = (0, true);
        for (i, m) in self.declared_members(findings) {
            let field = &self.fields[i];
            let messages = matches!(field.tys, [Ty::ChatMessages | Ty::ChatRequestMessages]);
            set += 1 + usize::from(messages && m.kind == Kind::Array { empty: false });
            exact = exact && exactly(field, m);
        }
        (set, exact)
    }
}

/// Whether the member's value is exact for the field's type: null for an optional field, or
/// exact for one of the types of its union. Containers are judged by their elements' kinds
/// where those tell (lists of `int`, `float`, `bool`, `str`), else taken as exact.
fn exactly(field: &FieldTy, m: &Member) -> bool {
    m.kind == Kind::Null || field.tys.is_empty() || field.tys.iter().any(|&ty| exact(ty, m))
}

fn exact(ty: Ty, m: &Member) -> bool {
    match (ty, m.kind) {
        (Ty::Float, Kind::Number { .. } | Kind::NonFinite) => true,
        (Ty::Int | Ty::JsonInt, Kind::Number { .. }) => m.json_int() == Some(true),
        (Ty::Bool, Kind::Bool(_)) => true,
        (Ty::Str | Ty::Bytes | Ty::Literal(_), Kind::Str { .. }) => true,
        (Ty::List(accepted, ..), Kind::Array { .. }) => exact_elements(accepted, m.elements),
        (Ty::Nested(outer, inner), Kind::Array { .. }) => {
            m.elements.exactly_within(outer) && exact_elements(inner, m.nested)
        }
        (Ty::WordList(_), Kind::Array { .. }) => m.elements.exactly_within(KindSet::STR),
        (
            Ty::ChatMessages
            | Ty::ChatRequestMessages
            | Ty::ChatTools
            | Ty::ChatBatches
            | Ty::TaggedList(_)
            | Ty::ContentList(_),
            Kind::Array { .. },
        ) => true,
        (
            Ty::Dict
            | Ty::DictOf(_)
            | Ty::EmptyDict
            | Ty::DictOfDicts
            | Ty::Tagged(_)
            | Ty::Content(_),
            Kind::Object { .. },
        ) => true,
        _ => false,
    }
}

/// Whether elements of `kinds` are exact for the element type whose lax kinds are
/// `accepted`, as the generator writes those of `int`, `float`, `bool` and `str` (and
/// string `Literal`s); elements of any other type are taken as exact.
fn exact_elements(accepted: KindSet, kinds: KindSet) -> bool {
    use KindSet as K;
    const INT: KindSet = K::BOOL.or(K::NUMBER).or(K::STR).or(K::NOT_FLOAT);
    const FLOAT: KindSet = K::BOOL
        .or(K::NUMBER)
        .or(K::NON_FINITE)
        .or(K::STR)
        .or(K::NOT_INT);
    const BOOL: KindSet = K::BOOL.or(K::NUMBER).or(K::STR).or(K::NOT_INT);
    const STR: KindSet = K::STR.or(K::NOT_INT);
    let exact = match accepted {
        INT => K::NUMBER.or(K::NOT_FLOAT),
        FLOAT => K::NUMBER
            .or(K::NON_FINITE)
            .or(K::NOT_INT)
            .or(K::FLOAT_LITERAL),
        BOOL => K::BOOL,
        STR => STR,
        _ => return true,
    };
    kinds.exactly_within(exact)
}

#[cfg(test)]
mod tests {
    use super::super::{FieldTy, ModelTy, Ty};
    use super::*;
    use crate::inspect::KindSet as K;

    /// `A(input: ty) | B(data: Any)`: B is kept for `{"input": value, "data": 1}` exactly
    /// when A's `input` is not exact (each sets one field, B's is exact, A comes first).
    /// (`input`: the kinds inside nested lists are read for a few names only.)
    fn exact_for(ty: Ty, value: &str) -> bool {
        let field = |name, tys: &'static [Ty]| FieldTy {
            name,
            tys,
            nullable: true,
            required: false,
            filled_from: "",
            range: None,
        };
        let union: &'static [ModelTy] = Box::leak(Box::new([
            ModelTy {
                name: "A",
                checks: &[],
                fields: Box::leak(Box::new([field("input", Box::leak(Box::new([ty])))])),
            },
            ModelTy {
                name: "B",
                checks: &[],
                fields: Box::leak(Box::new([field("data", &[])])),
            },
        ]));
        let body = format!(r#"{{"input":{value},"data":1}}"#);
        let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        match Declared::new(union).chosen(&findings) {
            Some("A") => true,
            Some("B") => false,
            other => panic!("{other:?} for {value}"),
        }
    }

    /// Each type's exact and lax values, as pydantic's `TypeAdapter` ranked them (values a
    /// type refuses left out).
    #[test]
    fn exactness_follows_pydantic_for_each_type() {
        const INT: K = K::BOOL.or(K::NUMBER).or(K::STR).or(K::NOT_FLOAT);
        const FLOAT: K = K::BOOL
            .or(K::NUMBER)
            .or(K::NON_FINITE)
            .or(K::STR)
            .or(K::NOT_INT);
        const STR: K = K::STR.or(K::NOT_INT);
        let cases: &[(Ty, &[&str], &[&str])] = &[
            (
                Ty::Int,
                &["1", "-1", "null"],
                &["1.0", "1e0", "true", r#""1""#],
            ),
            (Ty::Float, &["1", "1.0", "1.5", "NaN"], &["true", r#""1""#]),
            (Ty::Bool, &["true", "null"], &["1", "1.0", r#""true""#]),
            (Ty::Str, &[r#""1""#, r#""a""#], &[]),
            (Ty::Literal(&["a", "b"]), &[r#""a""#], &[]),
            (
                Ty::List(INT, 0, usize::MAX),
                &["[1]", "[]", "[-2,3]"],
                &["[1.0]", "[true]", r#"["1"]"#],
            ),
            (
                Ty::List(FLOAT, 0, usize::MAX),
                &["[1]", "[1.0]"],
                &["[true]", r#"["1"]"#],
            ),
            (Ty::List(STR, 0, usize::MAX), &[r#"["1"]"#], &[]),
            (
                Ty::Nested(K::ARRAY, INT),
                &["[[1]]", "[]"],
                &["[[1.0]]", "[[1],[true]]"],
            ),
            (Ty::Dict, &["{}", r#"{"role":"u"}"#], &[]),
        ];
        for &(ty, exact, lax) in cases {
            for value in exact {
                assert!(exact_for(ty, value), "{ty:?} {value} is exact");
            }
            for value in lax {
                assert!(!exact_for(ty, value), "{ty:?} {value} is lax");
            }
        }
    }

    /// More fields set wins before exactness does; a tie in both keeps the first.
    #[test]
    fn fields_set_decide_before_exactness() {
        let body = |s: &str| crate::inspect::inspect(s.as_bytes(), 970).unwrap();
        let pooling = Declared::new(crate::contract::fields::POOLING);
        for (text, model) in [
            (r#"{"input":[1.0],"data":1}"#, "IOProcessorRequest"),
            (
                r#"{"input":[1.0],"data":1,"dimensions":1}"#,
                "PoolingCompletionRequest",
            ),
            (r#"{"input":[1],"data":1}"#, "PoolingCompletionRequest"),
            (r#"{"input":"x","messages":[]}"#, "PoolingCompletionRequest"),
            (r#"{"input":[1.0],"messages":[]}"#, "PoolingChatRequest"),
            (
                r#"{"input":"x","messages":[{"role":"user","content":"x"}]}"#,
                "PoolingChatRequest",
            ),
            (r#"{"messages":[],"data":1}"#, "PoolingChatRequest"),
            (r#"{"data":1}"#, "IOProcessorRequest"),
        ] {
            assert_eq!(pooling.chosen(&body(text)), Some(model), "{text}");
        }
        assert_eq!(pooling.chosen(&body(r#"{"input":{}}"#)), None);
    }
}
