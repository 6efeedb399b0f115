//! Whose memories a hook reads and writes: the project (the git checkout
//! the agent works in) and the person (the OS user), each made into a valid
//! Engram id. Found from the file system and the environment alone, with no
//! process started, so a hook stays fast; every file is read through
//! [`bounded`], so a `.git` that is a FIFO, a device or a huge file cannot
//! stall the hook or the MCP bridge.

use std::path::{Path, PathBuf};

use super::bounded;

/// The longest id Engram accepts.
const MAX_ID_LEN: usize = 128;

/// The most of a `.git` file read: it holds one `gitdir: <path>` line.
const MAX_GIT_POINTER_BYTES: u64 = 64 * 1024;

/// The most of the password database read.
const MAX_PASSWD_BYTES: u64 = 4 * 1024 * 1024;

/// The password database: where the OS user's name is found when the
/// environment does not say it.
const PASSWD: &str = "/etc/passwd";

/// The top of the git checkout holding `dir` (the nearest ancestor with a
/// `.git` directory or regular file), if there is one.
pub fn checkout_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|ancestor| bounded::is_dir_or_regular(&ancestor.join(".git")))
        .map(Path::to_path_buf)
}

/// The project name for `dir`: the name of its checkout's top directory,
/// the main checkout's for a linked worktree (whose `.git` file points
/// into `<main>/.git/worktrees/`), else `dir`'s own name; made valid by
/// [`to_id`].
pub fn repo_name(dir: &Path) -> Option<String> {
    let root = checkout_root(dir).unwrap_or_else(|| dir.to_path_buf());
    let project = main_checkout(&root).unwrap_or(root);
    to_id(&project.file_name()?.to_string_lossy())
}

/// The main checkout of a linked worktree at `root`, read from its `.git`
/// file (`gitdir: <main>/.git/worktrees/<name>`).
fn main_checkout(root: &Path) -> Option<PathBuf> {
    let pointer = bounded::read_head(&root.join(".git"), MAX_GIT_POINTER_BYTES).ok()?;
    let pointer = String::from_utf8(pointer).ok()?;
    let gitdir = Path::new(pointer.strip_prefix("gitdir:")?.trim());
    let gitdir = if gitdir.is_absolute() {
        gitdir.to_path_buf()
    } else {
        root.join(gitdir)
    };
    let worktrees = gitdir.parent()?;
    let dot_git = worktrees.parent()?;
    (worktrees.file_name()? == "worktrees" && dot_git.file_name()? == ".git")
        .then(|| dot_git.parent().map(Path::to_path_buf))
        .flatten()
}

/// The repo and the user a command acts for, as the JSON fields of those
/// found: each one named made valid by [`to_id`], else the current
/// directory's project and the OS user. One that cannot be made a valid
/// id is left out, and the service's default applies.
pub fn owners(
    repo: Option<&str>,
    user: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> serde_json::Map<String, serde_json::Value> {
    let repo = match repo {
        Some(repo) => to_id(repo),
        None => std::env::current_dir().ok().and_then(|dir| repo_name(&dir)),
    };
    let user = match user {
        Some(user) => to_id(user),
        None => os_user(env),
    };
    [("repo", repo), ("user", user)]
        .into_iter()
        .filter_map(|(owner, id)| Some((owner.to_owned(), serde_json::Value::String(id?))))
        .collect()
}

/// The OS user's login name: from the environment, else from the password
/// database by this process's uid; made valid by [`to_id`].
pub fn os_user(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    env_user(env).or_else(passwd_user)
}

/// The login name the environment gives (`USER`, `LOGNAME`, `USERNAME`),
/// made valid by [`to_id`].
pub fn env_user(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    ["USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .find_map(|var| env(var).filter(|name| !name.trim().is_empty()))
        .and_then(|name| to_id(&name))
}

/// The name of this process's uid in the password database (`/etc/passwd`:
/// containers and CI runners often set no `USER` or `LOGNAME`, but their
/// image lists the user it runs as), made valid by [`to_id`].
pub fn passwd_user() -> Option<String> {
    let passwd = bounded::read_head(Path::new(PASSWD), MAX_PASSWD_BYTES).ok()?;
    let uid = rustix::process::getuid().as_raw();
    user_of_uid(&String::from_utf8_lossy(&passwd), uid).and_then(|name| to_id(&name))
}

/// The name of `uid` in a password database's text
/// (`name:password:uid:gid:gecos:home:shell` lines).
fn user_of_uid(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let listed: u32 = fields.nth(1)?.trim().parse().ok()?;
        (listed == uid && !name.is_empty()).then(|| name.to_owned())
    })
}

/// `name` as an Engram id (`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`): other
/// characters become `-`, leading ones that cannot start an id are dropped,
/// and it is cut to 128 characters. `None` when nothing usable is left.
pub fn to_id(name: &str) -> Option<String> {
    let id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(MAX_ID_LEN)
        .collect();
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_become_valid_ids() {
        assert_eq!(to_id("forge").as_deref(), Some("forge"));
        assert_eq!(
            to_id("my project (old)").as_deref(),
            Some("my-project--old-")
        );
        assert_eq!(to_id(".dotfiles").as_deref(), Some("dotfiles"));
        assert_eq!(to_id("Ærø").as_deref(), Some("r-"));
        assert_eq!(to_id("---"), None);
        assert_eq!(to_id(&"x".repeat(300)).map(|id| id.len()), Some(128));
    }

    #[test]
    fn the_repo_is_the_checkouts_top_directory_even_from_a_subdirectory() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("forge");
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join("src/deep")).unwrap();
        assert_eq!(repo_name(&root.join("src/deep")).as_deref(), Some("forge"));
        assert_eq!(checkout_root(&root.join("src")), Some(root.clone()));

        let elsewhere = temp.path().join("scratch space");
        fs::create_dir_all(&elsewhere).unwrap();
        assert_eq!(repo_name(&elsewhere).as_deref(), Some("scratch-space"));
    }

    #[test]
    fn a_linked_worktree_belongs_to_its_main_checkout() {
        let temp = tempfile::tempdir().unwrap();
        let main = temp.path().join("forge");
        fs::create_dir_all(main.join(".git/worktrees/feature")).unwrap();
        let linked = temp.path().join("forge-feature");
        fs::create_dir_all(&linked).unwrap();
        fs::write(
            linked.join(".git"),
            format!(
                "gitdir: {}\n",
                main.join(".git/worktrees/feature").display()
            ),
        )
        .unwrap();
        assert_eq!(repo_name(&linked).as_deref(), Some("forge"));
    }

    #[test]
    fn the_user_comes_from_the_login_environment() {
        let env = |var: &str| (var == "LOGNAME").then(|| "ana maria".to_owned());
        assert_eq!(os_user(env).as_deref(), Some("ana-maria"));
        assert_eq!(env_user(|_| None), None);
    }

    #[test]
    fn without_one_the_user_is_the_uids_name_in_the_password_database() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      # a comment\n\
                      broken line\n\
                      ana:x:1000:1000:Ana,,,:/home/ana:/bin/bash\n";
        assert_eq!(user_of_uid(passwd, 1000).as_deref(), Some("ana"));
        assert_eq!(user_of_uid(passwd, 0).as_deref(), Some("root"));
        assert_eq!(user_of_uid(passwd, 4242), None);
    }

    #[test]
    fn a_git_entry_that_is_a_fifo_or_a_device_is_not_read() {
        let temp = tempfile::tempdir().unwrap();
        let fifo_parent = temp.path().join("fifo-parent");
        fs::create_dir_all(fifo_parent.join("forge")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(fifo_parent.join(".git"))
            .status()
            .unwrap();
        assert!(made.success());
        // Would wait for a writer forever if the FIFO were opened to read.
        assert_eq!(
            repo_name(&fifo_parent.join("forge")).as_deref(),
            Some("forge")
        );

        let zero_checkout = temp.path().join("zero");
        fs::create_dir_all(&zero_checkout).unwrap();
        std::os::unix::fs::symlink("/dev/zero", zero_checkout.join(".git")).unwrap();
        // Would read without end if the device were read.
        assert_eq!(repo_name(&zero_checkout).as_deref(), Some("zero"));
    }

    proptest! {
        #[test]
        fn every_id_matches_the_pattern(name in ".*") {
            if let Some(id) = to_id(&name) {
                prop_assert!(engram_id_pattern().is_match(&id), "{id:?}");
            }
        }
    }

    fn engram_id_pattern() -> regex::Regex {
        regex::Regex::new(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$").unwrap()
    }
}
