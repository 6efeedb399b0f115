//! `Config::load`: the three layers (defaults, the YAML file, the
//! `ENGRAM_SECTION__KEY` variables) merged as YAML trees and deserialized
//! once, then the secrets read from the variables the configuration names.

use std::path::{Path, PathBuf};

use serde_yaml::{Mapping, Value};

use super::{ApiKey, Config, DatabaseUrl, Error};

/// The prefix of environment variables that override keys.
const ENV_PREFIX: &str = "ENGRAM_";
/// Variables with the prefix that are not configuration keys.
const NOT_KEYS: &[&str] = &[
    "ENGRAM_CONFIG",
    "ENGRAM_API_KEY",
    "ENGRAM_MODEL_DIR",
    "ENGRAM_URL",
];

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
        let lookup = |name: &str| {
            env.iter()
                .find(|(var, value)| var == name && !value.is_empty())
                .map(|(_, value)| value.as_str())
        };
        config.api_key = lookup("ENGRAM_API_KEY").map(ApiKey::new);
        if let Some(dir) = lookup("ENGRAM_MODEL_DIR") {
            config.embedding.model_dir = Some(PathBuf::from(dir));
        }
        config.embedding.api_key = lookup(&config.embedding.api_key_env).map(ApiKey::new);
        if let Some(llm) = &mut config.llm {
            llm.api_key = lookup(&llm.api_key_env).map(ApiKey::new);
        }
        let postgres = &mut config.store.postgres;
        postgres.url = lookup(&postgres.url_env).map(DatabaseUrl::new);
        config.validate()?;
        Ok(config)
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
