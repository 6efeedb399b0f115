//! A deterministic synthetic corpus: memory-like sentences and queries
//! about them, from a seeded generator, so every run measures the same
//! work.

use chrono::{Duration, Utc};
use engram::index::{Change, Entry, lexical};
use engram::memory::{Category, Lifecycle, Memory, MemoryId, Namespace, Origin};
use engram_fake_upstream as upstream;

const SUBJECTS: &[&str] = &[
    "the billing service",
    "the search API",
    "the CLI",
    "the web frontend",
    "the ingest worker",
    "the auth gateway",
    "the scheduler",
    "the mobile app",
    "the data pipeline",
    "the admin panel",
    "the notification service",
    "the build system",
    "the test suite",
    "the cache layer",
    "the payments module",
    "the reporting job",
];
const VERBS: &[&str] = &[
    "uses",
    "must never call",
    "prefers",
    "was migrated to",
    "depends on",
    "is tested with",
    "logs through",
    "is deployed with",
    "validates input with",
    "retries requests through",
];
const OBJECTS: &[&str] = &[
    "PostgreSQL 16",
    "Redis streams",
    "gRPC with protobuf",
    "structured tracing spans",
    "Kafka",
    "a Terraform module",
    "GitHub Actions",
    "the tokio runtime",
    "OpenTelemetry exporters",
    "exponential backoff with jitter",
    "SQLite in WAL mode",
    "S3 presigned URLs",
    "feature flags from LaunchDarkly",
    "property-based tests",
    "a blue-green rollout",
    "Argon2id password hashes",
    "rate limits of 100 requests per second",
    "JSON Schema",
];
const REASONS: &[&str] = &[
    "because the old setup lost writes",
    "after the March incident",
    "to keep latency low",
    "as the team agreed in review",
    "so that tests stay deterministic",
    "for compliance",
    "because the user asked for it",
    "to cut cloud costs",
];

/// A small, fast, seeded generator (xorshift64*): no dependency, same
/// sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("below n")
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// One memory sentence.
pub fn sentence(rng: &mut Rng, serial: usize) -> String {
    format!(
        "{} {} {} {} (note {serial}).",
        capitalise(rng.pick(SUBJECTS)),
        rng.pick(VERBS),
        rng.pick(OBJECTS),
        rng.pick(REASONS)
    )
}

/// The bodies of `requests` `POST /turns` over 256 sessions, one user
/// sentence each, the same in every run.
pub fn turns(requests: usize) -> Vec<serde_json::Value> {
    let mut rng = Rng::new(17);
    (0..requests)
        .map(|serial| {
            serde_json::json!({"session_id": format!("s{}", serial % 256), "repo": "bench",
                "messages": [{"role": "user", "content": sentence(&mut rng, serial)}]})
        })
        .collect()
}

/// A question an agent might search with.
pub fn query(rng: &mut Rng) -> String {
    format!(
        "what does {} use for {}?",
        rng.pick(SUBJECTS),
        rng.pick(OBJECTS).to_lowercase()
    )
}

/// The index changes that put `count` memories of `namespace` (seed 1)
/// into an index directly, each with its fake MiniLM-length vector.
pub fn index_changes(namespace: &Namespace, count: usize) -> Vec<Change> {
    memories(namespace, count, 1)
        .into_iter()
        .map(|memory| {
            Change::Upsert(
                Entry {
                    id: memory.id,
                    namespace: namespace.clone(),
                    category: memory.category,
                    terms: lexical::terms(&memory.content),
                },
                upstream::Vectors::MINILM.of(&memory.content).into(),
            )
        })
        .collect()
}

/// `count` memories of `namespace`, spread over the last year.
pub fn memories(namespace: &Namespace, count: usize, seed: u64) -> Vec<Memory> {
    let mut rng = Rng::new(seed);
    let now = Utc::now();
    let categories = Category::ALL;
    (0..count)
        .map(|serial| {
            let created = now - Duration::minutes(i64::try_from(rng.below(525_600)).unwrap_or(0));
            Memory {
                id: MemoryId::new(),
                version: 1,
                namespace: namespace.clone(),
                category: categories[rng.below(categories.len())],
                created_at: created,
                updated_at: created,
                supersedes: None,
                related: Vec::new(),
                importance: Some(f64::from(u8::try_from(rng.below(11)).unwrap_or(0)) / 10.0),
                session_id: None,
                trigger: Origin::Manual,
                anchors: Vec::new(),
                commit: None,
                observed_at: None,
                content: sentence(&mut rng, serial),
                lifecycle: Lifecycle::default(),
            }
        })
        .collect()
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
