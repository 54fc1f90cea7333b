//! The files a policy was read from, each stamped just before it was read.
//!
//! Invariant: a file's stamp is taken before its contents are read, so a change after the
//! read shows: a write (modification time, length), a file renamed over it or re-created
//! (inode), a change of mode or owner that makes it readable (change time). A change
//! between the stamp and the read shows too: at worst it costs one reload more, never one
//! less.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a file was at one moment; `None` when it could not be looked at (missing).
type Stamp = Option<Seen>;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    modified: SystemTime,
    len: u64,
    inode: (u64, u64),
    changed: (i64, i64),
}

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

    /// The files, in the order they were read.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(file, _)| file.as_path())
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
    let m = std::fs::metadata(file).ok()?;
    Some(Seen {
        modified: m.modified().ok()?,
        len: m.len(),
        inode: (m.dev(), m.ino()),
        changed: (m.ctime(), m.ctime_nsec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_a_creation_a_replacement_and_a_removal_each_show_as_a_change() {
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
        // The same bytes, renamed over it: a new inode, whatever the clock's grain.
        let mut w = Watched::default();
        w.add(&kept);
        let twin = dir.join("twin");
        std::fs::write(&twin, "three").unwrap();
        std::fs::rename(&twin, &kept).unwrap();
        assert!(w.changed(), "a file renamed over it after the stamp");
        let mut w = Watched::default();
        w.add(&kept);
        std::fs::remove_file(&kept).unwrap();
        assert!(w.changed(), "a file removed after the stamp");
        assert_eq!(w.paths().collect::<Vec<_>>(), [kept.as_path()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
