//! `engram setup <agent>`: puts Engram's entries into a coding agent's own
//! configuration files, merging with what is there, and says what it did.
//!
//! Each agent gets the MCP server `engram mcp`, under the name `engram` in
//! the file where it keeps its MCP servers (JSON, JSON with comments, or
//! Codex's TOML), and either its four hooks, in its hooks file (the agents
//! whose hooks `engram hook` serves), or a block of instructions to call
//! Engram's tools, in its instructions file (the agent's entry in
//! [`crate::client::agent`] says which agent gets what, where, in which
//! dialect). Invariants:
//! - Idempotent: an entry already present as wanted is left alone, so a
//!   second run changes nothing and writes nothing.
//! - Only Engram's entries are touched ([`merge`], [`instructions`]); the
//!   rest of a file keeps its bytes ([`document`]: JSON, comments
//!   included, through [`json_edit`]; TOML through toml_edit; Markdown
//!   outside Engram's marked block).
//! - Shared (project) files run the command `engram` from `PATH`, never
//!   this machine's path to the binary ([`program`]); private files run
//!   the binary setup ran from.
//! - A file is read only when it is a regular file, and project files are
//!   never reached through a link ([`files`]).
//! - A file about to change is first copied to
//!   `<file>.engram-backup-<UTC time>`, readable by its owner only, keeping
//!   the newest few: beside the file, or for a shared project file under
//!   the state directory, out of the checkout that `git add -A` commits;
//!   the new text is written to a temporary file and renamed over it, so
//!   a crash leaves one or the other. A new file of the user's own (user
//!   and local scope) is created readable by the user only.
//! - After writing, the report says whether Engram answers at the URL the
//!   entries call ([`doctor::server`]; a warning, not a failure: setup may
//!   come first) and where the hooks log their failures.
//! - Every file is read, merged and rendered before any is written: a file
//!   that does not parse, has an unexpected shape or cannot be edited in
//!   place is an error, and nothing is written.
//! - `--print` writes nothing: it prints each file's snippet.

pub mod document;
pub mod files;
pub mod instructions;
pub mod json_edit;
pub mod merge;
pub mod program;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use merge::{Change, Entry, WrongShape};

use crate::client::agent::{Agent, Dirs, Missing, Scope};
use crate::client::doctor;
use crate::client::hook::{self, project};
use crate::client::http::DEFAULT_URL;
use document::{Document, Format};
use files::Links;
use json_edit::EditError;
use merge::{MCP_SERVER_NAME, shell_quote, shell_words};

/// The mode of a new file of the user's own: settings hold keys and tokens.
const PRIVATE_MODE: u32 = 0o600;

/// `engram setup`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    /// The agent to configure.
    #[arg(value_enum)]
    pub agent: Agent,
    /// Which of the agent's settings files to change.
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// Write the hooks to this file instead of the scope's.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Leave the MCP server entry out: hooks only.
    #[arg(long)]
    pub no_mcp: bool,
    /// Print the snippet to merge by hand instead of writing anything.
    #[arg(long)]
    pub print: bool,
    /// Engram's URL for the hooks to use (default: ENGRAM_URL when the hook
    /// runs, else http://127.0.0.1:8080).
    #[arg(long)]
    pub url: Option<String>,
    /// A fixed repo id for the hooks (default: the project of the agent's cwd).
    #[arg(long)]
    pub repo: Option<String>,
    /// A fixed user id for the hooks (default: the OS user).
    #[arg(long)]
    pub user: Option<String>,
}

/// Why setup changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no home directory: set HOME or pass --file")]
    NoHome,
    #[error("{agent} has no {scope} settings file; use --scope user or project")]
    NoSuchScope {
        agent: &'static str,
        scope: &'static str,
    },
    #[error(
        "Engram does not serve {agent}'s hooks, so --file (the hooks file) does not apply; \
         setup writes its MCP server and instructions"
    )]
    NoHooks { agent: &'static str },
    #[error("Engram does not serve {agent}'s hooks, so with --no-mcp there is nothing to write")]
    NothingToDo { agent: &'static str },
    #[error(
        "no place outside the checkout for the backups of its files: set HOME or \
         XDG_STATE_HOME; nothing was changed"
    )]
    NoBackupDir,
    #[error("finding the engram binary")]
    Exe(#[source] io::Error),
    #[error("{0} is not a valid repo or user id")]
    BadId(String),
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not JSON; nothing was changed")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} is not TOML; nothing was changed")]
    ParseToml {
        path: PathBuf,
        #[source]
        source: toml_edit::TomlError,
    },
    #[error("{path}: its shape is not the agent's; nothing was changed")]
    Shape {
        path: PathBuf,
        #[source]
        source: WrongShape,
    },
    #[error("{path}: {source}; nothing was changed")]
    Edit { path: PathBuf, source: EditError },
    #[error(
        "{path} is a symbolic link; project files are shared, so setup does not write \
         through links there (it could copy a private file into the checkout): replace it \
         with a regular file and run setup again; nothing was changed"
    )]
    Link { path: PathBuf },
    #[error(
        "{path} is a link to {}, which cannot be reached: create that file or remove the \
         link; nothing was changed",
        target.display()
    )]
    DanglingLink {
        path: PathBuf,
        target: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is {kind}, not a settings file; nothing was changed")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path} is larger than {limit} bytes; nothing was changed")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What setup did: the report for stdout, and what the user should
/// know even though nothing failed, for stderr.
#[derive(Debug)]
pub struct Outcome {
    pub report: String,
    pub warnings: Vec<String>,
}

/// One configuration file and the entries that go into it.
#[derive(Debug)]
struct Target {
    path: PathBuf,
    format: Format,
    entries: Vec<Entry>,
    /// Whether the file may be reached through a link, and below which
    /// directory that is checked.
    links: Links,
    root: PathBuf,
    /// Whether the file is the user's own (user and local scope): a new
    /// one is created readable by the user only.
    private: bool,
    /// Where its backups go: beside it when `None`; a shared project
    /// file's, under the state directory, out of the checkout.
    backups: Option<PathBuf>,
}

/// Runs setup and prints its report; exits 1 with the reason on stderr
/// when it changed nothing because of an error.
pub fn run(args: &SetupArgs) -> ExitCode {
    let env = |var: &str| std::env::var(var).ok();
    let result = std::env::current_exe().map_err(Error::Exe).and_then(|exe| {
        let cwd = std::env::current_dir().map_err(Error::Exe)?;
        setup(args, &exe, &cwd, env)
    });
    match result.and_then(|outcome| {
        for warning in &outcome.warnings {
            eprintln!("engram setup: warning: {warning}");
        }
        io::stdout()
            .lock()
            .write_all(outcome.report.as_bytes())
            .map_err(|source| Error::Write {
                path: PathBuf::from("stdout"),
                source,
            })
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("engram setup: {}", crate::causes::error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// Does the setup `args` ask for, with `exe` as the binary setup runs
/// from, and returns the report to print.
pub fn setup(
    args: &SetupArgs,
    exe: &Path,
    cwd: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Outcome, Error> {
    let program = program::choose(args.scope, exe, env("PATH").as_deref());
    let targets = targets(args, &program.command, cwd, &env)?;
    let report = if args.print {
        let mut snippets = String::new();
        for target in &targets {
            let mut document = Document::empty(target.format);
            for entry in &target.entries {
                document.merge(entry).map_err(|source| Error::Shape {
                    path: PathBuf::from("(snippet)"),
                    source,
                })?;
            }
            let text = document.render().map_err(|source| Error::Edit {
                path: PathBuf::from("(snippet)"),
                source,
            })?;
            snippets.push_str(&format!("# {}\n{text}", target.path.display()));
        }
        snippets
    } else {
        let mut report = apply(&targets)?;
        report.push_str(&program.note);
        report.push_str(&reachability(args, &env));
        report
    };
    Ok(Outcome {
        report,
        warnings: program.warnings,
    })
}

/// What the report says of Engram at the URL the entries call (a warning
/// when nothing answers: setup may come before the server), and where
/// the hooks log their failures, since the agent shows none of them.
fn reachability(args: &SetupArgs, env: &impl Fn(&str) -> Option<String>) -> String {
    let url = args
        .url
        .clone()
        .or_else(|| env("ENGRAM_URL"))
        .unwrap_or_else(|| DEFAULT_URL.to_owned());
    let mut lines = match crate::client::runtime() {
        Ok(runtime) => match runtime.block_on(doctor::server::check(&url)) {
            finding if finding.problem => format!("warning: {}\n", finding.text),
            finding => format!("{}.\n", finding.text),
        },
        Err(err) => format!(
            "warning: Engram at {} was not asked ({err})\n",
            crate::client::http::redact_userinfo(&url)
        ),
    };
    if args.agent.hooks().is_some()
        && let Some(log) = hook::log::default_path(env)
    {
        lines.push_str(&format!(
            "The hooks log their failures to {} (the agent shows none); `engram doctor` \
             checks all this again.\n",
            log.display()
        ));
    }
    lines
}

/// The files `args` asks to change, each with its entries.
fn targets(
    args: &SetupArgs,
    program: &str,
    cwd: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Target>, Error> {
    let options = options(args)?;
    // A file in the checkout is never reached through a link: the checkout
    // may come from anyone, and a link there could turn setup's write
    // into a copy of a private file. The user's own files may be links
    // (dotfiles), and are written through them.
    let (hooks_links, mcp_links) = match args.scope {
        Scope::Project => (Links::RefuseBelow, Links::RefuseBelow),
        Scope::Local => (Links::RefuseBelow, Links::Follow),
        Scope::User => (Links::Follow, Links::Follow),
    };
    let dirs = Dirs::new(cwd, &env);
    let root = dirs.project.clone();
    let backup_root = match args.scope {
        Scope::Project => Some(
            hook::log::state_dir(&env)
                .ok_or(Error::NoBackupDir)?
                .join("backups"),
        ),
        Scope::User | Scope::Local => None,
    };
    let target = |path: PathBuf, format, entries, links| Target {
        backups: backup_root
            .as_deref()
            .map(|backup_root| mirrored(backup_root, &cwd.join(&path))),
        path,
        format,
        entries,
        links,
        root: root.clone(),
        private: args.scope != Scope::Project,
    };
    let missing = |missing| match missing {
        Missing::Home => Error::NoHome,
        Missing::Scope => Error::NoSuchScope {
            agent: args.agent.as_str(),
            scope: args.scope.as_str(),
        },
    };
    let mut targets = Vec::new();
    match args.agent.hooks() {
        Some(hooks) => {
            let hook_options: String = options
                .iter()
                .map(|option| format!(" {}", shell_quote(option)))
                .collect();
            let entries = hooks
                .events
                .iter()
                .map(|&event| Entry::Hook {
                    agent: args.agent,
                    event,
                    command: format!(
                        "{} hook {} {}{hook_options}",
                        shell_quote(program),
                        args.agent.as_str(),
                        event.as_str()
                    ),
                })
                .collect();
            let path = match &args.file {
                Some(file) => file.clone(),
                None => args.agent.hooks_file(args.scope, &dirs).map_err(missing)?,
            };
            targets.push(target(
                path,
                Format::Json(hooks.dialect),
                entries,
                hooks_links,
            ));
        }
        None if args.file.is_some() => {
            return Err(Error::NoHooks {
                agent: args.agent.as_str(),
            });
        }
        None => {}
    }
    if !args.no_mcp {
        let file = args.agent.mcp_file(args.scope, &dirs).map_err(missing)?;
        let mut bridge_args = vec!["mcp".to_owned()];
        bridge_args.extend(options);
        let server = Entry::McpServer {
            at: file.at,
            program: program.to_owned(),
            args: bridge_args,
            style: file.style,
        };
        // One file may hold both (Gemini CLI's settings.json): one document,
        // merged once, so that neither write undoes the other.
        match targets.iter_mut().find(|hooks| hooks.path == file.path) {
            Some(shared) => shared.entries.push(server),
            None => targets.push(target(
                file.path,
                file.format.into(),
                vec![server],
                mcp_links,
            )),
        }
        if let Some((path, starts_with)) = args
            .agent
            .instructions_file(args.scope, &dirs)
            .map_err(missing)?
        {
            let entry = Entry::Instructions {
                text: instructions::TEXT,
            };
            targets.push(target(
                path,
                Format::Markdown { starts_with },
                vec![entry],
                mcp_links,
            ));
        }
    }
    if targets.is_empty() {
        return Err(Error::NothingToDo {
            agent: args.agent.as_str(),
        });
    }
    Ok(targets)
}

/// The options both the hooks and the MCP bridge are run with: `--url`,
/// `--repo` and `--user` when they were given.
fn options(args: &SetupArgs) -> Result<Vec<String>, Error> {
    let mut options = Vec::new();
    if let Some(url) = args.url.as_deref().filter(|url| *url != DEFAULT_URL) {
        options.extend(["--url".to_owned(), url.to_owned()]);
    }
    for (flag, id) in [("--repo", &args.repo), ("--user", &args.user)] {
        if let Some(id) = id {
            if project::to_id(id).as_deref() != Some(id.as_str()) {
                return Err(Error::BadId(id.clone()));
            }
            options.extend([flag.to_owned(), id.clone()]);
        }
    }
    Ok(options)
}

/// The directory under `root` that mirrors the one holding `file`:
/// `<root>/home/ana/forge/.codex/` for `/home/ana/forge/.codex/config.toml`.
fn mirrored(root: &Path, file: &Path) -> PathBuf {
    let parts = file
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .filter(|part| matches!(part, std::path::Component::Normal(_)));
    let mut dir = root.to_path_buf();
    dir.extend(parts);
    dir
}

/// Merges each target's entries into its file (created if absent), writes
/// the files that changed, and returns the report. Every file is read,
/// merged and rendered before the first is written.
fn apply(targets: &[Target]) -> Result<String, Error> {
    let mut merged = Vec::with_capacity(targets.len());
    for target in targets {
        let path = &target.path;
        let found = files::read(path, target.links, &target.root)?;
        let text = found
            .existing
            .as_ref()
            .map_or("", |existing| existing.text.as_str());
        let mut document = Document::parse(target.format, text, path)?;
        let mut lines = String::new();
        let mut changed = false;
        for entry in &target.entries {
            let change = document.merge(entry).map_err(|source| Error::Shape {
                path: path.clone(),
                source,
            })?;
            changed |= change != Change::Unchanged;
            let verb = match change {
                Change::Added => "added",
                Change::Updated => "updated",
                Change::Unchanged => "kept",
            };
            let (what, runs) = describe(entry);
            lines.push_str(&format!("  {verb:<8}{what:<17} {runs}\n"));
        }
        let rendered = if changed {
            Some(document.render().map_err(|source| Error::Edit {
                path: path.clone(),
                source,
            })?)
        } else {
            None
        };
        merged.push((target, found, rendered, lines));
    }
    let mut report = String::new();
    for (target, found, rendered, lines) in merged {
        let path = &target.path;
        let Some(rendered) = rendered else {
            report.push_str(&format!(
                "{}: already set up, nothing changed\n{lines}",
                path.display()
            ));
            continue;
        };
        report.push_str(&format!("{}: ", path.display()));
        if found.real != *path {
            report.push_str(&format!("(a link to {}) ", found.real.display()));
        }
        if let Some(existing) = &found.existing {
            let backup = files::back_up(path, existing, target.backups.as_deref())?;
            report.push_str(&format!(
                "changed (backup: {}, readable by you only; the newest {} are kept",
                backup.path.display(),
                files::BACKUPS_KEPT
            ));
            if backup.removed > 0 {
                report.push_str(&format!(", {} older removed", backup.removed));
            }
            report.push_str(")\n");
        } else {
            report.push_str("created\n");
        }
        let mode = match &found.existing {
            Some(existing) => Some(existing.mode),
            None if target.private => Some(PRIVATE_MODE),
            None => None,
        };
        files::write_atomically(&found.real, &rendered, mode)?;
        report.push_str(&lines);
    }
    Ok(report)
}

/// An entry as the report shows it: what it is, and what it runs.
fn describe(entry: &Entry) -> (&'static str, String) {
    match entry {
        Entry::Hook {
            agent,
            event,
            command,
        } => (
            agent.hooks().map_or("hook", |hooks| hooks.name(*event)),
            command.clone(),
        ),
        Entry::McpServer { program, args, .. } => (
            "MCP server",
            format!("{MCP_SERVER_NAME}: {}", shell_words(program, args)),
        ),
        Entry::Instructions { .. } => ("instructions", instructions::DESCRIPTION.to_owned()),
    }
}
