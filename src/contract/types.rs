//! Pydantic's type checks, as far as they are certain from the JSON kind alone.
//!
//! vLLM validates the body against its pydantic model before any handler runs, so a
//! mistyped field is a 400 before the gate, trusted or not. Pydantic's lax mode coerces a
//! lot (numeric strings to numbers, 0/1 to booleans), so only errors that no coercion can
//! avoid are reported here: a request mmgate calls well-typed may still be refused by
//! vLLM for its types, never the other way round.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// A route's declared fields in pydantic's order, with each one's position by name, built
/// once per table: a body's members are looked up by name instead of the table being
/// scanned for each of them.
pub(super) struct Declared {
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
/// [`Declared::first_error`]).
const MAX_FIELDS: usize = 256;

impl Declared {
    /// Indexes `fields` (at most 256, names unique: checked by the tests for every table).
    pub(super) fn new(fields: &'static [FieldTy]) -> Self {
        let mut position = HashMap::with_capacity_and_hasher(fields.len(), Default::default());
        for (i, f) in fields.iter().enumerate().take(MAX_FIELDS) {
            position.entry(f.name).or_insert(i);
        }
        Declared {
            fields,
            position,
            required: (0..fields.len()).filter(|&i| fields[i].required).collect(),
        }
    }

    /// The first declared field (in declaration order) that pydantic certainly refuses:
    /// missing when required, or mistyped; by name. Linear in the body's members.
    pub(super) fn first_error(&self, findings: &Findings) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::contract::fields;

    const TABLES: [&[FieldTy]; 10] = [
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
        for table in TABLES {
            assert!(table.len() <= MAX_FIELDS);
            assert_eq!(Declared::new(table).position.len(), table.len());
        }
    }

    proptest! {
        #[test]
        fn the_first_error_is_the_tables_first(
            table in 0..TABLES.len(),
            members in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), 0..8usize), 0..24),
        ) {
            let table = TABLES[table];
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
            prop_assert_eq!(Declared::new(table).first_error(&findings), reference(table, &findings));
        }
    }
}
