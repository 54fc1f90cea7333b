//! Reading the policy file: typed getters over a TOML table that record every problem with
//! its field path instead of stopping at the first one. No policy logic lives here.

use std::collections::BTreeSet;

use toml::{Table, Value};

/// What reading a policy file found.
#[derive(Debug, Default)]
pub(super) struct Problems {
    /// Every problem, each naming its field.
    pub(super) found: Vec<String>,
    /// Every key the reader asked for, as a schema path (free-form names as `*`).
    pub(super) keys: BTreeSet<String>,
}

impl Problems {
    /// Records a problem at `path`.
    pub(super) fn add(&mut self, path: &str, msg: impl std::fmt::Display) {
        self.found.push(format!("{path}: {msg}"));
    }
}

/// One table of the policy file, read key by key; keys never read are reported as unknown.
pub(super) struct Section<'a> {
    path: String,
    /// `path` with the names of free-form entries (pools, clients, ...) as `*`.
    schema: String,
    table: Option<&'a Table>,
    read: BTreeSet<&'static str>,
}

impl<'a> Section<'a> {
    /// The top-level table.
    pub(super) fn root(table: &'a Table) -> Self {
        Section {
            path: String::new(),
            schema: String::new(),
            table: Some(table),
            read: BTreeSet::new(),
        }
    }

    fn at(&self, key: &str) -> String {
        join(&self.path, key)
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.read.insert(key);
        self.table.and_then(|t| t.get(key))
    }

    /// A sub-table (absent → an empty section; not a table → a problem).
    pub(super) fn section(&mut self, key: &'static str, p: &mut Problems) -> Section<'a> {
        let path = self.at(key);
        let table = match self.get(key) {
            None => None,
            Some(Value::Table(t)) => Some(t),
            Some(other) => {
                p.add(
                    &path,
                    format!("expected a table, found {}", other.type_str()),
                );
                None
            }
        };
        Section {
            path,
            schema: join(&self.schema, key),
            table,
            read: BTreeSet::new(),
        }
    }

    /// The keys of this section that are themselves tables, with their sections.
    pub(super) fn entries(&self) -> Vec<(String, &'a Value)> {
        self.table
            .map(|t| t.iter().map(|(k, v)| (k.clone(), v)).collect())
            .unwrap_or_default()
    }

    /// This section's path.
    pub(super) fn path(&self) -> &str {
        &self.path
    }

    /// A string value.
    pub(super) fn str(&mut self, key: &'static str, p: &mut Problems) -> Option<&'a str> {
        let path = self.at(key);
        match self.get(key)? {
            Value::String(s) => Some(s),
            other => {
                p.add(
                    &path,
                    format!("expected a string, found {}", other.type_str()),
                );
                None
            }
        }
    }

    /// A boolean value.
    pub(super) fn bool(&mut self, key: &'static str, p: &mut Problems) -> Option<bool> {
        let path = self.at(key);
        match self.get(key)? {
            Value::Boolean(b) => Some(*b),
            other => {
                p.add(
                    &path,
                    format!("expected true or false, found {}", other.type_str()),
                );
                None
            }
        }
    }

    /// A positive integer value within `1..=max`.
    pub(super) fn positive(
        &mut self,
        key: &'static str,
        max: u64,
        p: &mut Problems,
    ) -> Option<u64> {
        self.int_in(key, 1, max, p)
    }

    /// A non-negative integer value within `0..=max`.
    pub(super) fn count(&mut self, key: &'static str, max: u64, p: &mut Problems) -> Option<u64> {
        self.int_in(key, 0, max, p)
    }

    fn int_in(&mut self, key: &'static str, min: u64, max: u64, p: &mut Problems) -> Option<u64> {
        let path = self.at(key);
        match self.get(key)? {
            Value::Integer(i) if u64::try_from(*i).is_ok_and(|v| (min..=max).contains(&v)) => {
                Some(*i as u64)
            }
            Value::Integer(i) => {
                p.add(&path, format!("{i} is out of range ({min} to {max})"));
                None
            }
            other => {
                p.add(
                    &path,
                    format!("expected an integer, found {}", other.type_str()),
                );
                None
            }
        }
    }

    /// A list of strings.
    pub(super) fn strings(&mut self, key: &'static str, p: &mut Problems) -> Option<Vec<String>> {
        self.list(key, ("strings", "a string"), p, |v| match v {
            Value::String(s) => Some(s.clone()),
            _ => None,
        })
    }

    /// A list of booleans, finite numbers and strings.
    pub(super) fn scalars(
        &mut self,
        key: &'static str,
        p: &mut Problems,
    ) -> Option<Vec<super::Scalar>> {
        use super::Scalar;
        let what = (
            "booleans, numbers or strings",
            "a boolean, a finite number or a string",
        );
        self.list(key, what, p, |v| match v {
            Value::Boolean(b) => Some(Scalar::Bool(*b)),
            Value::Integer(n) => Some(Scalar::Number(*n as f64)),
            Value::Float(f) if f.is_finite() => Some(Scalar::Number(*f)),
            Value::String(t) => Some(Scalar::Text(t.clone())),
            _ => None,
        })
    }

    /// A list whose items `item` reads; `what` names the list and an item for problems.
    fn list<T>(
        &mut self,
        key: &'static str,
        (list, one): (&str, &str),
        p: &mut Problems,
        item: impl Fn(&Value) -> Option<T>,
    ) -> Option<Vec<T>> {
        let path = self.at(key);
        let value = self.get(key)?;
        let Value::Array(items) = value else {
            let found = value.type_str();
            p.add(&path, format!("expected a list of {list}, found {found}"));
            return None;
        };
        let mut out = Vec::new();
        for (i, v) in items.iter().enumerate() {
            match item(v) {
                Some(x) => out.push(x),
                None => p.add(
                    &format!("{path}[{i}]"),
                    format!("expected {one}, found {}", v.type_str()),
                ),
            }
        }
        Some(out)
    }

    /// The sub-tables of a free-form section (like `pools` or `clients`), by name; a value
    /// that is not a table is a problem.
    pub(super) fn named(&self, p: &mut Problems) -> Vec<(String, Section<'a>)> {
        let mut out = Vec::new();
        for (name, value) in self.entries() {
            let path = self.at(&name);
            match value {
                Value::Table(t) => out.push((
                    name,
                    Section {
                        path,
                        schema: join(&self.schema, "*"),
                        table: Some(t),
                        read: BTreeSet::new(),
                    },
                )),
                other => p.add(
                    &path,
                    format!("expected a table, found {}", other.type_str()),
                ),
            }
        }
        out
    }

    /// A number (integer or float).
    pub(super) fn number(&mut self, key: &'static str, p: &mut Problems) -> Option<f64> {
        let path = self.at(key);
        match self.get(key)? {
            Value::Integer(i) => Some(*i as f64),
            Value::Float(f) if f.is_finite() => Some(*f),
            other => {
                p.add(
                    &path,
                    format!("expected a finite number, found {}", other.type_str()),
                );
                None
            }
        }
    }

    /// Whether the section exists in the file.
    pub(super) fn present(&self) -> bool {
        self.table.is_some()
    }

    /// Reports every key that was never read, and marks the section done.
    pub(super) fn finish(self, p: &mut Problems) {
        self.record_keys(p);
        if let Some(t) = self.table {
            for k in t.keys() {
                if !self.read.contains(k.as_str()) {
                    p.add(&self.at(k), "unknown key");
                }
            }
        }
    }

    /// Ends a free-form section (like `gate.routes`), whose keys are names, not schema keys,
    /// so none is unknown; records the keys read in it for [`super::Config::keys_read`].
    pub(super) fn finish_free(self, p: &mut Problems) {
        self.record_keys(p);
    }

    fn record_keys(&self, p: &mut Problems) {
        p.keys
            .extend(self.read.iter().map(|k| join(&self.schema, k)));
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}
