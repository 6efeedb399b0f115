//! `Config::validate`: the range and consistency checks types alone
//! cannot express, each error naming its key.

use super::{Backend, Config, EmbeddingProvider, Error, OAuth, bounds};
use crate::memory::RepoId;

impl Config {
    /// What start-up warns of: allowed, but likely not meant. An
    /// `api_key_env` naming a variable that is unset sends the upstream's
    /// requests with no key: right for a local server that needs none, a
    /// refusal on every call from a hosted one.
    pub fn warnings(&self) -> Vec<String> {
        let unset = |key: &str, var: &str, base_url: &str| {
            format!(
                "{key} names {var}, which is unset or empty: requests to {base_url} go without \
                 a key (right only for a server that needs none); set {var}, or name the \
                 variable that holds the key"
            )
        };
        let mut warnings = Vec::new();
        let embedding = &self.embedding;
        if embedding.provider == EmbeddingProvider::Openai && embedding.api_key.is_none() {
            warnings.push(unset(
                "embedding.api_key_env",
                &embedding.api_key_env,
                &embedding.base_url,
            ));
        }
        if let Some(llm) = &self.llm
            && llm.api_key.is_none()
        {
            warnings.push(unset("llm.api_key_env", &llm.api_key_env, &llm.base_url));
        }
        warnings
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
        let embedding = &self.embedding;
        if embedding
            .dimensions
            .is_some_and(|dimensions| !bounds::EMBEDDING_DIMENSIONS.contains(&dimensions))
        {
            return key_error("embedding.dimensions", "must be between 1 and 8192");
        }
        if !bounds::UPSTREAM_REPLY_BYTES.contains(&embedding.max_reply_bytes) {
            return key_error(
                "embedding.max_reply_bytes",
                "must be between 1024 and 1073741824",
            );
        }
        if !bounds::UPSTREAM_TIMEOUT_MS.contains(&embedding.timeout_ms) {
            return key_error("embedding.timeout_ms", "must be between 50 and 600000");
        }
        if embedding.provider == EmbeddingProvider::Openai {
            if !(embedding.base_url.starts_with("http://")
                || embedding.base_url.starts_with("https://"))
            {
                return key_error("embedding.base_url", "must be an http:// or https:// URL");
            }
            if embedding.model.trim().is_empty() {
                return key_error("embedding.model", "must not be empty");
            }
        }
        if let Some(llm) = &self.llm {
            if !(llm.base_url.starts_with("http://") || llm.base_url.starts_with("https://")) {
                return key_error("llm.base_url", "must be an http:// or https:// URL");
            }
            if llm.retrieval_model.trim().is_empty() {
                return key_error("llm.retrieval_model", "must not be empty");
            }
            if llm.classifier_model.trim().is_empty() {
                return key_error("llm.classifier_model", "must not be empty");
            }
            if !bounds::UPSTREAM_TIMEOUT_MS.contains(&llm.retrieval_timeout_ms) {
                return key_error("llm.retrieval_timeout_ms", "must be between 50 and 600000");
            }
            if !bounds::UPSTREAM_TIMEOUT_MS.contains(&llm.classifier_timeout_ms) {
                return key_error("llm.classifier_timeout_ms", "must be between 50 and 600000");
            }
            if !bounds::UPSTREAM_REPLY_BYTES.contains(&llm.max_reply_bytes) {
                return key_error("llm.max_reply_bytes", "must be between 1024 and 1073741824");
            }
            if !(4096..=2_000_000).contains(&llm.context_tokens) {
                return key_error("llm.context_tokens", "must be between 4096 and 2000000");
            }
        }
        if let Err(err) = self.retrieval.check() {
            return key_error(&format!("retrieval.{}", err.field()), &err.to_string());
        }
        if let Err((key, reason)) = self.inject.check() {
            return key_error(key, reason);
        }
        let capture = &self.capture;
        if !(1..=100_000).contains(&capture.queue_capacity) {
            return key_error("capture.queue_capacity", "must be between 1 and 100000");
        }
        if !(1..=64).contains(&capture.max_concurrent) {
            return key_error("capture.max_concurrent", "must be between 1 and 64");
        }
        if !(0.5..=1.0).contains(&capture.duplicate_threshold) {
            return key_error("capture.duplicate_threshold", "must be between 0.5 and 1");
        }
        let consolidation = &self.consolidation;
        if consolidation.interval_hours > 24 * 365 {
            return key_error("consolidation.interval_hours", "must be at most 8760");
        }
        if !(0.5..=1.0).contains(&consolidation.duplicate_threshold) {
            return key_error(
                "consolidation.duplicate_threshold",
                "must be between 0.5 and 1",
            );
        }
        if !(0.0..consolidation.duplicate_threshold).contains(&consolidation.subject_threshold) {
            return key_error(
                "consolidation.subject_threshold",
                "must be at least 0 and below consolidation.duplicate_threshold",
            );
        }
        if capture.context_tokens > 1_000_000 {
            return key_error("capture.context_tokens", "must be at most 1000000");
        }
        if !(1..=20).contains(&capture.max_attempts) {
            return key_error("capture.max_attempts", "must be between 1 and 20");
        }
        if !(10..=600_000).contains(&capture.retry_base_ms) {
            return key_error("capture.retry_base_ms", "must be between 10 and 600000");
        }
        if !(300..=3_600_000).contains(&capture.lease_ms) {
            return key_error("capture.lease_ms", "must be between 300 and 3600000");
        }
        if capture.drain_ms > 600_000 {
            return key_error("capture.drain_ms", "must be at most 600000");
        }
        if !(10..=10_000).contains(&self.store.debounce_ms) {
            return key_error("store.debounce_ms", "must be between 10 and 10000");
        }
        if let Err((key, reason)) = self.check_postgres() {
            return key_error(key, &reason);
        }
        if capture.session_queue_bytes < self.limits.max_body_bytes as u64 {
            return key_error(
                "capture.session_queue_bytes",
                "must be at least limits.max_body_bytes",
            );
        }
        if capture.queue_bytes < capture.session_queue_bytes {
            return key_error(
                "capture.queue_bytes",
                "must be at least capture.session_queue_bytes",
            );
        }
        if capture.daily_token_budget > 0
            && capture.pair_daily_token_budget > capture.daily_token_budget
        {
            return key_error(
                "capture.pair_daily_token_budget",
                "must not exceed capture.daily_token_budget (0 is unlimited)",
            );
        }
        for (model, price) in &self.prices {
            if model.trim().is_empty() {
                return key_error("prices", "a model's name must not be empty");
            }
            for (field, value) in [
                ("input_per_million", price.input_per_million),
                ("output_per_million", price.output_per_million),
            ] {
                if !(value.is_finite() && (0.0..=1_000_000.0).contains(&value)) {
                    return key_error(
                        &format!("prices.{model}.{field}"),
                        "must be a number between 0 and 1000000",
                    );
                }
            }
        }
        for (at, key) in self.auth.keys.iter().enumerate() {
            if key.digest().is_none() {
                return key_error(
                    &format!("auth.keys[{at}].sha256"),
                    "must be 64 hex digits (the SHA-256 of the key, never the key)",
                );
            }
            for (field, owners) in [("repos", &key.repos), ("users", &key.users)] {
                if owners.is_empty() {
                    return key_error(&format!("auth.keys[{at}].{field}"), "must list ids or `*`");
                }
                if let Some(bad) = owners
                    .iter()
                    .position(|owner| owner != "*" && owner.parse::<RepoId>().is_err())
                {
                    return key_error(
                        &format!("auth.keys[{at}].{field}[{bad}]"),
                        "is neither `*` nor a valid id",
                    );
                }
            }
        }
        if let Some((key, reason)) = self.auth.oauth.as_ref().and_then(OAuth::invalid) {
            return key_error(&format!("auth.oauth.{key}"), reason);
        }
        if let Some(at) = self.http.invalid_host() {
            return key_error(
                &format!("http.allowed_hosts[{at}]"),
                "must be a host name or address with an optional port, such as \
                 engram.internal or engram:8080",
            );
        }
        for (at, origin) in self.cors.allowed_origins.iter().enumerate() {
            if axum::http::HeaderValue::from_str(origin).is_err()
                || !(origin.starts_with("http://") || origin.starts_with("https://"))
            {
                return key_error(
                    &format!("cors.allowed_origins[{at}]"),
                    "must be an origin such as https://app.example.com",
                );
            }
        }
        for (at, origin) in self.mcp.allowed_origins.iter().enumerate() {
            if !(origin == "null"
                || origin.starts_with("http://")
                || origin.starts_with("https://"))
            {
                return key_error(
                    &format!("mcp.allowed_origins[{at}]"),
                    "must be an origin such as https://app.example.com or http://localhost:*",
                );
            }
        }
        let keyless =
            self.auth.keys.is_empty() && self.api_key.is_none() && self.auth.oauth.is_none();
        if keyless && !self.listen.ip().is_loopback() && !self.auth.allow_unauthenticated {
            return key_error(
                "listen",
                "is not a loopback address and no API key is configured: set ENGRAM_API_KEY \
                 or auth.keys or auth.oauth, or (not advised) auth.allow_unauthenticated: true",
            );
        }
        if !(1..=100_000).contains(&self.limits.max_concurrent_requests) {
            return key_error(
                "limits.max_concurrent_requests",
                "must be between 1 and 100000",
            );
        }
        if !(100..=600_000).contains(&self.limits.body_timeout_ms) {
            return key_error("limits.body_timeout_ms", "must be between 100 and 600000");
        }
        if !(1..=1_000_000).contains(&self.limits.max_connections) {
            return key_error("limits.max_connections", "must be between 1 and 1000000");
        }
        if self
            .index
            .idle_minutes
            .is_some_and(|minutes| minutes > 525_600)
        {
            return key_error(
                "index.idle_minutes",
                "must be between 0 and 525600 (a year)",
            );
        }
        if self
            .index
            .max_memory_mb
            .is_some_and(|mb| !(1..=16 * 1024 * 1024).contains(&mb))
        {
            return key_error(
                "index.max_memory_mb",
                "must be between 1 and 16777216 (16 TiB)",
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

impl Config {
    /// `store.postgres`, when it is the backend: the connection string is
    /// there and parses (the message never repeats it: it holds a
    /// password), and the pool and timeouts are in range.
    fn check_postgres(&self) -> Result<(), (&'static str, String)> {
        if self.store.backend != Backend::Postgres {
            return Ok(());
        }
        let postgres = &self.store.postgres;
        let Some(url) = &postgres.url else {
            return Err((
                "store.postgres.url_env",
                format!(
                    "names {}, which is not set: store.backend postgres needs its connection string",
                    postgres.url_env
                ),
            ));
        };
        if let Err(err) = url.expose().parse::<tokio_postgres::Config>() {
            return Err((
                "store.postgres.url_env",
                format!(
                    "names {}, which is not a connection string: {err}",
                    postgres.url_env
                ),
            ));
        }
        if !(1..=1000).contains(&postgres.pool_size) {
            return Err((
                "store.postgres.pool_size",
                "must be between 1 and 1000".to_owned(),
            ));
        }
        for (key, value) in [
            (
                "store.postgres.connect_timeout_ms",
                postgres.connect_timeout_ms,
            ),
            (
                "store.postgres.statement_timeout_ms",
                postgres.statement_timeout_ms,
            ),
        ] {
            if !(100..=600_000).contains(&value) {
                return Err((key, "must be between 100 and 600000".to_owned()));
            }
        }
        if !(10..=600_000).contains(&postgres.catch_up_ms) {
            return Err((
                "store.postgres.catch_up_ms",
                "must be between 10 and 600000".to_owned(),
            ));
        }
        Ok(())
    }
}
