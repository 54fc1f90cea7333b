//! Objects read as tagged types (unions told apart by their `type`): each object's keys,
//! decoded into short inline names, with their values' kinds, in one list per member, so
//! that reading them allocates nothing per key or object. Filled by the walks in
//! `shapes.rs`; read by the request types in [`crate::contract`].

use std::ops::Range;

use super::coerce;
use super::key_bytes;
use super::scan::{Kind, KindSet, Scanner, SyntaxError};

/// An object read as a tagged type: where its keys are in its member's list of keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    keys: Range<usize>,
    unreadable: bool,
    overflow: bool,
}

impl Object {
    /// The object as a union of tagged types reads it, its keys in `keys`, the objects in
    /// its lists in `parts`.
    pub fn view<'a>(&'a self, keys: &'a [Key], parts: &'a Parts) -> Tagged<'a> {
        Tagged {
            keys: &keys[self.keys.clone()],
            unreadable: self.unreadable,
            overflow: self.overflow,
            parts,
        }
    }

    /// Whether a member name holds a lone surrogate: pydantic cannot read it as text, so
    /// no model or `TypedDict` takes the object.
    pub fn unreadable(&self) -> bool {
        self.unreadable
    }
}

/// The objects in the lists of a member's tagged objects, read as tagged objects too (one
/// level down), and their keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parts {
    objects: Vec<Object>,
    keys: Vec<Key>,
}

/// See [`Parts::none`].
static NO_PARTS: Parts = Parts {
    objects: Vec::new(),
    keys: Vec::new(),
};

impl Parts {
    /// None.
    pub fn none() -> &'static Parts {
        &NO_PARTS
    }
}

/// A list member of a tagged object whose elements were read ([`Parts`]): the kinds of its
/// elements, and where its objects are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List {
    /// The kinds of its elements.
    pub elements: KindSet,
    objects: Range<u32>,
}

/// An object as a union of types told apart by their `type` reads it.
#[derive(Debug, Clone, Copy)]
pub struct Tagged<'a> {
    /// Its members in order (duplicates included).
    pub keys: &'a [Key],
    /// See [`Object::unreadable`].
    pub unreadable: bool,
    /// Read leniently past its budget ([`super::scan::Scanner::record_lenient`]): its
    /// members are not all known, so it is taken (each part has its own).
    pub overflow: bool,
    parts: &'a Parts,
}

/// A short name (a key or a `type` word), decoded, kept inline: the names that the tagged
/// types look for are short (a test checks that they fit), and a walk allocates nothing
/// per key or object: the keys go into one list per member.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Name {
    bytes: [u8; Name::MAX],
    /// The length, or `u8::MAX` for a name longer than [`Name::MAX`] (equal to none).
    len: u8,
}

impl Name {
    /// The longest name kept; longer ones only compare unequal.
    pub const MAX: usize = 32;

    fn new(name: &[u8]) -> Name {
        let mut bytes = [0; Name::MAX];
        let len = match bytes.get_mut(..name.len()) {
            Some(to) => {
                to.copy_from_slice(name);
                name.len() as u8
            }
            None => u8::MAX,
        };
        Name { bytes, len }
    }

    /// Whether the name is `other`.
    pub fn is(&self, other: &[u8]) -> bool {
        self.bytes.get(..self.len as usize) == Some(other)
    }

    /// The name, if it was short enough to be kept.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.bytes.get(..self.len as usize)
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.bytes.get(..self.len as usize) {
            Some(name) => write!(f, "{:?}", String::from_utf8_lossy(name)),
            None => f.write_str("(long)"),
        }
    }
}

/// A member of a [`Tagged`] object: its key, decoded, and its value's kind and kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The key, decoded.
    pub name: Name,
    /// The value's kind.
    pub kind: Kind,
    /// The value's kinds, `NOT_INT` included.
    pub kinds: KindSet,
    /// A string value of up to [`Name::MAX`] bytes, decoded (`None` for other values).
    pub text: Option<Name>,
    /// What pydantic's lax `bool`, `int` and `float` make of a string or number value.
    pub coerce: coerce::Coerce,
    /// For a list whose elements were read: them.
    pub list: Option<List>,
}

/// An object's `type` member, as a union of tagged types reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagValue {
    /// There is none.
    Absent,
    /// `null`.
    Null,
    /// A string of up to [`Name::MAX`] bytes, decoded.
    Word(Name),
    /// Another value, or a longer string (no type's word).
    Other,
}

impl TagValue {
    /// Whether it is this word.
    pub fn is(&self, word: &[u8]) -> bool {
        matches!(self, TagValue::Word(w) if w.is(word))
    }
}

impl Tagged<'_> {
    /// Its `type` (the last).
    pub fn tag(&self) -> TagValue {
        match self.get(b"type") {
            None => TagValue::Absent,
            Some(k) if k.kind == Kind::Null => TagValue::Null,
            Some(k) => k.text.map_or(TagValue::Other, TagValue::Word),
        }
    }

    /// Whether its `type` is this word.
    pub fn is(&self, word: &[u8]) -> bool {
        self.tag().is(word)
    }

    /// The last member of this key, if it has one.
    pub fn get(&self, key: &[u8]) -> Option<&Key> {
        self.keys.iter().rev().find(|k| k.name.is(key))
    }

    /// The objects of a list member whose elements were read.
    pub fn objects(&self, list: &List) -> impl Iterator<Item = Tagged<'_>> {
        let objects = &self.parts.objects[list.objects.start as usize..list.objects.end as usize];
        objects.iter().map(|o| o.view(&self.parts.keys, self.parts))
    }
}

/// Reads one object as a tagged type, member by member, its keys into a shared list.
pub(super) struct Reader<'k> {
    start: usize,
    unreadable: bool,
    /// Past the body's recording limit, members go unrecorded (the object is then taken)
    /// instead of failing the body: for the objects vLLM's types read that mmgate did not
    /// always read, so that no body is refused for them that was taken before.
    lenient: bool,
    overflow: bool,
    keys: &'k mut Vec<Key>,
    /// Where the objects in its lists go (made at the first list), if they are read.
    parts: Option<&'k mut Option<Box<Parts>>>,
}

impl<'k> Reader<'k> {
    pub(super) fn new(keys: &'k mut Vec<Key>) -> Self {
        let start = keys.len();
        Reader {
            start,
            unreadable: false,
            lenient: false,
            overflow: false,
            keys,
            parts: None,
        }
    }

    /// A reader that also reads the objects in the object's lists, into `parts`.
    pub(super) fn with_parts(keys: &'k mut Vec<Key>, parts: &'k mut Option<Box<Parts>>) -> Self {
        Reader {
            parts: Some(parts),
            ..Reader::new(keys)
        }
    }

    /// A reader that reads leniently (see [`Reader`]), its parts too.
    pub(super) fn lenient(self) -> Self {
        Reader {
            lenient: true,
            ..self
        }
    }

    /// As [`Reader::member`]; but when the reader has [`Parts`], a list value (at `depth`)
    /// is scanned here instead of by `read`, its objects read into them, and an object
    /// value too, as a list of one (for a field of a union of tagged types).
    pub(super) fn member_listed(
        &mut self,
        sc: &mut Scanner<'_>,
        key: &[u8],
        depth: usize,
        read: impl FnOnce(&mut Scanner<'_>) -> Result<Kind, SyntaxError>,
    ) -> Result<Kind, SyntaxError> {
        let made = match self.parts.take() {
            Some(parts) if matches!(sc.peek(), Some(b'[' | b'{')) => parts,
            other => {
                self.parts = other;
                return self.member(sc, key, read);
            }
        };
        let parts = made.get_or_insert_default();
        let first = parts.objects.len() as u32;
        let mut elements = KindSet::NONE;
        let (lenient, recorded) = (self.lenient, self.keys.len());
        let kind = self.member(sc, key, |sc| {
            if sc.peek() == Some(b'{') {
                // An object field: read leniently (it was not always read).
                let reader = Reader::new(&mut parts.keys).lenient();
                let (kind, object) = reader.object(sc, depth)?;
                parts.objects.push(object);
                elements = KindSet::OBJECT;
                return Ok(kind);
            }
            let empty = sc.elements(depth, |sc| {
                if sc.peek() != Some(b'{') {
                    return sc.value(depth + 1);
                }
                let reader = Reader {
                    lenient,
                    ..Reader::new(&mut parts.keys)
                };
                let (kind, object) = reader.object(sc, depth + 1)?;
                parts.objects.push(object);
                Ok(kind)
            })?;
            elements = sc.inner();
            Ok(Kind::Array { empty })
        })?;
        let objects = first..parts.objects.len() as u32;
        self.parts = Some(made);
        // Unless its key went unrecorded (a lenient reader past the limit).
        if self.keys.len() > recorded {
            if let Some(key) = self.keys.last_mut() {
                key.list = Some(List { elements, objects });
            }
        }
        Ok(kind)
    }

    /// Reads a member's value at the cursor with `read` and notes its key, kinds and short
    /// string text.
    pub(super) fn member(
        &mut self,
        sc: &mut Scanner<'_>,
        key: &[u8],
        read: impl FnOnce(&mut Scanner<'_>) -> Result<Kind, SyntaxError>,
    ) -> Result<Kind, SyntaxError> {
        self.unreadable |= super::unreadable_name(key);
        if self.lenient {
            if !sc.record_lenient() {
                self.overflow = true;
                return read(sc);
            }
        } else {
            sc.record()?;
        }
        let start = sc.pos;
        let kind = read(sc)?;
        let token = &sc.text()[start..sc.pos];
        let text = match kind {
            // The quotes and at most the name's bytes, written with or without escapes.
            Kind::Str { .. } if token.len() <= Name::MAX * 6 + 2 => {
                let decoded = super::scan::decoded(&token[1..token.len() - 1]);
                (decoded.len() <= Name::MAX).then(|| Name::new(&decoded))
            }
            _ => None,
        };
        self.keys.push(Key {
            name: Name::new(key),
            kind,
            kinds: sc.kinds(kind, start),
            text,
            coerce: coerce::of(kind, token),
            list: None,
        });
        Ok(kind)
    }

    /// Whether an object of the list member read last ([`Reader::member_listed`]) has a
    /// member name that is not text.
    pub(super) fn listed_unreadable(&self) -> bool {
        let parts = self.parts.as_deref().and_then(|p| p.as_deref());
        let list = self.keys.last().and_then(|k| k.list.as_ref());
        let (Some(parts), Some(list)) = (parts, list) else {
            return false;
        };
        parts.objects[list.objects.start as usize..list.objects.end as usize]
            .iter()
            .any(Object::unreadable)
    }

    /// The object read.
    pub(super) fn finish(self) -> Object {
        Object {
            keys: self.start..self.keys.len(),
            unreadable: self.unreadable,
            overflow: self.overflow,
        }
    }

    /// Scans an object at the cursor (its members at `depth`) whole; with [`Parts`], the
    /// objects in its members too ([`Reader::member_listed`]).
    pub(super) fn object(
        mut self,
        sc: &mut Scanner<'_>,
        depth: usize,
    ) -> Result<(Kind, Object), SyntaxError> {
        let empty = sc.members(depth, |sc, key| {
            let key = key_bytes(sc.text(), key);
            self.member_listed(sc, &key, depth + 1, |sc| sc.value(depth + 1))?;
            Ok(())
        })?;
        Ok((Kind::Object { empty }, self.finish()))
    }
}
