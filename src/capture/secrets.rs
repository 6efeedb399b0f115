//! The secret detector: finds content that looks like a credential, so that
//! it is refused before it is written into a memory file.
//!
//! Provider key formats are matched by their prefixes; beyond them come
//! bearer tokens, private key blocks, passwords in URLs, passwords and keys
//! in assignments (`password = …`, `api_key: …`, `client_secret=…`),
//! JWTs, and long random-looking tokens. False positives cost a lost memory,
//! so everything coding memories mention all the time passes: commit hashes,
//! UUIDs, paths, URLs without credentials, identifiers in any case, and
//! password placeholders (`<password>`, `${DB_PASSWORD}`, `***`, `changeme`).
//!
//! Patterns are compiled once. Speed, measured in a release build on a
//! 2-core machine: a clean text runs every detector to its end, and 100 KB
//! of prose and code (some non-ASCII) took 0.7–1.1 ms per scan, as did
//! 100 KB of nothing but long identifiers, hashes and paths.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What kind of secret a text holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    OpenAiKey,
    AnthropicKey,
    AwsAccessKeyId,
    AwsSecretAccessKey,
    GitHubToken,
    GitLabToken,
    SlackToken,
    StripeKey,
    GoogleApiKey,
    BearerToken,
    PrivateKey,
    PasswordInUrl,
    PasswordAssignment,
    Jwt,
    HighEntropyToken,
}

impl SecretKind {
    /// A stable kebab-case label, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAiKey => "openai-key",
            Self::AnthropicKey => "anthropic-key",
            Self::AwsAccessKeyId => "aws-access-key-id",
            Self::AwsSecretAccessKey => "aws-secret-access-key",
            Self::GitHubToken => "github-token",
            Self::GitLabToken => "gitlab-token",
            Self::SlackToken => "slack-token",
            Self::StripeKey => "stripe-key",
            Self::GoogleApiKey => "google-api-key",
            Self::BearerToken => "bearer-token",
            Self::PrivateKey => "private-key",
            Self::PasswordInUrl => "password-in-url",
            Self::PasswordAssignment => "password-assignment",
            Self::Jwt => "jwt",
            Self::HighEntropyToken => "high-entropy-token",
        }
    }
}

/// The kind of the first secret found, trying the most specific kinds first
/// (an Anthropic key is also shaped like an OpenAI one, and both are
/// high-entropy tokens). `None` when the text looks clean.
pub fn find_secret(text: &str) -> Option<SecretKind> {
    DETECTORS
        .iter()
        .find(|detector| {
            detector
                .pattern
                .captures_iter(text)
                .any(|found| (detector.confirms)(&found))
        })
        .map(|detector| detector.kind)
}

/// Passwords shorter than this are left alone in assignments: too short to
/// tell from prose such as "password: required".
const MIN_PASSWORD_CHARS: usize = 8;

/// The shortest run judged as a generic token.
const MIN_TOKEN_CHARS: usize = 32;

/// Bits per character from which a token counts as random. 32 random base62
/// characters almost always score above 4.0; hex cannot (16 symbols).
const MIN_TOKEN_ENTROPY: f64 = 4.0;

struct Detector {
    kind: SecretKind,
    /// Word boundaries are ASCII (`(?-u:\b)`): tokens are ASCII, and the
    /// Unicode kind made the scan of non-ASCII prose about 40% slower.
    pattern: Regex,
    /// A second look at a match, for what a pattern cannot say: that a value
    /// is a placeholder, or an identifier rather than a random token.
    confirms: fn(&Captures<'_>) -> bool,
}

static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(|| {
    let detector = |kind, pattern: &str, confirms| Detector {
        kind,
        pattern: Regex::new(pattern).expect("secret patterns are valid"),
        confirms,
    };
    vec![
        detector(
            SecretKind::PrivateKey,
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
            any_match,
        ),
        detector(
            SecretKind::AnthropicKey,
            r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{20,}",
            any_match,
        ),
        // Legacy `sk-…` and project `sk-proj-…` keys alike.
        detector(
            SecretKind::OpenAiKey,
            r"(?-u:\b)sk-(?P<secret>[A-Za-z0-9_-]{20,})",
            secret_looks_random,
        ),
        detector(
            SecretKind::AwsAccessKeyId,
            r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
            any_match,
        ),
        detector(
            SecretKind::AwsSecretAccessKey,
            r#"(?i)aws[_-]?secret[_-]?access[_-]?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            secret_looks_random,
        ),
        detector(
            SecretKind::GitHubToken,
            r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
            any_match,
        ),
        detector(
            SecretKind::GitLabToken,
            r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,}",
            any_match,
        ),
        detector(
            SecretKind::SlackToken,
            r"(?-u:\b)xox[baprs]-[A-Za-z0-9-]{10,}",
            any_match,
        ),
        detector(
            SecretKind::StripeKey,
            r"(?-u:\b)[rs]k_live_[A-Za-z0-9]{16,}",
            any_match,
        ),
        detector(
            SecretKind::GoogleApiKey,
            r"(?-u:\b)AIza[A-Za-z0-9_-]{35}",
            any_match,
        ),
        // Before bearer tokens: a JWT is the usual bearer, and the more
        // telling label.
        detector(
            SecretKind::Jwt,
            r"(?-u:\b)eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
            any_match,
        ),
        detector(
            SecretKind::BearerToken,
            r"(?i)(?-u:\b)bearer\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)",
            secret_looks_random,
        ),
        detector(
            SecretKind::PasswordInUrl,
            r"(?-u:\b)[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*:(?P<secret>[^\s/?#@]+)@[^\s/?#@]",
            url_password_is_real,
        ),
        detector(
            SecretKind::PasswordAssignment,
            r#"(?i)(?:pass(?:word|wd|phrase)|api[_-]?key|(?:client[_-]?)?secret|(?:access|auth)[_-]?token)["']?[ \t]*(?::=|==|[:=])[ \t]*(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)'|(?P<bare>[^\s"'`,;()\[\]{}<>]+))"#,
            assigned_password_is_real,
        ),
        detector(
            SecretKind::HighEntropyToken,
            r"[A-Za-z0-9+/_=-]{32,}",
            secret_is_random_token,
        ),
    ]
});

/// Template and variable references that stand for a password:
/// `$DB_PASSWORD`, `${DB_PASSWORD}`, `%DB_PASSWORD%`, `<password>`,
/// `{{ .Values.password }}`.
static PLACEHOLDER_REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%|<[^>]*>|\{\{.*\}\})$")
        .expect("the placeholder pattern is valid")
});

/// Stand-in values, compared lowercased with everything but letters and
/// digits removed ("CHANGE_ME", "your-password-here").
const PLACEHOLDER_WORDS: &[&str] = &[
    "changeme",
    "example",
    "mypassword",
    "pass",
    "password",
    "passwordhere",
    "placeholder",
    "redacted",
    "secret",
    "token",
    "yourpassword",
    "yourpasswordhere",
];

fn any_match(_: &Captures<'_>) -> bool {
    true
}

/// The `secret` group, or the whole match for patterns without one.
fn secret<'t>(found: &Captures<'t>) -> &'t str {
    found
        .name("secret")
        .or_else(|| found.get(0))
        .map_or("", |matched| matched.as_str())
}

fn secret_looks_random(found: &Captures<'_>) -> bool {
    mixes_character_classes(secret(found))
}

fn url_password_is_real(found: &Captures<'_>) -> bool {
    !is_placeholder(secret(found))
}

fn assigned_password_is_real(found: &Captures<'_>) -> bool {
    if let Some(quoted) = found.name("double").or_else(|| found.name("single")) {
        return is_plausible_password(quoted.as_str());
    }
    // Unquoted, the value may be prose or code ("password: required",
    // "password = settings.db_password"); a literal shows a digit or symbol.
    found.name("bare").is_some_and(|bare| {
        let value = bare.as_str();
        let has_digit_or_symbol = value
            .chars()
            .any(|c| c.is_ascii_digit() || !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')));
        has_digit_or_symbol && is_plausible_password(value)
    })
}

fn is_plausible_password(value: &str) -> bool {
    value.chars().count() >= MIN_PASSWORD_CHARS && !is_placeholder(value)
}

fn is_placeholder(value: &str) -> bool {
    let mut chars = value.chars();
    let one_char_repeated = chars.next().is_some_and(|first| chars.all(|c| c == first));
    let word: String = value
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    one_char_repeated
        || PLACEHOLDER_REFERENCE.is_match(value)
        || PLACEHOLDER_WORDS.contains(&word.as_str())
}

/// At least two of lowercase, uppercase and digits: random tokens mix them,
/// while words, `SCREAMING_CASE` names and `xxxx` stand-ins do not.
fn mixes_character_classes(text: &str) -> bool {
    let classes = [
        text.bytes().any(|b| b.is_ascii_lowercase()),
        text.bytes().any(|b| b.is_ascii_uppercase()),
        text.bytes().any(|b| b.is_ascii_digit()),
    ];
    classes.into_iter().filter(|&present| present).count() >= 2
}

/// Whether a run of token characters is random rather than an identifier,
/// a path or an id. Random base62 and base64 tokens of this length hold
/// uppercase, lowercase and digits, score high on entropy and rarely put two
/// lowercase letters side by side. Hex (commit hashes) and UUIDs are single
/// case; `snake_case`, paths and `SCREAMING_CASE` lack a case; `camelCase`
/// identifiers are mostly lowercase pairs. Of 10,000 generated base62 or
/// base64 tokens, 0.4% of 32-character and 0.07% of 40-character ones pass.
fn secret_is_random_token(found: &Captures<'_>) -> bool {
    // A commit hash or UUID in a URL path would otherwise lend its digits
    // and entropy to the mixed-case path around it.
    let telling: Vec<&str> = secret(found)
        .split('/')
        .filter(|segment| !is_hex_id(segment))
        .collect();
    let token = telling.join("/");
    let bytes = token.as_bytes();
    bytes.len() >= MIN_TOKEN_CHARS
        && bytes.iter().any(u8::is_ascii_uppercase)
        && bytes.iter().any(u8::is_ascii_lowercase)
        && bytes.iter().any(u8::is_ascii_digit)
        && !reads_like_words(bytes)
        && shannon_entropy(bytes) >= MIN_TOKEN_ENTROPY
}

/// A commit hash (7+ hex digits) or a UUID.
fn is_hex_id(segment: &str) -> bool {
    let is_hash = segment.len() >= 7 && segment.bytes().all(|b| b.is_ascii_hexdigit());
    let is_uuid = segment.len() == 36
        && segment.bytes().enumerate().all(|(at, b)| match at {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    is_hash || is_uuid
}

/// At least half of adjacent pairs are two lowercase letters, as in words;
/// in random base62 about one pair in six is.
fn reads_like_words(bytes: &[u8]) -> bool {
    let pairs = bytes.len().saturating_sub(1);
    let lowercase_pairs = bytes
        .windows(2)
        .filter(|pair| pair.iter().all(u8::is_ascii_lowercase))
        .count();
    lowercase_pairs * 2 >= pairs
}

/// Bits per byte of the text's own byte distribution.
#[expect(
    clippy::cast_precision_loss,
    reason = "byte counts stay far below 2^52"
)]
fn shannon_entropy(bytes: &[u8]) -> f64 {
    let mut counts = [0_usize; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    let len = bytes.len() as f64;
    counts
        .iter()
        .filter(|&&count| count > 0)
        .map(|&count| {
            let share = count as f64 / len;
            -share * share.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BASE62: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

    /// A deterministic pseudo-random token, so that no real-looking secret
    /// sits in the source for other scanners to trip on.
    fn fake(alphabet: &[u8], len: usize, seed: u64) -> String {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let at = usize::try_from(state >> 33).unwrap_or_default() % alphabet.len();
                char::from(alphabet[at])
            })
            .collect()
    }

    fn assert_secret(text: &str, kind: SecretKind) {
        assert_eq!(find_secret(text), Some(kind), "{text:?}");
    }

    fn assert_clean(text: &str) {
        assert_eq!(find_secret(text), None, "{text:?}");
    }

    #[test]
    fn labels_are_kebab_case() {
        assert_eq!(SecretKind::OpenAiKey.as_str(), "openai-key");
        assert_eq!(
            SecretKind::AwsSecretAccessKey.as_str(),
            "aws-secret-access-key"
        );
        assert_eq!(SecretKind::HighEntropyToken.as_str(), "high-entropy-token");
    }

    #[test]
    fn openai_keys_are_found() {
        let legacy = format!("sk-{}", fake(BASE62, 48, 1));
        let project = format!("sk-proj-{}_{}", fake(BASE62, 40, 2), fake(BASE62, 40, 3));
        assert_secret(
            &format!("Use key {legacy} for tests"),
            SecretKind::OpenAiKey,
        );
        assert_secret(&format!("OPENAI_API_KEY={project}"), SecretKind::OpenAiKey);
    }

    #[test]
    fn anthropic_keys_are_not_mistaken_for_openai_ones() {
        let key = format!(
            "sk-ant-api03-{}-{}AA",
            fake(BASE62, 80, 4),
            fake(BASE62, 12, 5)
        );
        assert_secret(
            &format!("ANTHROPIC_API_KEY=\"{key}\""),
            SecretKind::AnthropicKey,
        );
    }

    #[test]
    fn aws_access_key_ids_are_found() {
        for prefix in ["AKIA", "ASIA"] {
            let id = format!("{prefix}{}", fake(UPPER_ALNUM, 16, 6));
            assert_secret(
                &format!("aws_access_key_id = {id}"),
                SecretKind::AwsAccessKeyId,
            );
        }
    }

    #[test]
    fn aws_secret_access_keys_are_found_after_their_name() {
        let secret = format!(
            "{}/{}+{}",
            fake(BASE62, 20, 7),
            fake(BASE62, 10, 8),
            fake(BASE62, 8, 9)
        );
        assert_secret(
            &format!("aws_secret_access_key = {secret}"),
            SecretKind::AwsSecretAccessKey,
        );
        assert_secret(
            &format!("\"AWS_SECRET_ACCESS_KEY\": \"{secret}\""),
            SecretKind::AwsSecretAccessKey,
        );
    }

    #[test]
    fn github_tokens_are_found() {
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
            let token = format!("{prefix}{}", fake(BASE62, 36, 10));
            assert_secret(&format!("token: {token}"), SecretKind::GitHubToken);
        }
        let fine_grained = format!(
            "github_pat_{}_{}",
            fake(BASE62, 22, 11),
            fake(BASE62, 59, 12)
        );
        assert_secret(&fine_grained, SecretKind::GitHubToken);
    }

    #[test]
    fn gitlab_slack_and_stripe_tokens_are_found() {
        assert_secret(
            &format!("glpat-{}", fake(BASE62, 20, 13)),
            SecretKind::GitLabToken,
        );
        assert_secret(
            &format!("SLACK_TOKEN=xoxb-1234567890-{}", fake(BASE62, 24, 14)),
            SecretKind::SlackToken,
        );
        assert_secret(
            &format!("stripe: sk_live_{}", fake(BASE62, 24, 15)),
            SecretKind::StripeKey,
        );
        assert_secret(
            &format!("rk_live_{}", fake(BASE62, 24, 16)),
            SecretKind::StripeKey,
        );
    }

    #[test]
    fn google_api_keys_are_found() {
        let key = format!("AIza{}", fake(BASE62, 35, 17));
        assert_secret(&format!("maps key {key}."), SecretKind::GoogleApiKey);
    }

    #[test]
    fn bearer_tokens_are_found() {
        let token = fake(BASE62, 32, 18);
        assert_secret(
            &format!("Authorization: Bearer {token}"),
            SecretKind::BearerToken,
        );
        assert_secret(
            &format!("curl -H 'authorization: bearer {token}'"),
            SecretKind::BearerToken,
        );
    }

    #[test]
    fn private_key_blocks_are_found() {
        for header in [
            "-----BEGIN PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        ] {
            assert_secret(&format!("{header}\nMIIEvQ...\n"), SecretKind::PrivateKey);
        }
    }

    #[test]
    fn passwords_in_urls_are_found() {
        assert_secret(
            "DATABASE_URL=postgres://app:S3cr3t-pw@db.internal:5432/app",
            SecretKind::PasswordInUrl,
        );
        assert_secret("redis://:hunter2@cache:6379/0", SecretKind::PasswordInUrl);
        assert_secret(
            "Clone with https://ana:plain@git.example.com/repo.git",
            SecretKind::PasswordInUrl,
        );
    }

    #[test]
    fn jwts_are_found() {
        let jwt = format!(
            "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
            fake(BASE62, 40, 19),
            fake(BASE62, 43, 20)
        );
        assert_secret(&format!("Authorization: Bearer {jwt}"), SecretKind::Jwt);
        assert_secret(&format!("session cookie was {jwt}"), SecretKind::Jwt);
    }

    #[test]
    fn password_assignments_with_real_values_are_found() {
        for text in [
            r#"password = "correct horse battery""#,
            "password: 'tr0ub4dor&3'",
            "DB_PASSWORD=Sup3rS3cret!",
            r#"{"user": "ana", "password": "hunter2hunter2"}"#,
            r#"let passwd := "MyPassword123""#,
            "Her passphrase: w1nter-is-coming",
            "Set api_key: 9f8e7d6c5b4aZ",
            "client_secret=\"hunter2-but-longer\"",
        ] {
            assert_secret(text, SecretKind::PasswordAssignment);
        }
    }

    #[test]
    fn random_tokens_without_a_known_prefix_are_found() {
        assert_secret(
            &format!("value: {}", fake(BASE64, 40, 21)),
            SecretKind::HighEntropyToken,
        );
        assert_secret(
            &format!("The webhook secret is {}", fake(BASE62, 64, 22)),
            SecretKind::HighEntropyToken,
        );
    }

    #[test]
    fn generated_random_tokens_are_found_reliably() {
        let missed: Vec<String> = (0..500)
            .map(|seed| fake(BASE62, 40, seed))
            .filter(|token| find_secret(token).is_none())
            .collect();
        assert!(missed.len() <= 2, "missed {missed:?}");
    }

    #[test]
    fn coding_memories_pass() {
        for text in [
            "User prefers `errors.As` over type assertions for error handling in Go.",
            "Repo uses `thiserror` for library errors and `anyhow` only in main.",
            "Run `cargo clippy --all-targets -- -D warnings` before committing.",
            "Prefers `Result<T, E>` over panics; never `unwrap()` on input paths.",
            "The team moved from Python 3.11 to 3.12 in March 2024.",
            "Nothing here is base64: just prose about retries, backoff and jitter.",
            "Café, naïve and “smart quotes” are fine in memories — really.",
        ] {
            assert_clean(text);
        }
    }

    #[test]
    fn file_paths_pass() {
        assert_clean("Config lives in /home/ana/projects/engram2/src/capture/classifier_reply.rs");
        assert_clean(r"C:\Users\Ana\AppData\Roaming\Engram2024\config\engram.yaml");
        assert_clean(
            "See crates/engram_core/src/retrieval/hyde_reply.rs and tests/api/v2/retrieve.rs",
        );
    }

    #[test]
    fn urls_without_credentials_pass() {
        assert_clean(
            "Docs at https://docs.rs/regex/1.11.1/regex/struct.Regex.html#method.captures",
        );
        assert_clean("Staging runs on http://10.0.0.12:8080/api/v1/healthz");
        assert_clean(
            "Remote is git@github.com:entrhq/forge.git or ssh://git@github.com/entrhq/forge",
        );
        assert_clean("mailto:ana@example.com and https://example.com/path@section");
    }

    #[test]
    fn commit_hashes_and_ids_in_urls_pass() {
        assert_clean(
            "Fixed in https://github.com/BurntSushi/ripgrep/commit/3f2a9b1c0d4e5f60718293a4b5c6d7e8f9012345",
        );
        assert_clean(
            "GET /Repos/EngramTeam/memories/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d/Similar2",
        );
    }

    #[test]
    fn commit_hashes_and_uuids_pass() {
        assert_clean("Reverted 3f2a9b1 and 3f2a9b1c0d4e5f60718293a4b5c6d7e8f9012345.");
        assert_clean(
            "Image digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        );
        assert_clean(
            "Memory 0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d supersedes 0193F0C1-0000-7000-8000-000000000001.",
        );
    }

    #[test]
    fn identifiers_in_any_case_pass() {
        assert_clean("Test retrieve_returns_cached_result_for_same_turn_v2 is flaky.");
        assert_clean(
            "Call parseV2ResponseHeadersWithRetryBackoff and handleOAuth2CallbackWithPkceVerification.",
        );
        assert_clean(
            "Set ENGRAM_RETRIEVAL__HYPOTHESIS_COUNT_V2_DEFAULT and ENGRAM_LIMITS__MAX_BODY_BYTES_2.",
        );
        assert_clean("Enable tokio-1-44-2-rt-multi-thread-macros-features in the manifest.");
    }

    #[test]
    fn prefix_lookalikes_pass() {
        assert_clean(
            "Use scikit-learn (sk-learn) for the risk-assessment-for-production-deploys job.",
        );
        assert_clean("Keys starting with `AKIA` are AWS access key ids; `eyJ` starts a JWT.");
        assert_clean("Store the PRIVATE KEY path in the config, never the key itself.");
        assert_clean("The task-scheduler-for-background-jobs-2024 crate is vendored.");
    }

    #[test]
    fn bearer_mentions_without_a_token_pass() {
        assert_clean("Bearer token auth is used for all internal services.");
        assert_clean("Send `Authorization: Bearer $OPENAI_API_KEY` with every request.");
        assert_clean("Header format: Authorization: Bearer <token>");
        assert_clean("Authorization: Bearer YOUR_API_KEY_GOES_HERE_NOW");
    }

    #[test]
    fn password_placeholders_and_references_pass() {
        for text in [
            r#"password = "<password>""#,
            "password: ********",
            r#"password = "changeme""#,
            "password: ${DB_PASSWORD}",
            r#"password = os.environ["DB_PASSWORD"]"#,
            "password: settings.database_password",
            "password: required",
            "Password must be at least 12 characters long.",
            "The `password:` key is optional; `passwordless: true` skips it.",
            r#"password: "your-password-here""#,
            "password=hunter2",
            "password_hash = \"$2b$12$abc\"",
        ] {
            assert_clean(text);
        }
    }

    #[test]
    fn url_password_placeholders_pass() {
        assert_clean("DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app");
        assert_clean("Format: https://user:<password>@host/path");
        assert_clean("redis://:password@localhost:6379");
        assert_clean("Clone with https://user:token@gitlab.example.com/group/repo.git");
    }

    #[test]
    fn short_base64_passes() {
        assert_clean("The header value SGVsbG8= decodes to Hello.");
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in ".*") {
            let _ = find_secret(&text);
        }

        #[test]
        fn token_shaped_text_never_panics(text in "[A-Za-z0-9+/_=:@.$<>\"' -]{0,120}") {
            let _ = find_secret(&text);
        }
    }
}
