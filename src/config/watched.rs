//! The files a policy was read from, each stamped just before it was read.
//!
//! A stamp is a digest of the file's bytes (the files are small: a policy, certificates,
//! keys), so every change shows, whatever the clock's grain or the way it was made
//! (written in place, renamed over, made readable).
//!
//! Invariant: a file's stamp is taken before its contents are read, so a change after the
//! read shows. A change between the stamp and the read shows too: at worst it costs one
//! reload more, never one less.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A digest of what a file held at one moment; `None` when it could not be read.
type Stamp = Option<[u8; 32]>;

/// The policy file (when loaded from one) and every certificate, private key, CA and API key
/// file it names, in the order they were read, with their stamps from just before.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Watched {
    files: Vec<(PathBuf, Stamp)>,
}

impl Watched {
    /// Stamps `file`; call it before reading the file.
    pub(super) fn add(&mut self, file: impl Into<PathBuf>) {
        let file = file.into();
        let stamp = stamp(&file);
        self.files.push((file, stamp));
    }

    /// Whether any file differs now from its stamp (written, replaced, created or removed).
    pub fn changed(&self) -> bool {
        self.files.iter().any(|(file, was)| stamp(file) != *was)
    }

    /// How many files were read (a file named twice counts twice).
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no file was read (a policy parsed from text that names none).
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn stamp(file: &Path) -> Stamp {
    let bytes = std::fs::read(file).ok()?;
    Some(Sha256::digest(bytes).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_a_creation_a_rewrite_and_a_removal_each_show_as_a_change() {
        let dir = std::env::temp_dir().join(format!("mmgate-watched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (kept, later) = (dir.join("kept"), dir.join("later"));
        std::fs::write(&kept, "one").unwrap();
        let _ = std::fs::remove_file(&later);
        let mut w = Watched::default();
        w.add(&kept);
        w.add(&later);
        assert!(!w.changed());
        std::fs::write(&later, "now here").unwrap();
        assert!(w.changed(), "a file created after the stamp");
        let mut w = Watched::default();
        w.add(&kept);
        w.add(&later);
        std::fs::write(&kept, "three").unwrap();
        assert!(w.changed(), "a file written after the stamp");
        let mut w = Watched::default();
        w.add(&kept);
        // Bytes of the same length, written in place at once: whatever the clock's grain.
        let mut w = Watched::default();
        w.add(&kept);
        std::fs::write(&kept, "thrEE").unwrap();
        assert!(w.changed(), "a same-length rewrite after the stamp");
        // The same bytes again: no change, so no reload.
        let mut w = Watched::default();
        w.add(&kept);
        std::fs::write(&kept, "thrEE").unwrap();
        assert!(!w.changed(), "the same bytes written again");
        let mut w = Watched::default();
        w.add(&kept);
        std::fs::remove_file(&kept).unwrap();
        assert!(w.changed(), "a file removed after the stamp");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
