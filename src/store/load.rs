//! Reading the data directory: every `repos/<repo>/<id>.md` and
//! `users/<user>/<id>.md`, in name order, so loading is deterministic.
//! The start-up load ([`load`]) and the live sync (`store::sync`) judge
//! each entry by the same functions, so a file means the same to both.
//!
//! Nothing is ever followed out of the data directory: a symbolic link
//! anywhere under `repos/` or `users/` (a memory file, a namespace
//! directory, the scope directory itself) is skipped and counted, and
//! files are opened without following links. A file that does not parse is
//! skipped and counted too, and never touched; only the debris of
//! interrupted writes is removed, at start. So is everything else that is
//! not a memory file (`.MD` files, subdirectories, FIFOs, stray files),
//! each with its reason, judged from the listing alone; hidden files
//! (editor and system debris) are the one thing left alone unlisted.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, FileType};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::memory::{Memory, MemoryId, Namespace, Scope};
use crate::store::{Error, SkippedFile, atomic, confine, lifecycle, markdown, may_relate};

/// Why a link is skipped.
const LINK: &str = "a symbolic link: Engram never follows links in the data directory";

/// Why a second file with an id already loaded is skipped. It does not
/// name the other file's namespace: whoever reads this entry may not be
/// allowed to see that namespace.
pub fn id_in_use(id: MemoryId) -> String {
    format!("the id {id} is already used by another memory file")
}

/// The memories found and the entries that could not be used.
#[derive(Debug, Default)]
pub struct Loaded {
    pub memories: Vec<Memory>,
    pub skipped: Vec<SkippedFile>,
    /// Of each memory file loaded, taken before it was read.
    pub fingerprints: Fingerprints,
}

/// What an entry looked like when it was last read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    inode: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Fingerprint {
    /// `None` when the entry is gone.
    pub fn of(path: &Path) -> Option<Self> {
        let metadata = fs::symlink_metadata(path).ok()?;
        Some(Self {
            inode: metadata.ino(),
            len: metadata.len(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        })
    }
}

/// Fingerprints by path relative to the data directory, in path order:
/// a namespace's files are one range.
pub type Fingerprints = BTreeMap<String, Fingerprint>;

/// Loads every namespace under `root`.
pub fn load(root: &Path) -> Result<Loaded, Error> {
    let mut loader = Loader::default();
    for scope in [Scope::Repo, Scope::User] {
        let listing = namespace_dirs(root, scope)?;
        loader.loaded.skipped.extend(listing.skipped);
        for (namespace, dir) in listing.namespaces {
            loader.namespace(&dir, &namespace)?;
        }
    }
    Ok(loader.loaded)
}

/// The links of a memory that the store never follows, as skipped entries
/// of its file: a `supersedes` that names no memory of its own namespace,
/// a `related` edge that names none it may link to (see [`may_relate`]);
/// `owner` tells the namespace of each memory in service. The memory
/// itself is in service and the file left as it is. A link to another
/// namespace reads exactly like a link to no memory (one deleted, one
/// mistyped), so no report tells that an id exists where the reader cannot
/// look.
pub fn unfollowed_links<'a>(
    memory: &Memory,
    owner: impl Fn(MemoryId) -> Option<&'a Namespace>,
) -> Vec<SkippedFile> {
    let namespace = &memory.namespace;
    let path = format!(
        "{}/{}",
        namespace_path(namespace),
        super::file_name(memory.id)
    );
    let skipped = |reason: String| SkippedFile {
        path: path.clone(),
        reason,
        namespace: Some(namespace.clone()),
    };
    let mut unfollowed = Vec::new();
    if let Some(predecessor) = memory.supersedes
        && owner(predecessor) != Some(namespace)
    {
        unfollowed.push(skipped(format!(
            "`supersedes` names no memory of {namespace}: the link is never followed (the memory is loaded)"
        )));
    }
    let other_scope = match namespace.scope() {
        Scope::Repo => "user",
        Scope::User => "repo",
    };
    for (index, edge) in memory.related.iter().enumerate() {
        if !owner(edge.id).is_some_and(|target| may_relate(namespace, target)) {
            unfollowed.push(skipped(format!(
                "`related[{index}].id` names no memory of {namespace} or of a {other_scope}: the edge is never followed (the memory is loaded)"
            )));
        }
    }
    unfollowed
}

/// `repos/<repo>` or `users/<user>`.
pub fn namespace_path(namespace: &Namespace) -> String {
    format!(
        "{}/{}",
        confine::scope_dir(namespace),
        confine::owner_name(namespace)
    )
}

/// `repos` or `users`.
pub fn scope_dir_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Repo => "repos",
        Scope::User => "users",
    }
}

/// The namespace directories of one scope directory, and its entries that
/// are not one (links, files, directories with invalid names).
#[derive(Debug, Default)]
pub struct ScopeListing {
    pub namespaces: Vec<(Namespace, PathBuf)>,
    pub skipped: Vec<SkippedFile>,
}

/// Lists `<root>/repos/` or `<root>/users/`; one that does not exist is
/// empty, one that is a link is skipped whole.
pub fn namespace_dirs(root: &Path, scope: Scope) -> Result<ScopeListing, Error> {
    let scope_dir = scope_dir_name(scope);
    let dir = root.join(scope_dir);
    let mut listing = ScopeListing::default();
    let mut skip = |path: String, reason: String, namespace: Option<Namespace>| {
        listing.skipped.push(SkippedFile {
            path,
            reason,
            namespace,
        });
    };
    match fs::symlink_metadata(&dir) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(listing),
        Err(source) => return Err(Error::Read { path: dir, source }),
        Ok(metadata) if metadata.file_type().is_symlink() => {
            skip(format!("{scope_dir}/"), LINK.to_owned(), None);
            return Ok(listing);
        }
        Ok(_) => {}
    }
    let mut namespaces = Vec::new();
    for entry in read_dir_sorted(&dir)? {
        if entry.name.starts_with('.') {
            continue;
        }
        let namespace = match scope {
            Scope::Repo => entry.name.parse().map(Namespace::Repo),
            Scope::User => entry.name.parse().map(Namespace::User),
        };
        let relative = format!("{scope_dir}/{}", entry.name);
        if entry.kind.is_symlink() {
            skip(relative, LINK.to_owned(), namespace.ok());
            continue;
        }
        if !entry.kind.is_dir() {
            skip(
                relative,
                format!("not a directory: {scope_dir}/ holds one directory per namespace"),
                namespace.ok(),
            );
            continue;
        }
        match namespace {
            Ok(namespace) => namespaces.push((namespace, entry.path)),
            Err(reason) => skip(
                format!("{relative}/"),
                format!("the directory name is {reason}"),
                None,
            ),
        }
    }
    listing.namespaces = namespaces;
    Ok(listing)
}

/// What one entry of a namespace directory holds.
#[derive(Debug)]
pub enum Found {
    Memory(Box<Memory>),
    /// Not a memory, with why; `id` when the entry is named `<id>.md`.
    Unusable {
        id: Option<MemoryId>,
        reason: String,
    },
}

/// Reads one entry of `namespace`'s directory; `None` for a hidden file,
/// which is left alone unlisted (temporary files are hidden too).
pub fn read_entry(entry: &Entry, namespace: &Namespace) -> Option<Found> {
    let stem = match classify(entry) {
        Kind::HiddenFile => return None,
        Kind::Other(reason) => {
            let id = entry
                .name
                .strip_suffix(".md")
                .and_then(|stem| stem.parse().ok());
            return Some(Found::Unusable {
                id,
                reason: reason.to_owned(),
            });
        }
        Kind::Markdown(stem) => stem,
    };
    let Ok(id) = stem.parse::<MemoryId>() else {
        return Some(Found::Unusable {
            id: None,
            reason: "the file name is not `<memory id>.md`".to_owned(),
        });
    };
    let unusable = |reason: String| Found::Unusable {
        id: Some(id),
        reason,
    };
    let text = match confine::read_regular_file(&entry.path, confine::MAX_FILE_BYTES) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::FileTooLarge => {
            return Some(unusable(format!("not read: the file is too large ({err})")));
        }
        Err(err) => return Some(unusable(format!("unreadable: {err}"))),
    };
    Some(match markdown::parse(&text, namespace.clone()) {
        Err(err) => unusable(err.to_string()),
        Ok(memory) if memory.id != id => unusable(format!(
            "the front-matter id {} does not match the file name",
            memory.id
        )),
        Ok(memory) => Found::Memory(Box::new(memory)),
    })
}

#[derive(Default)]
struct Loader {
    loaded: Loaded,
    /// The namespace of every id loaded so far: ids are unique store-wide.
    owners: HashMap<MemoryId, Namespace>,
}

impl Loader {
    /// Loads the memory files of one namespace directory.
    fn namespace(&mut self, dir: &Path, namespace: &Namespace) -> Result<(), Error> {
        let relative = namespace_path(namespace);
        let mut lifecycles = lifecycle::read_file(dir);
        for entry in read_dir_sorted(dir)? {
            let path = format!("{relative}/{}", entry.name);
            if entry.name.starts_with(atomic::TEMP_PREFIX) {
                // A write that a crash interrupted before its rename: never a memory.
                if let Err(err) = fs::remove_file(&entry.path) {
                    tracing::warn!(file.path = %entry.path.display(), error = %err, "could not remove an interrupted write");
                }
                continue;
            }
            // Before the read: a change made after it shows as a new
            // fingerprint, and the live sync reads the file again.
            let fingerprint = Fingerprint::of(&entry.path);
            let reason = match read_entry(&entry, namespace) {
                None => continue,
                Some(Found::Unusable { reason, .. }) => reason,
                Some(Found::Memory(memory)) if self.owners.contains_key(&memory.id) => {
                    id_in_use(memory.id)
                }
                Some(Found::Memory(mut memory)) => {
                    if let Some(lifecycle) = lifecycles.remove(&memory.id) {
                        memory.lifecycle = lifecycle;
                    }
                    self.owners.insert(memory.id, memory.namespace.clone());
                    self.loaded.memories.push(*memory);
                    if let Some(fingerprint) = fingerprint {
                        self.loaded.fingerprints.insert(path, fingerprint);
                    }
                    continue;
                }
            };
            self.loaded.skipped.push(SkippedFile {
                path,
                reason,
                namespace: Some(namespace.clone()),
            });
        }
        Ok(())
    }
}

/// What an entry of a namespace directory is, judged from its listing
/// alone: nothing is opened to find out (opening a FIFO blocks).
enum Kind<'a> {
    /// `<stem>.md`, a regular file: a memory file, if it parses.
    Markdown(&'a str),
    /// Hidden files (`.DS_Store`, editor swap files) are left alone unlisted.
    HiddenFile,
    /// Anything else is skipped, and listed with this reason.
    Other(&'static str),
}

fn classify(entry: &Entry) -> Kind<'_> {
    let hidden = entry.name.starts_with('.');
    if entry.kind.is_symlink() {
        Kind::Other(LINK)
    } else if entry.kind.is_dir() && hidden {
        Kind::Other("a hidden directory: memory files live directly in the namespace directory")
    } else if entry.kind.is_dir() {
        Kind::Other("a directory: memory files live directly in the namespace directory")
    } else if hidden {
        Kind::HiddenFile
    } else if !entry.kind.is_file() {
        Kind::Other("not a regular file (a FIFO, socket or device): it is never opened")
    } else if let Some(stem) = entry.name.strip_suffix(".md") {
        Kind::Markdown(stem)
    } else if entry.name.to_ascii_lowercase().ends_with(".md") {
        Kind::Other("the extension is not `.md` in lower case: memory files are `<memory id>.md`")
    } else {
        Kind::Other("not a memory file: memory files are `<memory id>.md`")
    }
}

/// A directory entry as listed: a link is a link, never what it points at.
pub struct Entry {
    pub path: PathBuf,
    pub name: String,
    pub kind: FileType,
}

/// A directory's entries in name order; a directory that does not exist
/// is empty.
pub fn read_dir_sorted(dir: &Path) -> Result<Vec<Entry>, Error> {
    let read_error = |source| Error::Read {
        path: dir.to_owned(),
        source,
    };
    let listing = match fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(read_error(err)),
    };
    let mut entries = Vec::new();
    for entry in listing {
        let entry = entry.map_err(read_error)?;
        entries.push(Entry {
            path: entry.path(),
            name: entry.file_name().to_string_lossy().into_owned(),
            kind: entry.file_type().map_err(read_error)?,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::memory::{Category, RelatedEdge, Relationship};

    fn memory(namespace: &Namespace) -> Memory {
        Memory::example(namespace.clone(), Category::Patterns, "x")
    }

    #[test]
    fn links_the_api_could_not_have_written_are_reported_alike() {
        let ana = Namespace::User("ana".parse().unwrap());
        let bob = Namespace::User("bob".parse().unwrap());
        let forge = Namespace::Repo("forge".parse().unwrap());
        let [own, repo, other_user] = [&ana, &forge, &bob].map(memory);
        let owners: HashMap<MemoryId, Namespace> = [&own, &repo, &other_user]
            .into_iter()
            .map(|m| (m.id, m.namespace.clone()))
            .collect();
        let edge = |id| RelatedEdge {
            id,
            relationship: Relationship::Related,
        };
        let mut linking = memory(&ana);
        linking.supersedes = Some(own.id);
        linking.related = vec![
            edge(own.id),
            edge(other_user.id),
            edge(repo.id),
            edge(MemoryId::new()),
        ];
        let reasons: Vec<String> = unfollowed_links(&linking, |id| owners.get(&id))
            .into_iter()
            .map(|skipped| skipped.reason)
            .collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].starts_with("`related[1].id` names no memory of user/ana or of a repo"));
        assert_eq!(reasons[0].replace("[1]", "[3]"), reasons[1]);

        let mut reasons = [repo.id, other_user.id, MemoryId::new()]
            .map(|predecessor| {
                let mut superseding = memory(&ana);
                superseding.supersedes = Some(predecessor);
                let mut skipped = unfollowed_links(&superseding, |id| owners.get(&id));
                assert_eq!(skipped.len(), 1);
                skipped.remove(0).reason
            })
            .to_vec();
        reasons.sort();
        reasons.dedup();
        assert_eq!(reasons.len(), 1, "one wording for all: {reasons:?}");
    }
}
