//! The distinct keys of one JSON object, as `json.loads` keeps them: in first-appearance
//! order, a duplicate taking the place of the first (its value replaces the earlier one).
//! Keys compare as decoded (WTF-8) bytes, so two distinct lone surrogates stay two keys.
//!
//! A few keys are compared one by one; past [`LINEAR`], they are looked up in a hash map
//! (SipHash: keys are the client's), so an object with very many keys costs linear time,
//! never quadratic.

use std::borrow::Cow;
use std::collections::HashMap;

/// Keys compared one by one before the hash map is built.
const LINEAR: usize = 16;

/// The distinct keys seen so far in one object.
#[derive(Default)]
pub(super) struct Distinct<'a> {
    /// While there are at most [`LINEAR`] keys: the keys, in order.
    few: Vec<Cow<'a, [u8]>>,
    /// Past that: every key with its place.
    many: Option<HashMap<Cow<'a, [u8]>, usize>>,
}

impl<'a> Distinct<'a> {
    /// The place of `key` among the distinct keys (0-based, first-appearance order), and
    /// whether it is new.
    pub(super) fn place(&mut self, key: Cow<'a, [u8]>) -> (usize, bool) {
        let many = match &mut self.many {
            Some(many) => many,
            None => {
                if let Some(i) = self.few.iter().position(|k| *k == key) {
                    return (i, false);
                }
                if self.few.len() < LINEAR {
                    self.few.push(key);
                    return (self.few.len() - 1, true);
                }
                self.many.insert(self.few.drain(..).zip(0..).collect())
            }
        };
        let next = many.len();
        match many.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => (*e.get(), false),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(next);
                (next, true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_keys_in_first_appearance_order_with_duplicates_in_the_first_place() {
        for n in [3, LINEAR, LINEAR + 1, 1000] {
            let mut d = Distinct::default();
            let names: Vec<Vec<u8>> = (0..n).map(|i| format!("k{i}").into_bytes()).collect();
            for (i, name) in names.iter().enumerate() {
                assert_eq!(d.place(Cow::Borrowed(&name[..])), (i, true), "{n}");
            }
            for (i, name) in names.iter().enumerate().rev() {
                let owned = Cow::Owned(name.clone());
                assert_eq!(d.place(owned), (i, false), "{n}");
            }
            assert_eq!(d.place(Cow::Borrowed(&b"new"[..])), (n, true), "{n}");
        }
    }
}
