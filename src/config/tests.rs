//! The configuration's layers, its validation and a request's retrieval
//! overrides.

use super::access::everything;
use super::*;

#[test]
fn key_digests_are_decoded_strictly() {
    let grant = |sha256: &str| KeyGrant {
        sha256: sha256.to_owned(),
        repos: everything(),
        users: everything(),
    };
    let hex = "ab".repeat(32);
    assert_eq!(grant(&hex).digest(), Some([0xab; 32]));
    assert_eq!(grant(&hex.to_uppercase()).digest(), Some([0xab; 32]));
    assert!(grant("abc").digest().is_none());
    assert!(grant(&"zz".repeat(32)).digest().is_none());
}

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
            ("ENGRAM_URL", "http://127.0.0.1:9999"),
        ],
    )
    .unwrap();
    assert_eq!(config.data_dir, PathBuf::from("/srv/engram"));
    assert_eq!(config.limits.max_body_bytes, 4096);
    assert_eq!(config.limits.request_timeout_ms, 10_000);
    assert_eq!(config.defaults.repo.as_str(), "forge");
    assert_eq!(config.api_key, Some(ApiKey::new("not-a-key")));
    assert_eq!(
        config.embedding.model_dir,
        Some(PathBuf::from("/opt/model"))
    );
    assert_eq!(format!("{:?}", config.api_key), "Some(ApiKey(<redacted>))");
}

#[test]
fn the_embeddings_key_comes_from_the_named_variable_and_stays_hidden() {
    let config = load_yaml(
        "embedding: { provider: openai, api_key_env: MY_EMBED_KEY }\n",
        &[("MY_EMBED_KEY", "sk-test"), ("OPENAI_API_KEY", "other")],
    )
    .unwrap();
    assert_eq!(config.embedding.api_key, Some(ApiKey::new("sk-test")));
    let printed = serde_yaml::to_string(&config).unwrap();
    assert!(!printed.contains("sk-test"), "{printed}");
}

#[test]
fn the_llm_section_is_absent_by_default_and_set_key_by_key() {
    assert_eq!(Config::default().llm, None);
    let config = Config::load(
        None,
        env(&[
            ("ENGRAM_LLM__BASE_URL", "http://127.0.0.1:9/v1"),
            ("OPENAI_API_KEY", "sk-llm"),
        ]),
    )
    .unwrap();
    let llm = config.llm.unwrap();
    assert_eq!(llm.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(llm.retrieval_model, "gpt-4o-mini");
    assert_eq!(llm.api_key, Some(ApiKey::new("sk-llm")));
    let err = Config::load(None, env(&[("ENGRAM_LLM__RETRIEVAL_TIMEOUT_MS", "1")])).unwrap_err();
    assert!(
        err.to_string().contains("llm.retrieval_timeout_ms"),
        "{err}"
    );
}

#[test]
fn a_public_address_needs_a_key_unless_explicitly_allowed() {
    let err = Config::load(None, env(&[("ENGRAM_LISTEN", "0.0.0.0:8080")])).unwrap_err();
    assert!(err.to_string().contains("listen"), "{err}");
    assert!(err.to_string().contains("ENGRAM_API_KEY"), "{err}");
    for extra in [
        ("ENGRAM_API_KEY", "k"),
        ("ENGRAM_AUTH__ALLOW_UNAUTHENTICATED", "true"),
    ] {
        Config::load(None, env(&[("ENGRAM_LISTEN", "0.0.0.0:8080"), extra])).unwrap();
    }
    let digest = "0".repeat(64);
    load_yaml(
        &format!(
            "listen: 0.0.0.0:8080\nauth: {{ keys: [{{ sha256: '{digest}', repos: [forge] }}] }}\n"
        ),
        &[],
    )
    .unwrap();
    let oauth = load_yaml(
        "listen: 0.0.0.0:8080\nauth: { oauth: { issuer: 'https://id.example.com/realms/team', \
         audience: 'https://engram.example.com/mcp' } }\n",
        &[],
    )
    .unwrap()
    .auth
    .oauth
    .unwrap();
    assert_eq!(oauth.scopes, ["repo:*", "user:*"]);
    assert_eq!(
        (oauth.grants_claim.as_str(), oauth.user_claim),
        ("engram", None)
    );
    assert_eq!((oauth.leeway_s, oauth.keys_cooldown_s), (60, 30));
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
fn a_request_overrides_the_configured_retrieval_within_the_same_limits() {
    let configured = Retrieval::default();
    let settings = configured
        .tuning(&RetrievalOverrides {
            top_k: Some(7),
            weights: WeightsRequest {
                recency: Some(0.0),
                ..WeightsRequest::default()
            },
            ..RetrievalOverrides::default()
        })
        .unwrap();
    assert_eq!(settings.top_k, 7);
    assert_eq!(settings.weights.recency, 0.0);
    assert_eq!(settings.hop_depth, configured.hop_depth);
    assert_eq!(settings.weights.similarity, configured.weights.similarity);

    let too_deep = configured.tuning(&RetrievalOverrides {
        hop_depth: Some(4),
        ..RetrievalOverrides::default()
    });
    let err = too_deep.unwrap_err();
    assert_eq!(err.field(), "hop_depth");
    assert_eq!(err.to_string(), "must be between 0 and 3, got 4");
    let no_weights = configured.tuning(&RetrievalOverrides {
        weights: WeightsRequest {
            similarity: Some(0.0),
            recency: Some(0.0),
            importance: Some(0.0),
            access: Some(0.0),
        },
        ..RetrievalOverrides::default()
    });
    assert_eq!(no_weights.unwrap_err(), SettingError::AllWeightsZero);

    let config = Config {
        retrieval: Retrieval {
            hop_depth: 4,
            ..Retrieval::default()
        },
        ..Config::default()
    };
    let Err(Error::Key { key, reason }) = config.validate() else {
        panic!("an out-of-range hop_depth is refused");
    };
    assert_eq!(key, "retrieval.hop_depth");
    assert_eq!(reason, "must be between 0 and 3, got 4");
}

#[test]
fn bad_values_are_named() {
    let cases = [
        ("listen: nowhere\n", "listen"),
        ("defaults: { repo: '../etc' }\n", "defaults.repo"),
        ("limits: { max_body_bytes: 10 }\n", "limits.max_body_bytes"),
        ("limits: { max_body_bytes: -1 }\n", "limits.max_body_bytes"),
        ("limits: { max_connections: 0 }\n", "limits.max_connections"),
        ("log: { format: xml }\n", "log.format"),
        ("[1, 2]\n", "."),
        ("embedding: { provider: onnx }\n", "embedding.provider"),
        ("embedding: { dimensions: 0 }\n", "embedding.dimensions"),
        (
            "embedding: { max_reply_bytes: 10 }\n",
            "embedding.max_reply_bytes",
        ),
        ("llm: { max_reply_bytes: 10 }\n", "llm.max_reply_bytes"),
        (
            "embedding: { provider: openai, base_url: ftp://x }\n",
            "embedding.base_url",
        ),
        ("index: { idle_minutes: -1 }\n", "index.idle_minutes"),
        ("index: { idle_minutes: 600000 }\n", "index.idle_minutes"),
        ("index: { max_memory_mb: 0 }\n", "index.max_memory_mb"),
        ("retrieval: { top_k: 0 }\n", "retrieval.top_k"),
        ("retrieval: { hop_depth: 4 }\n", "retrieval.hop_depth"),
        (
            "retrieval: { cache_max_bytes: 1000 }\n",
            "retrieval.cache_max_bytes",
        ),
        (
            "retrieval: { hypothesis_count: 0 }\n",
            "retrieval.hypothesis_count",
        ),
        ("llm: { base_url: nowhere }\n", "llm.base_url"),
        ("capture: { max_concurrent: 0 }\n", "capture.max_concurrent"),
        ("capture: { lease_ms: 100 }\n", "capture.lease_ms"),
        ("capture: { drain_ms: 700000 }\n", "capture.drain_ms"),
        (
            "capture: { context_tokens: 2000000 }\n",
            "capture.context_tokens",
        ),
        ("llm: { context_tokens: 1000 }\n", "llm.context_tokens"),
        (
            "capture: { session_queue_bytes: 1024 }\n",
            "capture.session_queue_bytes",
        ),
        ("capture: { queue_bytes: 1048576 }\n", "capture.queue_bytes"),
        (
            "auth: { keys: [{ sha256: plain-key }] }\n",
            "auth.keys[0].sha256",
        ),
        (
            "auth: { keys: [{ sha256: '0000000000000000000000000000000000000000000000000000000000000000', users: ['../x'] }] }\n",
            "auth.keys[0].users[0]",
        ),
        (
            "auth: { oauth: { issuer: 'http://id.example.com', audience: 'https://engram.example.com/mcp' } }\n",
            "auth.oauth.issuer",
        ),
        (
            "auth: { oauth: { issuer: 'https://id.example.com', audience: 'engram' } }\n",
            "auth.oauth.audience",
        ),
        (
            "auth: { oauth: { issuer: 'https://id.example.com', audience: 'https://e.example.com', scopes: ['repo:* user:*'] } }\n",
            "auth.oauth.scopes[0]",
        ),
        (
            "cors: { allowed_origins: ['*'] }\n",
            "cors.allowed_origins[0]",
        ),
        (
            "http: { allowed_hosts: [engram, 'http://evil.example'] }\n",
            "http.allowed_hosts[1]",
        ),
        (
            "capture: { duplicate_threshold: 1.5 }\n",
            "capture.duplicate_threshold",
        ),
        (
            "consolidation: { duplicate_threshold: 0.4 }\n",
            "consolidation.duplicate_threshold",
        ),
        (
            "consolidation: { duplicate_threshold: 0.8, subject_threshold: 0.8 }\n",
            "consolidation.subject_threshold",
        ),
        (
            "consolidation: { interval_hours: 100000 }\n",
            "consolidation.interval_hours",
        ),
        (
            "retrieval: { lexical_weight: 1.5 }\n",
            "retrieval.lexical_weight",
        ),
        (
            "retrieval: { conversation_weight: -0.1 }\n",
            "retrieval.conversation_weight",
        ),
        (
            "retrieval: { passage_weight: 2 }\n",
            "retrieval.passage_weight",
        ),
        (
            "retrieval: { feedback_weight: 1.5 }\n",
            "retrieval.feedback_weight",
        ),
        (
            "retrieval: { min_similarity: -1 }\n",
            "retrieval.min_similarity",
        ),
        ("retrieval: { time_weight: 2 }\n", "retrieval.time_weight"),
        (
            "inject: { session_start_tokens: 200000 }\n",
            "inject.session_start_tokens",
        ),
        ("inject: { prompt_tokens: -1 }\n", "inject.prompt_tokens"),
        ("inject: { min_relevance: 1.5 }\n", "inject.min_relevance"),
        (
            "retrieval: { weights: { recency: 1.5 } }\n",
            "retrieval.weights.recency",
        ),
        (
            "retrieval: { weights: { similarity: 0, recency: 0, importance: 0, access: 0 } }\n",
            "retrieval.weights.similarity",
        ),
        (
            "capture: { daily_token_budget: 1000, pair_daily_token_budget: 2000 }\n",
            "capture.pair_daily_token_budget",
        ),
        (
            "capture: { daily_token_budget: -1 }\n",
            "capture.daily_token_budget",
        ),
        (
            "prices: { gpt-4o-mini: { input_per_million: -0.15 } }\n",
            "prices.gpt-4o-mini.input_per_million",
        ),
        (
            "prices: { gpt-4o-mini: { input_per_million: .nan } }\n",
            "prices.gpt-4o-mini.input_per_million",
        ),
        (
            "prices: { gpt-4o-mini: { input_per_million: 1, output: 2 } }\n",
            "prices",
        ),
    ];
    for (yaml, key) in cases {
        let err = load_yaml(yaml, &[]).unwrap_err().to_string();
        assert!(err.contains(key), "{yaml:?} gave {err}");
    }
    let err = Config::load(None, env(&[("ENGRAM_LISTEN", "nowhere")])).unwrap_err();
    assert!(err.to_string().contains("listen"), "{err}");
}

#[test]
fn prices_and_budgets_are_read_and_zero_is_unlimited() {
    let config = load_yaml(
        "prices:\n  gpt-4o-mini: { input_per_million: 0.15, output_per_million: 0.6 }\n  text-embedding-3-small: { input_per_million: 0.02 }\ncapture: { daily_token_budget: 0, pair_daily_token_budget: 5000 }\n",
        &[("ENGRAM_RETRIEVAL__DAILY_TOKEN_BUDGET", "0")],
    )
    .unwrap();
    assert_eq!(
        config.prices["gpt-4o-mini"],
        Price {
            input_per_million: 0.15,
            output_per_million: 0.6
        }
    );
    assert_eq!(
        config.prices["text-embedding-3-small"].output_per_million,
        0.0
    );
    assert_eq!(config.capture.daily_token_budget, 0);
    assert_eq!(config.capture.pair_daily_token_budget, 5000);
    assert_eq!(config.retrieval.daily_token_budget, 0);
    assert!(
        Config::default().capture.daily_token_budget > 0,
        "finite by default"
    );
}

#[test]
fn the_ollama_configuration_of_the_capture_guide_loads_as_written() {
    let guide = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/capture.md"));
    let (_, after) = guide
        .split_once("One configuration for Ollama")
        .expect("the guide's Ollama section");
    let yaml = after
        .split_once("```yaml\n")
        .and_then(|(_, block)| block.split_once("```"))
        .map(|(yaml, _)| yaml)
        .expect("its YAML block");
    let config = load_yaml(yaml, &[]).unwrap();
    let llm = config.llm.unwrap();
    assert_eq!(llm.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(llm.context_tokens, 8192);
    assert_eq!(llm.api_key, None, "no key unless the variable is set");
}

#[test]
fn the_postgres_backend_reads_its_connection_string_from_the_named_variable() {
    let url = "postgres://engram:s3cret@db.internal:5432/engram";
    let config = load_yaml(
        "store: { backend: postgres, postgres: { pool_size: 4 } }\n",
        &[("DATABASE_URL", url)],
    )
    .unwrap();
    assert_eq!(config.store.backend, Backend::Postgres);
    assert_eq!(config.store.postgres.pool_size, 4);
    assert_eq!(config.store.postgres.url.as_ref().unwrap().expose(), url);
    let shown = format!("{config:?}{}", serde_yaml::to_string(&config).unwrap());
    assert!(!shown.contains("s3cret"), "{shown}");

    let config = load_yaml(
        "store: { backend: postgres, postgres: { url_env: PG_URL } }\n",
        &[("PG_URL", url), ("DATABASE_URL", "postgres://other/db")],
    )
    .unwrap();
    assert_eq!(config.store.postgres.url.as_ref().unwrap().expose(), url);
}

#[test]
fn the_postgres_backend_is_refused_without_a_usable_connection_string() {
    let err = load_yaml("store: { backend: postgres }\n", &[]).unwrap_err();
    assert!(
        err.to_string().contains("store.postgres.url_env")
            && err.to_string().contains("DATABASE_URL"),
        "{err}"
    );
    let err = load_yaml(
        "store: { backend: postgres }\n",
        &[(
            "DATABASE_URL",
            "postgres://engram:s3cret@db/engram?sslmode=bogus",
        )],
    )
    .unwrap_err();
    assert!(err.to_string().contains("store.postgres.url_env"), "{err}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
    let err = load_yaml(
        "store: { backend: postgres, postgres: { pool_size: 0 } }\n",
        &[("DATABASE_URL", "postgres://db/engram")],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("store.postgres.pool_size"),
        "{err}"
    );
    assert!(
        load_yaml("store: { backend: files }\n", &[]).is_ok(),
        "files mode needs no database"
    );
}

#[test]
fn retention_is_days_and_zero_keeps_everything() {
    let config = load_yaml("retention: { provisional_days: 0 }\n", &[]).unwrap();
    let policy = config.retention.policy(chrono::Utc::now());
    assert_eq!(policy.provisional, None);
    assert_eq!(policy.unused, Some(chrono::TimeDelta::days(180)));
    let config = load_yaml("", &[("ENGRAM_RETENTION__UNUSED_DAYS", "0")]).unwrap();
    assert_eq!(
        config.retention.policy(chrono::Utc::now()).provisional,
        Some(chrono::TimeDelta::days(14))
    );
    assert_eq!(config.retention.policy(chrono::Utc::now()).unused, None);
}
