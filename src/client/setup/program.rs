//! The command Engram's entries run. A project's shared files are
//! committed and read on other machines, so they name the command
//! `engram`, found on each machine's `PATH`; the files private to this
//! machine (user and local scope) name the binary setup ran from, which
//! works whatever `PATH` the agent is started with.
//!
//! When `engram` does not resolve on this machine's `PATH`, the shared
//! files still name it (they are right for the team, and a path to this
//! machine's build would be wrong everywhere else), and setup warns, saying
//! how to put it there: the agent here cannot start it until then.

use std::path::{Path, PathBuf};

use super::Scope;

/// The command name written into shared files.
pub const SHARED_COMMAND: &str = "engram";

/// The command to write, with what the report and the warnings say about it.
#[derive(Debug)]
pub struct Program {
    pub command: String,
    /// A line for the report (empty when there is nothing to say).
    pub note: String,
    pub warnings: Vec<String>,
}

/// The command for `scope`'s files, where `exe` is the binary setup runs
/// from and `path_var` the `PATH` it runs with.
pub fn choose(scope: Scope, exe: &Path, path_var: Option<&str>) -> Program {
    if scope != Scope::Project {
        return Program {
            command: exe.to_string_lossy().into_owned(),
            note: String::new(),
            warnings: Vec::new(),
        };
    }
    let mut warnings = Vec::new();
    let note = match find_on_path(SHARED_COMMAND, path_var) {
        Some(found) => {
            if !same_file(&found, exe) {
                warnings.push(format!(
                    "`{SHARED_COMMAND}` on PATH is {}, not the binary running setup ({}): \
                     the agent will run that one",
                    found.display(),
                    exe.display()
                ));
            }
            format!(
                "The project's files run `{SHARED_COMMAND}` from PATH (here: {}).\n",
                found.display()
            )
        }
        None => {
            warnings.push(format!(
                "`{SHARED_COMMAND}` is not on PATH, so the agent on this machine cannot run \
                 what setup wrote for the project (the shared files name the command, not \
                 this machine's path to it). Put it there: `cargo install --path <engram \
                 checkout>` (installs into ~/.cargo/bin, which must be on PATH), or \
                 `ln -s {} ~/.local/bin/{SHARED_COMMAND}` with ~/.local/bin on PATH",
                exe.display()
            ));
            format!("The project's files run `{SHARED_COMMAND}` from PATH (not found here).\n")
        }
    };
    Program {
        command: SHARED_COMMAND.to_owned(),
        note,
        warnings,
    }
}

/// The first executable file named `name` in the directories of
/// `path_var`, as a shell would find it.
fn find_on_path(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_project_files_name_the_command() {
        let exe = Path::new("/opt/build/engram");
        for scope in [Scope::User, Scope::Local] {
            assert_eq!(choose(scope, exe, None).command, "/opt/build/engram");
        }
        let program = choose(Scope::Project, exe, Some(""));
        assert_eq!(program.command, "engram");
        assert!(program.warnings[0].contains("not on PATH"), "{program:?}");
    }

    #[test]
    fn the_command_is_found_as_a_shell_finds_it() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("a"), dir.path().join("b"));
        for bin in [&first, &second] {
            std::fs::create_dir(bin).unwrap();
        }
        std::fs::write(first.join("engram"), "not executable").unwrap();
        std::fs::write(second.join("engram"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            second.join("engram"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let path_var = std::env::join_paths([&first, &second]).unwrap();
        assert_eq!(
            find_on_path("engram", path_var.to_str()),
            Some(second.join("engram"))
        );
    }
}
