//! Pydantic's type checks, as far as they are certain from the JSON kind alone.
//!
//! vLLM validates the body against its pydantic model before any handler runs, so a
//! mistyped field is a 400 before the gate, trusted or not. Pydantic's lax mode coerces a
//! lot (numeric strings to numbers, 0/1 to booleans), so only errors that no coercion can
//! avoid are reported here: a request mmgate calls well-typed may still be refused by
//! vLLM for its types, never the other way round.

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

/// A declared top-level field.
#[derive(Debug, Clone, Copy)]
pub(super) struct FieldTy {
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) nullable: bool,
    pub(super) required: bool,
}

fn certainly_invalid(f: &FieldTy, m: &Member) -> bool {
    match m.kind {
        Kind::Null => !f.nullable,
        Kind::Array { .. } => f.ty != Ty::List,
        Kind::Object { .. } => f.ty != Ty::Dict,
        Kind::Str { .. } => match f.ty {
            Ty::Float | Ty::Int => !m.numeric_str,
            Ty::List | Ty::Dict => true,
            Ty::Bool | Ty::Str => false,
        },
        Kind::NonFinite => !matches!(f.ty, Ty::Float),
        Kind::Number { .. } | Kind::Bool(_) => matches!(f.ty, Ty::Str | Ty::List | Ty::Dict),
    }
}

/// The first declared field that pydantic certainly refuses (missing when required, or
/// mistyped), by name.
pub(super) fn first_error(table: &[FieldTy], findings: &Findings) -> Option<&'static str> {
    table.iter().find_map(|f| match findings.member(f.name) {
        None if f.required => Some(f.name),
        Some(m) if certainly_invalid(f, m) => Some(f.name),
        _ => None,
    })
}
