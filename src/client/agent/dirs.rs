//! The directories the agents' files are found from, and a [`Place`] of
//! the table made a path on this machine.

use std::path::{Path, PathBuf};

use super::{Base, Place};
use crate::client::hook::project;

/// Why an agent's file has no path here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// The agent has no such file for the scope.
    Scope,
    /// The file is under the home directory, and `HOME` is unset.
    Home,
}

/// The directories the agents' files are found from.
pub struct Dirs {
    /// The project's top: the git checkout holding the working directory.
    pub project: PathBuf,
    home: Option<PathBuf>,
    codex_home: Option<PathBuf>,
    copilot_home: Option<PathBuf>,
    xdg_config: Option<PathBuf>,
}

impl Dirs {
    pub fn new(cwd: &Path, env: &impl Fn(&str) -> Option<String>) -> Self {
        let dir = |var: &str| {
            env(var)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        Self {
            project: project_root(cwd),
            home: dir("HOME"),
            codex_home: dir("CODEX_HOME"),
            copilot_home: dir("COPILOT_HOME"),
            xdg_config: dir("XDG_CONFIG_HOME"),
        }
    }

    /// Where `place` is here: its path, or its `or_only` name when only
    /// that file exists.
    pub fn resolve(&self, place: &Place) -> Result<PathBuf, Missing> {
        let base = self.base(place.base)?;
        let path = base.join(place.path);
        match place.or_only {
            Some(other) => {
                let other = base.join(other);
                let exists = |path: &Path| std::fs::symlink_metadata(path).is_ok();
                Ok(if !exists(&path) && exists(&other) {
                    other
                } else {
                    path
                })
            }
            None => Ok(path),
        }
    }

    fn base(&self, base: Base) -> Result<PathBuf, Missing> {
        match base {
            Base::Project => Ok(self.project.clone()),
            Base::Home => self.home(),
            // Codex's own directory: `CODEX_HOME`, else `~/.codex`.
            Base::CodexHome => match &self.codex_home {
                Some(dir) => Ok(dir.clone()),
                None => Ok(self.home()?.join(".codex")),
            },
            // Copilot CLI's: `COPILOT_HOME`, else `~/.copilot`.
            Base::CopilotHome => match &self.copilot_home {
                Some(dir) => Ok(dir.clone()),
                None => Ok(self.home()?.join(".copilot")),
            },
            Base::XdgConfig => self.xdg_config(),
            // VS Code's user directory (its default profile).
            Base::VsCodeUser => {
                let app_data = if cfg!(target_os = "macos") {
                    self.home()?.join("Library/Application Support")
                } else {
                    self.xdg_config()?
                };
                Ok(app_data.join("Code/User"))
            }
        }
    }

    fn home(&self) -> Result<PathBuf, Missing> {
        self.home.clone().ok_or(Missing::Home)
    }

    /// `XDG_CONFIG_HOME`, else `~/.config`.
    fn xdg_config(&self) -> Result<PathBuf, Missing> {
        match &self.xdg_config {
            Some(dir) => Ok(dir.clone()),
            None => Ok(self.home()?.join(".config")),
        }
    }
}

/// The top of the git checkout holding `cwd`, or `cwd` outside one: where
/// project files live.
pub fn project_root(cwd: &Path) -> PathBuf {
    project::checkout_root(cwd).unwrap_or_else(|| cwd.to_path_buf())
}
