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

use crate::client::agent::Scope;

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
        let note = if is_in_build_dir(exe) {
            format!(
                "Note: the entries run {}, in a cargo build directory: `cargo clean` or a \
                 rebuild elsewhere leaves the agent without it. `cargo install --path <engram \
                 checkout>` installs a copy in ~/.cargo/bin; run setup again with that one.\n",
                exe.display()
            )
        } else {
            String::new()
        };
        return Program {
            command: exe.to_string_lossy().into_owned(),
            note,
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

/// Where `program` is, when it names an executable file: a path as it
/// stands, a bare name as a shell finds it on `path_var`.
pub fn resolve(program: &str, path_var: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        is_executable_file(&path).then_some(path)
    } else {
        find_on_path(program, path_var)
    }
}

/// Whether `exe` is where cargo builds: `…/target/[<triple>/]debug/` or
/// `…/release/`.
fn is_in_build_dir(exe: &Path) -> bool {
    let profile = exe
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|name| name == "debug" || name == "release");
    profile && exe.components().any(|part| part.as_os_str() == "target")
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
    fn a_binary_in_a_build_directory_is_said_to_be_one() {
        for exe in [
            "/home/ana/engram/target/release/engram",
            "/home/ana/engram/target/x86_64-unknown-linux-gnu/debug/engram",
        ] {
            let program = choose(Scope::User, Path::new(exe), None);
            assert_eq!(program.command, exe);
            assert!(
                program.note.contains("cargo build directory"),
                "{program:?}"
            );
            assert!(program.note.contains("cargo install"), "{program:?}");
        }
        let installed = choose(Scope::User, Path::new("/home/ana/.cargo/bin/engram"), None);
        assert_eq!(installed.note, "");
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
