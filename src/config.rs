//! Configuration: built-in defaults, then the YAML file (`--config` or
//! `ENGRAM_CONFIG`), then `ENGRAM_SECTION__KEY` environment variables.
//!
//! The three layers are merged as YAML trees and deserialized once with
//! `deny_unknown_fields`, so an unknown key or a bad value anywhere is a
//! startup error that names the key. `validate` then checks ranges.
//! `ENGRAM_CONFIG`, `ENGRAM_API_KEY` and `ENGRAM_MODEL_DIR` are not keys and
//! never enter the tree.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

use crate::memory::{RepoId, UserId};

/// The prefix of environment variables that override keys.
const ENV_PREFIX: &str = "ENGRAM_";
/// Variables with the prefix that are not configuration keys.
const NOT_KEYS: &[&str] = &["ENGRAM_CONFIG", "ENGRAM_API_KEY", "ENGRAM_MODEL_DIR"];

/// A configuration that cannot be used, with the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the configuration file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the configuration file {path} is not valid YAML: {source}")]
    ParseFile {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("environment variable {var}: {reason}")]
    Env { var: String, reason: String },
    #[error("configuration key `{key}`: {reason}")]
    Key { key: String, reason: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The address to serve on.
    pub listen: SocketAddr,
    /// Where the memory files live.
    pub data_dir: PathBuf,
    /// The owners used when a request names no repo or user.
    pub defaults: Defaults,
    pub limits: Limits,
    pub log: Log,
    /// `ENGRAM_API_KEY`: one key with access to everything. Only ever from
    /// the environment, and never printed.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

/// A secret key; its `Debug` form is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            defaults: Defaults::default(),
            limits: Limits::default(),
            log: Log::default(),
            api_key: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Defaults {
    pub repo: RepoId,
    pub user: UserId,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            repo: "default".parse().expect("`default` is a valid repo id"),
            user: "default".parse().expect("`default` is a valid user id"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// How long one request may take before it is answered 503, in ms.
    pub request_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            request_timeout_ms: 10_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// A tracing filter such as `info` or `engram=debug,tower_http=info`;
    /// `RUST_LOG`, when set, wins.
    pub filter: String,
    pub format: LogFormat,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            filter: "info".to_owned(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl Config {
    /// Defaults, then the file at `path` (if any), then the environment.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Error> {
        let mut tree =
            serde_yaml::to_value(Config::default()).expect("the default configuration serializes");
        if let Some(path) = path {
            let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
                path: path.to_owned(),
                source,
            })?;
            let file: Value = serde_yaml::from_str(&text).map_err(|source| Error::ParseFile {
                path: path.to_owned(),
                source,
            })?;
            // An empty file is YAML null: nothing to override.
            if !file.is_null() {
                merge(&mut tree, file);
            }
        }
        let env: Vec<(String, String)> = env.into_iter().collect();
        let mut overrides: Vec<_> = env
            .iter()
            .filter(|(var, _)| var.starts_with(ENV_PREFIX) && !NOT_KEYS.contains(&var.as_str()))
            .collect();
        overrides.sort();
        for (var, value) in overrides {
            apply_env(&mut tree, var, value)?;
        }
        let mut config: Config =
            serde_path_to_error::deserialize(tree).map_err(|err| Error::Key {
                key: err.path().to_string(),
                reason: err.inner().to_string(),
            })?;
        config.api_key = env
            .iter()
            .find(|(var, value)| var == "ENGRAM_API_KEY" && !value.is_empty())
            .map(|(_, value)| ApiKey::new(value.as_str()));
        config.validate()?;
        Ok(config)
    }

    /// Range checks that types alone cannot express.
    pub fn validate(&self) -> Result<(), Error> {
        let key_error = |key: &str, reason: &str| {
            Err(Error::Key {
                key: key.to_owned(),
                reason: reason.to_owned(),
            })
        };
        if !(1024..=64 * 1024 * 1024).contains(&self.limits.max_body_bytes) {
            return key_error("limits.max_body_bytes", "must be between 1024 and 67108864");
        }
        if !(100..=600_000).contains(&self.limits.request_timeout_ms) {
            return key_error(
                "limits.request_timeout_ms",
                "must be between 100 and 600000",
            );
        }
        if self.data_dir.as_os_str().is_empty() {
            return key_error("data_dir", "must not be empty");
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log.filter).is_err() {
            return key_error("log.filter", "is not a valid tracing filter");
        }
        Ok(())
    }
}

/// Merges `overlay` into `base`: mappings key by key, anything else replaced.
fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Mapping(base), Value::Mapping(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// Sets the key `ENGRAM_A__B_C` names (`a.b_c`) to `value`, read as YAML so
/// numbers, booleans and lists keep their types.
fn apply_env(tree: &mut Value, var: &str, value: &str) -> Result<(), Error> {
    let env_error = |reason: String| Error::Env {
        var: var.to_owned(),
        reason,
    };
    let path: Vec<String> = var[ENV_PREFIX.len()..]
        .split("__")
        .map(str::to_lowercase)
        .collect();
    if path.iter().any(String::is_empty) {
        return Err(env_error(
            "is not of the form ENGRAM_SECTION__KEY".to_owned(),
        ));
    }
    let parsed: Value = serde_yaml::from_str(value)
        .map_err(|err| env_error(format!("the value is not valid YAML: {err}")))?;
    // An empty variable means an empty string, not YAML null.
    let parsed = if parsed.is_null() && value.trim().is_empty() {
        Value::String(String::new())
    } else {
        parsed
    };
    let mut node = tree;
    for section in path {
        if !node.is_mapping() {
            *node = Value::Mapping(Mapping::new());
        }
        node = node
            .as_mapping_mut()
            .expect("just made a mapping")
            .entry(Value::String(section))
            .or_insert(Value::Null);
    }
    *node = parsed;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn load_yaml(yaml: &str, vars: &[(&str, &str)]) -> Result<Config, Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engram.yaml");
        std::fs::write(&path, yaml).unwrap();
        Config::load(Some(&path), env(vars))
    }

    #[test]
    fn defaults_run_with_nothing_configured() {
        let config = Config::load(None, env(&[("HOME", "/root")])).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(config.data_dir, PathBuf::from("./data"));
    }

    #[test]
    fn file_then_environment_override_defaults() {
        let config = load_yaml(
            "data_dir: /srv/engram\nlimits: { max_body_bytes: 2048 }\n",
            &[
                ("ENGRAM_LIMITS__MAX_BODY_BYTES", "4096"),
                ("ENGRAM_DEFAULTS__REPO", "forge"),
                ("ENGRAM_CONFIG", "ignored.yaml"),
                ("ENGRAM_API_KEY", "not-a-key"),
                ("ENGRAM_MODEL_DIR", "/opt/model"),
            ],
        )
        .unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/srv/engram"));
        assert_eq!(config.limits.max_body_bytes, 4096);
        assert_eq!(config.limits.request_timeout_ms, 10_000);
        assert_eq!(config.defaults.repo.as_str(), "forge");
        assert_eq!(config.api_key, Some(ApiKey::new("not-a-key")));
        assert_eq!(format!("{:?}", config.api_key), "Some(ApiKey(<redacted>))");
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = load_yaml("limits: { max_body_byte: 10 }\n", &[]).unwrap_err();
        assert!(err.to_string().contains("limits"), "{err}");
        assert!(err.to_string().contains("max_body_byte"), "{err}");

        let err = Config::load(None, env(&[("ENGRAM_RETRIEVAL__TOPK", "3")])).unwrap_err();
        assert!(err.to_string().contains("retrieval"), "{err}");
    }

    #[test]
    fn bad_values_are_named() {
        let cases = [
            ("listen: nowhere\n", "listen"),
            ("defaults: { repo: '../etc' }\n", "defaults.repo"),
            ("limits: { max_body_bytes: 10 }\n", "limits.max_body_bytes"),
            ("limits: { max_body_bytes: -1 }\n", "limits.max_body_bytes"),
            ("log: { format: xml }\n", "log.format"),
            ("[1, 2]\n", "."),
        ];
        for (yaml, key) in cases {
            let err = load_yaml(yaml, &[]).unwrap_err().to_string();
            assert!(err.contains(key), "{yaml:?} gave {err}");
        }
        let err = Config::load(None, env(&[("ENGRAM_LISTEN", "nowhere")])).unwrap_err();
        assert!(err.to_string().contains("listen"), "{err}");
    }
}
