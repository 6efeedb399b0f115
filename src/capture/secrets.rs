//! The secret detector: content that looks like a credential is never
//! written into a memory file.
//!
//! Provider key formats are matched exactly; beyond them, bearer tokens,
//! private key blocks, passwords in URLs or assignments, JWTs, and long
//! high-entropy tokens. Commit hashes and UUIDs, which coding memories
//! mention all the time, are not secrets.

use std::sync::LazyLock;

use regex::Regex;

/// What kind of secret a text holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    ProviderKey,
    PrivateKey,
    BearerToken,
    PasswordInUrl,
    PasswordAssignment,
    Jwt,
    HighEntropyToken,
}

impl SecretKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProviderKey => "provider-key",
            Self::PrivateKey => "private-key",
            Self::BearerToken => "bearer-token",
            Self::PasswordInUrl => "password-in-url",
            Self::PasswordAssignment => "password-assignment",
            Self::Jwt => "jwt",
            Self::HighEntropyToken => "high-entropy-token",
        }
    }
}

/// The shortest run of token characters judged by its entropy.
const MIN_TOKEN_LEN: usize = 32;
/// Bits per character above which a long token is taken for random: real
/// keys sit near 5 or more, English words and identifiers well below 4.
const MIN_ENTROPY_BITS: f64 = 4.0;

static PATTERNS: LazyLock<Vec<(SecretKind, Regex)>> = LazyLock::new(|| {
    let pattern = |kind, re: &str| (kind, Regex::new(re).expect("the secret patterns compile"));
    vec![
        pattern(
            SecretKind::ProviderKey,
            concat!(
                r"\b(?:",
                r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}", // OpenAI, Anthropic
                r"|(?:AKIA|ASIA)[A-Z0-9]{16}",            // AWS access key id
                r"|gh[pousr]_[A-Za-z0-9]{30,}",           // GitHub tokens
                r"|github_pat_[A-Za-z0-9_]{40,}",
                r"|glpat-[A-Za-z0-9_\-]{20,}",       // GitLab
                r"|xox[abprs]-[A-Za-z0-9\-]{10,}",   // Slack
                r"|(?:sk|rk)_live_[A-Za-z0-9]{16,}", // Stripe
                r"|AIza[A-Za-z0-9_\-]{35}",          // Google API key
                r")"
            ),
        ),
        pattern(
            SecretKind::ProviderKey,
            r"(?i)aws_secret_access_key\s*[:=]\s*\S{30,}",
        ),
        pattern(
            SecretKind::PrivateKey,
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
        ),
        pattern(
            SecretKind::BearerToken,
            r"(?i)\bbearer\s+[A-Za-z0-9_\-.=+/]{20,}",
        ),
        pattern(
            SecretKind::PasswordInUrl,
            r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]+:[^\s@/]+@",
        ),
        pattern(
            SecretKind::Jwt,
            r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        ),
    ]
});

/// `password = "…"`, `passwd: …`, `secret=…` and the like, with the value.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|token)\s*[:=]\s*["']?([^\s"'`,;]+)"#,
    )
    .expect("the assignment pattern compiles")
});

static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/_=\-]{32,}").expect("the token pattern compiles"));

/// Values of an assignment that are clearly not a secret.
const PLACEHOLDERS: &[&str] = &[
    "changeme",
    "password",
    "secret",
    "example",
    "placeholder",
    "redacted",
    "xxxxxxxx",
    "none",
    "null",
    "true",
    "false",
];

/// The first kind of secret `text` seems to hold.
pub fn find_secret(text: &str) -> Option<SecretKind> {
    if let Some((kind, _)) = PATTERNS.iter().find(|(_, re)| re.is_match(text)) {
        return Some(*kind);
    }
    let assigned = ASSIGNMENT.captures_iter(text).any(|captures| {
        let value = &captures[1];
        value.len() >= 8
            && !value.starts_with(['<', '$', '{', '*'])
            && !PLACEHOLDERS.contains(&value.to_lowercase().as_str())
    });
    if assigned {
        return Some(SecretKind::PasswordAssignment);
    }
    TOKEN
        .find_iter(text)
        .any(|token| looks_random(token.as_str()))
        .then_some(SecretKind::HighEntropyToken)
}

/// A long run mixing letters and digits with high entropy, that is not a
/// hex digest or a UUID.
fn looks_random(token: &str) -> bool {
    let is_hex = token.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if is_hex || token.len() < MIN_TOKEN_LEN {
        return false;
    }
    let has_letter = token.chars().any(|c| c.is_ascii_alphabetic());
    let has_digit = token.chars().any(|c| c.is_ascii_digit());
    // Paths and identifiers are long but made of words.
    let separators = token
        .chars()
        .filter(|c| matches!(c, '/' | '_' | '-'))
        .count();
    has_letter && has_digit && separators * 8 < token.len() && entropy(token) >= MIN_ENTROPY_BITS
}

/// Shannon entropy in bits per character.
fn entropy(text: &str) -> f64 {
    let mut counts = [0usize; 256];
    for byte in text.bytes() {
        counts[usize::from(byte)] += 1;
    }
    #[expect(clippy::cast_precision_loss, reason = "token lengths are small")]
    let len = text.len() as f64;
    counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            #[expect(clippy::cast_precision_loss, reason = "counts are small")]
            let p = n as f64 / len;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn secrets_are_found() {
        let cases = [
            (
                "Use sk-proj-abcdefghijklmnopqrstuvwxyz0123456789 for the API.",
                SecretKind::ProviderKey,
            ),
            (
                "key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx",
                SecretKind::ProviderKey,
            ),
            (
                "The AWS key is AKIAIOSFODNN7EXAMPLE.",
                SecretKind::ProviderKey,
            ),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                SecretKind::ProviderKey,
            ),
            (
                "token ghp_16C7e42F292c6912E7710c838347Ae178B4a",
                SecretKind::ProviderKey,
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
                SecretKind::ProviderKey,
            ),
            ("glpat-xxxxXXXXxxxxXXXXxxxx1", SecretKind::ProviderKey),
            (
                "slack: xoxb-123456789012-abcdefghij",
                SecretKind::ProviderKey,
            ),
            (
                "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                SecretKind::ProviderKey,
            ),
            (
                "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
                SecretKind::ProviderKey,
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=",
                SecretKind::PrivateKey,
            ),
            ("-----BEGIN RSA PRIVATE KEY-----", SecretKind::PrivateKey),
            (
                "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwx1234'",
                SecretKind::BearerToken,
            ),
            (
                "DATABASE_URL=postgres://admin:hunter2@db.internal:5432/app",
                SecretKind::PasswordInUrl,
            ),
            (
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                SecretKind::Jwt,
            ),
            (
                "the admin password = \"Tr0ub4dor&3x\"",
                SecretKind::PasswordAssignment,
            ),
            ("Set api_key: 9f8e7d6c5b4aZ", SecretKind::PasswordAssignment),
            (
                "session secret: q8Zr2Lx9Vb7Nw3Kt5Hy1Jm6Pd4Sf0Gc8",
                SecretKind::PasswordAssignment,
            ),
            (
                "seed Zq3xR9vL2mK8nB5wT1yH7cJ4fD6gS0aP9eU",
                SecretKind::HighEntropyToken,
            ),
        ];
        for (text, kind) in cases {
            assert_eq!(find_secret(text), Some(kind), "{text}");
        }
    }

    #[test]
    fn ordinary_coding_memories_are_not_secrets() {
        let texts = [
            "User prefers `errors.As` over type assertions for error handling in Go.",
            "Commit 3f2a9c1b4d5e6f708192a3b4c5d6e7f8091a2b3c fixed the flaky test.",
            "Memory 0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d supersedes the old rule.",
            "Config lives in src/config/environment_variables_loader.rs.",
            "Docs are at https://docs.example.com/guide/getting-started.",
            "Use postgres://localhost:5432/app in development (no password).",
            "The function handle_incoming_webhook_payload_and_dispatch is too long.",
            "Ana likes snake_case for Rust and camelCase for TypeScript.",
            "The password must be at least 12 characters long.",
            "Set password = <your password> in the local .env file.",
            "token: ${GITHUB_TOKEN} comes from the CI secrets.",
            "Run cargo test --workspace --all-features before pushing.",
            "The sha256 is e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.",
            "Bearer tokens are validated by the auth gateway.",
            "The base64 of hello is aGVsbG8=.",
            "We use OpenTelemetry with the OTLP exporter over gRPC.",
        ];
        for text in texts {
            assert_eq!(find_secret(text), None, "{text}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,500}") {
            let _ = find_secret(&text);
        }
    }
}
