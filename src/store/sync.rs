//! Reconciling the store with the data directory after changes made
//! outside Engram: a file added, edited or removed by hand, by `git pull`
//! or by a sync tool.
//!
//! A pass is given what may have changed ([`Targets`]: scope directories,
//! namespaces, and the files events named) and compares the files with
//! the memories in service, reading each file by the same rules as the
//! start-up load (`load::read_entry`). It applies only the differences,
//! all at once: one view update, one batch of changes recorded for the
//! indexer, so a `git checkout` of a thousand files is one index update
//! and not a thousand. Engram's own writes come back as files equal to
//! what is in service and change nothing: no event is suppressed, the
//! comparison decides.
//!
//! Invariants:
//! - A pass holds the store's writer lock throughout, so it never sees
//!   one of Engram's own writes half done (file written, view not yet).
//! - A file is never written to. One that stops parsing (or becomes a
//!   link, or a directory) keeps its last good version in service and is
//!   reported, with a warning naming it, until it is fixed.
//! - Ids stay unique store-wide: a file whose id another namespace's file
//!   still holds is reported, as at load. A file moved from one namespace
//!   to another moves its memory, whichever order the new file and the
//!   removal of the old one come in.
//! - A file no event named is read again only when its fingerprint
//!   (inode, size, modification and change times) differs from the last
//!   read, so a rescan of a large directory costs a listing.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;

use chrono::Utc;

use crate::memory::{Memory, MemoryId, Namespace, Scope};
use crate::store::load::{self, Fingerprint, Fingerprints, Found};
use crate::store::{Reports, SkippedFile, Store, confine, file_name};

/// What a pass looks at.
#[derive(Debug, Default)]
pub struct Targets {
    /// Scope directories whose listing may have changed: their namespace
    /// directories are listed again, and every namespace reconciled.
    pub scopes: BTreeSet<Scope>,
    pub namespaces: BTreeSet<Namespace>,
    /// Entries events named, relative to the data directory: read again
    /// whatever their fingerprint says.
    pub touched: HashSet<String>,
}

impl Targets {
    /// Both scopes, every namespace: after an event overflow, and at start.
    pub fn everything() -> Self {
        Self {
            scopes: BTreeSet::from([Scope::Repo, Scope::User]),
            ..Self::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.scopes.is_empty() && self.namespaces.is_empty()
    }

    /// How many entries it names, to bound what events gather.
    pub fn len(&self) -> usize {
        self.scopes.len() + self.namespaces.len() + self.touched.len()
    }

    /// Adds what a change at `relative` (to the data directory) may have
    /// changed. Paths outside `repos/` and `users/` (`queue/`, `.cache/`)
    /// and hidden files (temporary files, editor debris) change nothing.
    pub fn add(&mut self, relative: &Path) {
        let parts: Vec<String> = relative
            .components()
            .map(|part| part.as_os_str().to_string_lossy().into_owned())
            .collect();
        let Some(first) = parts.first() else {
            *self = Self::everything();
            return;
        };
        let scope = match first.as_str() {
            "repos" => Scope::Repo,
            "users" => Scope::User,
            _ => return,
        };
        let (Some(owner), Some(name)) = (parts.get(1), parts.get(2)) else {
            // The scope directory or a namespace directory itself.
            self.scopes.insert(scope);
            return;
        };
        if parts.len() == 3 && name.starts_with('.') {
            return;
        }
        let namespace = match scope {
            Scope::Repo => owner.parse().map(Namespace::Repo),
            Scope::User => owner.parse().map(Namespace::User),
        };
        match namespace {
            Ok(namespace) => {
                self.namespaces.insert(namespace);
                self.touched.insert(format!("{first}/{owner}/{name}"));
            }
            // Reported at scope level: the directory name is not an id.
            Err(_) => {
                self.scopes.insert(scope);
            }
        }
    }
}

/// The differences a pass found, applied at its end.
#[derive(Default)]
struct Plan {
    upserts: Vec<Memory>,
    removals: Vec<MemoryId>,
    /// The namespace each id was found in during this pass.
    claimed: HashMap<MemoryId, Namespace>,
    read: u64,
    unchanged: u64,
}

/// Runs passes; owned by the watcher task, which hands it to a blocking
/// thread for each pass.
pub struct Reconciler {
    store: Store,
    /// By path relative to the data directory.
    fingerprints: Fingerprints,
    /// Files refused because another namespace's file held their id: when
    /// that memory goes (a move done as copy, then delete, as a checkout
    /// may do it), they are read again in the same pass.
    clashes: HashMap<MemoryId, (Namespace, String)>,
}

impl Reconciler {
    /// A reconciler that takes the files of `fingerprints` (those the
    /// store was loaded from) as read: its first pass only reads what
    /// changed since.
    pub fn new(store: Store, fingerprints: Fingerprints) -> Self {
        Self {
            store,
            fingerprints,
            clashes: HashMap::new(),
        }
    }

    /// Brings the store in line with the data directory for `targets`.
    /// Blocking.
    pub fn pass(&mut self, mut targets: Targets) {
        let store = self.store.clone();
        let _writer = store.lock_writer();
        // Each round after the first follows removals that freed an id a
        // refused file holds; it ends when a round removes no such id.
        while !targets.is_empty() {
            targets = self.round(targets);
        }
    }

    /// One comparison of `targets` with the store, applied; what to look
    /// at again.
    fn round(&mut self, targets: Targets) -> Targets {
        let store = self.store.clone();
        let mut namespaces = targets.namespaces;
        for scope in targets.scopes {
            self.scope(scope, &mut namespaces);
        }
        let mut plan = Plan::default();
        for namespace in &namespaces {
            let ids: Vec<MemoryId> = {
                let view = store.read();
                view.in_namespace(namespace)
                    .map(|memory| memory.id)
                    .collect()
            };
            self.namespace(namespace, &ids, &targets.touched, &mut plan);
        }
        let mut again = Targets::default();
        for id in &plan.removals {
            if let Some((namespace, path)) = self.clashes.remove(id) {
                again.namespaces.insert(namespace);
                again.touched.insert(path);
            }
        }
        self.apply(plan);
        again
    }

    /// Lists a scope directory: its namespaces join the pass (with those
    /// in service, whose directory may be gone), and its own reports
    /// (links, stray files, invalid directory names) are replaced.
    fn scope(&mut self, scope: Scope, namespaces: &mut BTreeSet<Namespace>) {
        let listing = match load::namespace_dirs(self.store.root(), scope) {
            Ok(listing) => listing,
            Err(err) => {
                tracing::warn!(error = %err, "could not list a scope directory; it is left as it was");
                return;
            }
        };
        namespaces.extend(
            listing
                .namespaces
                .into_iter()
                .map(|(namespace, _)| namespace),
        );
        namespaces.extend(
            self.store
                .read()
                .generations
                .keys()
                .filter(|namespace| namespace.scope() == scope)
                .cloned(),
        );
        let prefix = format!("{}/", load::scope_dir_name(scope));
        let mut reports = self.store.write_reports();
        let listed: HashSet<&str> = listing.skipped.iter().map(|f| f.path.as_str()).collect();
        let gone: Vec<String> = reports
            .files
            .keys()
            .filter(|path| is_scope_level(path, &prefix) && !listed.contains(path.as_str()))
            .cloned()
            .collect();
        for path in gone {
            clear(&mut reports, &path);
        }
        for file in listing.skipped {
            report(&mut reports, file);
        }
    }

    /// Compares one namespace directory with `in_service`, the ids of its
    /// memories in the view.
    fn namespace(
        &mut self,
        namespace: &Namespace,
        in_service: &[MemoryId],
        touched: &HashSet<String>,
        plan: &mut Plan,
    ) {
        let relative_dir = load::namespace_path(namespace);
        let entries = match confine::namespace_dir(self.store.root(), namespace, false) {
            Ok(dir) => match load::read_dir_sorted(&dir) {
                Ok(entries) => entries,
                Err(err) => {
                    tracing::warn!(error = %err, "could not list a namespace directory; it is left as it was");
                    return;
                }
            },
            Err(confine::Refusal::Io { path, source }) => {
                tracing::warn!(file.path = %path.display(), error = %source, "could not check a namespace directory; it is left as it was");
                return;
            }
            // A link or not a directory, reported at scope level: it holds
            // nothing Engram uses.
            Err(_) => Vec::new(),
        };
        let mut on_disk = HashSet::new();
        let mut listed = HashSet::new();
        for entry in entries {
            if entry.name.starts_with('.') && !entry.kind.is_dir() {
                continue;
            }
            let path = format!("{relative_dir}/{}", entry.name);
            let Some(fingerprint) = Fingerprint::of(&entry.path) else {
                continue; // gone since the listing
            };
            let named_id = entry
                .name
                .strip_suffix(".md")
                .and_then(|stem| stem.parse::<MemoryId>().ok());
            listed.insert(path.clone());
            if !touched.contains(&path) && self.fingerprints.get(&path) == Some(&fingerprint) {
                on_disk.extend(named_id);
                continue;
            }
            self.fingerprints.insert(path.clone(), fingerprint);
            plan.read += 1;
            match load::read_entry(&entry, namespace) {
                None => {}
                Some(Found::Memory(memory)) => {
                    self.found(*memory, path, plan, &mut on_disk);
                }
                Some(Found::Unusable { id, reason }) => {
                    self.unusable(namespace, path, id, reason, &mut on_disk);
                }
            }
        }
        plan.removals
            .extend(in_service.iter().filter(|id| !on_disk.contains(id)));
        let prefix = format!("{relative_dir}/");
        let mut reports = self.store.write_reports();
        let gone: Vec<String> = reports
            .files
            .keys()
            .filter(|path| path.starts_with(&prefix) && !listed.contains(*path))
            .cloned()
            .collect();
        for path in gone {
            clear(&mut reports, &path);
        }
        drop(reports);
        forget_unlisted(&mut self.fingerprints, &prefix, &listed);
    }

    /// A file that parses: in service from now on, unless its id belongs
    /// to another namespace's file that is still there.
    fn found(
        &mut self,
        memory: Memory,
        path: String,
        plan: &mut Plan,
        on_disk: &mut HashSet<MemoryId>,
    ) {
        let id = memory.id;
        let namespace = memory.namespace.clone();
        let current = self.store.get(id);
        let held_elsewhere = current
            .as_ref()
            .filter(|current| current.namespace != namespace)
            .is_some_and(|current| {
                let other = self
                    .store
                    .root()
                    .join(load::namespace_path(&current.namespace))
                    .join(file_name(id));
                fs::symlink_metadata(other).is_ok()
            });
        let claimed_elsewhere = plan
            .claimed
            .get(&id)
            .is_some_and(|other| *other != namespace);
        if held_elsewhere || claimed_elsewhere {
            self.clashes.insert(id, (namespace.clone(), path.clone()));
            self.unusable(&namespace, path, Some(id), load::id_in_use(id), on_disk);
            return;
        }
        // The lifecycle is not in the file: it stays as it was, except
        // that a memory a person edited is confirmed, and restored, by
        // that edit.
        let mut memory = memory;
        if let Some(current) = current
            .as_ref()
            .filter(|current| current.namespace == namespace)
        {
            memory.lifecycle = current.lifecycle.clone();
            if memory != **current {
                memory.lifecycle = current.lifecycle.restored(Utc::now());
            }
        }
        plan.claimed.insert(id, namespace);
        on_disk.insert(id);
        clear(&mut self.store.write_reports(), &path);
        if current.is_some_and(|current| *current == memory) {
            plan.unchanged += 1;
        } else {
            plan.upserts.push(memory);
        }
    }

    /// A file that cannot be used: reported; a memory of this namespace
    /// named by it stays in service as it was.
    fn unusable(
        &self,
        namespace: &Namespace,
        path: String,
        id: Option<MemoryId>,
        reason: String,
        on_disk: &mut HashSet<MemoryId>,
    ) {
        let kept = id.filter(|&id| {
            self.store
                .get(id)
                .is_some_and(|current| current.namespace == *namespace)
        });
        let reason = match kept {
            Some(id) => {
                on_disk.insert(id);
                format!("{reason} (its last good version stays in service until the file is fixed)")
            }
            None => reason,
        };
        report(
            &mut self.store.write_reports(),
            SkippedFile {
                path,
                reason,
                namespace: Some(namespace.clone()),
            },
        );
    }

    /// Applies `plan` as one view update and one batch of changes, and
    /// works out the never-followed links again.
    fn apply(&self, plan: Plan) {
        let store = &self.store;
        let (removed, upserted) = (plan.removals.len(), plan.upserts.len());
        let sync = &store.inner.sync;
        let mut view = store.write_view();
        // Counted before the view is released too: whoever sees the new
        // view sees the pass counted.
        let changed = store.take_in(&mut view, plan.removals, plan.upserts);
        sync.passes.fetch_add(1, Ordering::Relaxed);
        sync.files_read.fetch_add(plan.read, Ordering::Relaxed);
        sync.unchanged.fetch_add(plan.unchanged, Ordering::Relaxed);
        sync.applied
            .fetch_add(changed.len() as u64, Ordering::Relaxed);
        // The view before the reports, as everywhere. Links change only
        // with the view: a pass that found every file as it was (most of
        // them: Engram's own writes come back) does not walk the store.
        if !changed.is_empty() {
            store.write_reports().relink(&view);
        }
        drop(view);
        if !changed.is_empty() {
            tracing::info!(
                memories.written = upserted,
                memories.removed = removed,
                files.read = plan.read,
                "took in changes made to the data directory"
            );
        }
    }
}

/// Forgets the fingerprints under `prefix` (a namespace directory's path
/// and a slash) of files no longer `listed` there: one range of the map,
/// not the whole store's files.
fn forget_unlisted(fingerprints: &mut Fingerprints, prefix: &str, listed: &HashSet<String>) {
    let unlisted: Vec<String> = fingerprints
        .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
        .map(|(path, _)| path)
        .take_while(|path| path.starts_with(prefix))
        .filter(|path| !listed.contains(*path))
        .cloned()
        .collect();
    for path in unlisted {
        fingerprints.remove(&path);
    }
}

/// Whether a report under `prefix` (`repos/`) is about the scope directory
/// or one of its entries, rather than a file in a namespace.
fn is_scope_level(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| !rest.trim_end_matches('/').contains('/'))
        || path == prefix
}

/// Reports `file`, with a warning naming it unless it is reported so
/// already (the start-up load reported it, or a rescan read it again).
fn report(reports: &mut Reports, file: SkippedFile) {
    if reports.files.get(&file.path) != Some(&file) {
        tracing::warn!(file.path = %file.path, reason = %file.reason, "a file in the data directory cannot be used");
        reports.files.insert(file.path.clone(), file);
    }
}

/// Drops the report of `path`, if any: the entry was fixed or is gone.
fn clear(reports: &mut Reports, path: &str) {
    if reports.files.remove(path).is_some() {
        tracing::info!(file.path = %path, "a reported file in the data directory is fixed or gone");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_forgets_its_unlisted_files_and_none_of_its_neighbours() {
        let fingerprint = Fingerprint::of(Path::new(".")).unwrap();
        let paths = [
            "repos/forg/a.md",
            "repos/forge-2/b.md",
            "repos/forge/c.md",
            "repos/forge/d.md",
            "repos/forge/e.md",
            "repos/forgf/f.md",
            "users/forge/g.md",
        ];
        let mut fingerprints: Fingerprints = paths
            .iter()
            .map(|path| ((*path).to_owned(), fingerprint))
            .collect();
        let listed = HashSet::from(["repos/forge/d.md".to_owned()]);
        forget_unlisted(&mut fingerprints, "repos/forge/", &listed);
        let kept: Vec<&str> = fingerprints.keys().map(String::as_str).collect();
        assert_eq!(
            kept,
            [
                "repos/forg/a.md",
                "repos/forge-2/b.md",
                "repos/forge/d.md",
                "repos/forgf/f.md",
                "users/forge/g.md",
            ]
        );
    }

    #[test]
    fn events_name_what_they_may_change() {
        let mut targets = Targets::default();
        for path in [
            "queue/abc.json",
            ".cache/embeddings.bin",
            "users/ana/.tmp-123-x.md",
            "users/ana/.x.md.swp",
        ] {
            targets.add(Path::new(path));
        }
        assert!(targets.is_empty(), "{targets:?}");

        targets.add(Path::new(
            "users/ana/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d.md",
        ));
        targets.add(Path::new("repos/not an id/x.md"));
        targets.add(Path::new("repos/forge"));
        assert_eq!(targets.scopes, BTreeSet::from([Scope::Repo]));
        assert_eq!(
            targets.namespaces,
            BTreeSet::from([Namespace::User("ana".parse().unwrap())])
        );
        assert!(
            targets
                .touched
                .contains("users/ana/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d.md")
        );

        targets.add(Path::new(""));
        assert_eq!(targets.scopes.len(), 2, "the root itself: everything");
    }

    #[test]
    fn scope_level_reports_are_those_of_the_scope_listing() {
        assert!(is_scope_level("repos/", "repos/"));
        assert!(is_scope_level("repos/a b/", "repos/"));
        assert!(is_scope_level("repos/stray.txt", "repos/"));
        assert!(!is_scope_level("repos/forge/x.md", "repos/"));
        assert!(!is_scope_level("users/ana", "repos/"));
    }
}
