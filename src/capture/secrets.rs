//! The secret detector: finds content that looks like a credential, so that
//! it is refused before it is written into a memory file (by capture, and
//! by `POST /memories`).
//!
//! The text is first normalised (NFKC, invisible format characters
//! dropped), so fullwidth or zero-width-split keys read like plain ones.
//! Provider key formats are matched by their prefixes, in the text and
//! again with whitespace taken out, so a key spelled out character by
//! character (`g h p _ …`) is still one. Beyond them come bearer tokens,
//! private key blocks, passwords in URLs, values assigned to a password,
//! secret, token or credential name (`DB_PASSWORD=hunter2`, `token: …`,
//! "the password is …") whatever their entropy, credential flags
//! (`--password …`, `mysql -p…`, `curl -u user:…`), JWTs, and long
//! random-looking tokens. False positives cost a lost memory, so everything
//! coding memories mention all the time passes: commit hashes, UUIDs, paths,
//! URLs without credentials, identifiers in any case, prose about passwords
//! and tokens, references (`${DB_PASSWORD}`, `settings.db_password`) and
//! password placeholders (`<password>`, `***`, `changeme`).
//!
//! Patterns are compiled once. Speed, on a shared 2-core machine: a clean
//! text runs every detector to its end. In a release build, 100 KB of prose
//! and code (some non-ASCII) took 0.7–1.1 ms per scan, as did 100 KB of
//! nothing but long identifiers, hashes and paths, before the normalised
//! and spaced-out passes and the assignment, prose and flag detectors were
//! added. Those took a scan of 100 KB of prose and code from 0.6–0.75 ms to
//! 1.1–1.5 ms (dev build with this crate at opt-level 3); name matching is
//! ASCII-only case-insensitive (`(?i-u:…)`), which halved its cost. The
//! detector sees memory contents (at most 8,000 characters), not windows.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

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
    CredentialFlag,
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
            Self::CredentialFlag => "credential-flag",
            Self::Jwt => "jwt",
            Self::HighEntropyToken => "high-entropy-token",
        }
    }
}

/// A text refused because it holds a secret.
#[derive(Debug, thiserror::Error)]
#[error(
    "`content` looks like it holds a secret ({}); store a reference to it (such as `${{DB_PASSWORD}}`) rather than its value",
    kind.as_str()
)]
pub struct SecretFound {
    pub kind: SecretKind,
}

/// `Err` when `text` holds a secret: the guard of every memory write.
pub fn ensure_no_secret(text: &str) -> Result<(), SecretFound> {
    find_secret(text).map_or(Ok(()), |kind| Err(SecretFound { kind }))
}

/// The kind of the first secret found, trying the most specific kinds first
/// (an Anthropic key is also shaped like an OpenAI one, and both are
/// high-entropy tokens). `None` when the text looks clean.
pub fn find_secret(text: &str) -> Option<SecretKind> {
    let text = normalize(text);
    let found = DETECTORS.iter().find(|detector| {
        detector
            .pattern
            .captures_iter(&text)
            .any(|found| (detector.confirms)(&text, &found))
    });
    found
        .map(|detector| detector.kind)
        .or_else(|| find_spaced_out_key(&text))
}

/// NFKC (fullwidth `ＡＫＩＡ` becomes `AKIA`, ligatures and compatibility
/// forms their plain letters) without the invisible characters that could
/// split a key or a name (zero-width spaces and joiners, soft hyphens).
fn normalize(text: &str) -> Cow<'_, str> {
    // Most text is already in NFKC; the quick check saves a copy of it.
    let unchanged = text.is_ascii()
        || (is_nfkc_quick(text.chars()) == IsNormalized::Yes && !text.contains(is_invisible));
    if unchanged {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.nfkc().filter(|&c| !is_invisible(c)).collect())
}

fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'
    )
}

/// A provider key written with whitespace between its characters or
/// groups: the provider patterns run again over the text with its
/// whitespace taken out. Joining words can fake a prefix, so a match counts
/// only where a word starts in the text, where it spans whitespace (else the
/// first pass judged it), and where it holds a digit, as random keys do and
/// joined prose rarely does.
fn find_spaced_out_key(text: &str) -> Option<SecretKind> {
    if !text.contains(char::is_whitespace) {
        return None;
    }
    let joined: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    // One pass decides whether any provider shape is there at all; the
    // offsets are worked out only then.
    if !SPACED_OUT.is_match(&joined) {
        return None;
    }
    // The offset in `text` of each byte of `joined`.
    let origin: Vec<usize> = text
        .char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .flat_map(|(at, c)| at..at + c.len_utf8())
        .collect();
    DETECTORS.iter().find_map(|detector| {
        let pattern = detector.spaced_out.as_ref()?;
        pattern
            .captures_iter(&joined)
            .any(|found| {
                let Some(whole) = found.get(0) else {
                    return false;
                };
                let (start, last) = (origin[whole.start()], origin[whole.end() - 1]);
                let starts_a_word = text[..start]
                    .chars()
                    .next_back()
                    .is_none_or(|before| !before.is_alphanumeric());
                let spans_whitespace = last - start + 1 > whole.len();
                starts_a_word
                    && spans_whitespace
                    && whole.as_str().bytes().any(|b| b.is_ascii_digit())
                    && (detector.confirms)(&joined, &found)
            })
            .then_some(detector.kind)
    })
}

/// Values shorter than this are left alone after a name or flag: too short
/// to tell from prose such as "password: 12 characters".
const MIN_VALUE_CHARS: usize = 4;

/// Values said in prose ("the password is …") are judged from this length.
const MIN_PROSE_VALUE_CHARS: usize = 6;

/// The shortest run judged as a generic token.
const MIN_TOKEN_CHARS: usize = 32;

/// Bits per character from which a token counts as random. 32 random base62
/// characters almost always score above 4.0; hex cannot (16 symbols).
const MIN_TOKEN_ENTROPY: f64 = 4.0;

/// A second look at a match, for what a pattern cannot say: that a value is
/// a placeholder, or an identifier rather than a random token. It sees the
/// text searched and the match.
type Confirm = fn(&str, &Captures<'_>) -> bool;

struct Detector {
    kind: SecretKind,
    /// Word boundaries are ASCII (`(?-u:\b)`): tokens are ASCII, and the
    /// Unicode kind made the scan of non-ASCII prose about 40% slower.
    pattern: Regex,
    /// For provider keys: the pattern without word boundaries, run over the
    /// text with its whitespace taken out.
    spaced_out: Option<Regex>,
    confirms: Confirm,
}

const ASCII_WORD_BOUNDARY: &str = r"(?-u:\b)";

/// Every provider pattern of [`DETECTORS`] without word boundaries, as one
/// set.
static SPACED_OUT: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(
        DETECTORS
            .iter()
            .filter_map(|detector| detector.spaced_out.as_ref().map(Regex::as_str)),
    )
    .expect("secret patterns are valid")
});

static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(|| {
    let compile = |pattern: &str| Regex::new(pattern).expect("secret patterns are valid");
    let detector = |kind, pattern: &str, confirms: Confirm| Detector {
        kind,
        pattern: compile(pattern),
        spaced_out: None,
        confirms,
    };
    let provider_key = |kind, pattern: &str, confirms: Confirm| Detector {
        kind,
        pattern: compile(pattern),
        spaced_out: Some(compile(&pattern.replace(ASCII_WORD_BOUNDARY, ""))),
        confirms,
    };
    vec![
        detector(
            SecretKind::PrivateKey,
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
            any_match,
        ),
        provider_key(
            SecretKind::AnthropicKey,
            r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{20,}",
            any_match,
        ),
        // Legacy `sk-…` and project `sk-proj-…` keys alike.
        provider_key(
            SecretKind::OpenAiKey,
            r"(?-u:\b)sk-(?P<secret>[A-Za-z0-9_-]{20,})",
            secret_looks_random,
        ),
        provider_key(
            SecretKind::AwsAccessKeyId,
            r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
            any_match,
        ),
        detector(
            SecretKind::AwsSecretAccessKey,
            r#"(?i)aws[_-]?secret[_-]?access[_-]?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            secret_looks_random,
        ),
        provider_key(
            SecretKind::GitHubToken,
            r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
            any_match,
        ),
        provider_key(
            SecretKind::GitLabToken,
            r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,}",
            any_match,
        ),
        provider_key(
            SecretKind::SlackToken,
            r"(?-u:\b)xox[baprs]-[A-Za-z0-9-]{10,}",
            any_match,
        ),
        provider_key(
            SecretKind::StripeKey,
            r"(?-u:\b)[rs]k_live_[A-Za-z0-9]{16,}",
            any_match,
        ),
        provider_key(
            SecretKind::GoogleApiKey,
            r"(?-u:\b)AIza[A-Za-z0-9_-]{35}",
            any_match,
        ),
        // Before bearer tokens: a JWT is the usual bearer, and the more
        // telling label.
        provider_key(
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
        // `DB_PASSWORD=…`, `"token": "…"`, `pwd := …`: the name may end a
        // longer one (`PGPASSWORD`, `client_secret`) or take a `_key` or
        // `_value` suffix, never another (`password_hash`, `token_count`).
        detector(
            SecretKind::PasswordAssignment,
            r#"(?P<name>(?i-u:pass(?:word|wd|phrase)?|pwd|secret|token|credentials?|api[_-]?key|private[_-]?key))(?i-u:[_-]?(?:key|value|string))?["']?[ \t]*(?::=|==|[:=])[ \t]*(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)'|(?P<bare>[^\s"'`,;()\[\]{}<>]+))"#,
            assigned_value_is_real,
        ),
        // `--password hunter2`, `--db-token=…`
        detector(
            SecretKind::CredentialFlag,
            r#"(?m:^|[ \t])--?(?i-u:[a-z]+-)*(?P<name>(?i-u:password|passwd|pass|pwd|token|secret|api-?key))(?:=|[ \t]+)(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)'|(?P<bare>[^\s"'`;|&()<>-][^\s"'`;|&()<>]*))"#,
            flag_value_is_real,
        ),
        // The password glued to `-p` (MySQL clients), after `-p` (sshpass)
        // or `-a` (redis-cli), or after the user in `curl -u user:password`.
        detector(
            SecretKind::CredentialFlag,
            r#"(?-u:\b)(?:(?i-u:mysql(?:dump|admin|import|show|check)?|mariadb(?:-dump)?)(?-u:\b)[^\n|;&]*?[ \t]-p|sshpass(?-u:\b)[^\n|;&]*?[ \t]-p[ \t]*|redis-cli(?-u:\b)[^\n|;&]*?[ \t]-a[ \t]+|(?:curl|wget)(?-u:\b)[^\n|;&]*?[ \t](?:-u|--user)(?:[ \t]+|=)?["']?[^\s:"'@]+:)(?P<bare>[^\s"'`;|&()<>@]+)"#,
            command_password_is_real,
        ),
        detector(
            SecretKind::HighEntropyToken,
            r"[A-Za-z0-9+/_=-]{32,}",
            secret_is_random_token,
        ),
        // "the admin password is Sup3rS3cret!"; after random tokens, which
        // are the more telling label for a long value.
        detector(
            SecretKind::PasswordAssignment,
            r#"(?-u:\b)(?P<name>(?i-u:pass(?:word|phrase)|secret|token|credentials?|api[ _-]?key))[ \t]+(?i-u:is[ \t]+now|(?:set|changed)[ \t]+to|is|was)[ \t]+(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)'|`(?P<backtick>[^`\n]*)`|(?P<bare>[^\s"'`,;()\[\]{}<>]+))"#,
            stated_value_is_real,
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

/// Values that name where a secret lives rather than holding it: paths,
/// URLs, dotted or called code (`settings.db_password`, `getPassword()`)
/// and environment variable names (`GITHUB_TOKEN`).
static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:
            (?:~|\.{1,2})?/\S*
          | [A-Za-z][A-Za-z0-9+.-]*://\S*
          | [A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?
        )$",
    )
    .expect("the reference pattern is valid")
});

/// Stand-in values, compared lowercased with everything but letters and
/// digits removed ("CHANGE_ME", "your-password-here"), and words that
/// describe a field rather than fill it ("password: required").
const PLACEHOLDER_WORDS: &[&str] = &[
    "bearer",
    "boolean",
    "changeme",
    "empty",
    "example",
    "false",
    "hidden",
    "masked",
    "mypassword",
    "none",
    "null",
    "optional",
    "pass",
    "password",
    "passwordhere",
    "placeholder",
    "redacted",
    "required",
    "secret",
    "sensitive",
    "string",
    "token",
    "true",
    "unset",
    "yourpassword",
    "yourpasswordhere",
];

fn any_match(_: &str, _: &Captures<'_>) -> bool {
    true
}

/// The `secret` group, or the whole match for patterns without one.
fn secret<'t>(found: &Captures<'t>) -> &'t str {
    found
        .name("secret")
        .or_else(|| found.get(0))
        .map_or("", |matched| matched.as_str())
}

fn secret_looks_random(_: &str, found: &Captures<'_>) -> bool {
    mixes_character_classes(secret(found))
}

fn url_password_is_real(_: &str, found: &Captures<'_>) -> bool {
    !is_placeholder(secret(found))
}

/// A value assigned to a secret's name is a secret whatever its entropy,
/// unless it is a stand-in, a reference, or (unquoted) reads as prose or
/// code: a bare word followed by more words ("password: must be long") or
/// by a call.
fn assigned_value_is_real(text: &str, found: &Captures<'_>) -> bool {
    let Some(name) = found.name("name") else {
        return false;
    };
    // `tests pass: 3/3`, `bypass = …`: the short names count only as part
    // of a longer name (`DB_PASS`, `MYSQL_PWD`, `PGPASS`) or, for `pwd`,
    // as a word of their own.
    let before = text[..name.start()].chars().next_back();
    let after_separator = before.is_some_and(|c| matches!(c, '_' | '-'));
    let capitals = name.as_str().bytes().all(|b| b.is_ascii_uppercase());
    let name_stands = match name.as_str().to_ascii_lowercase().as_str() {
        "pass" => after_separator || capitals,
        "pwd" => after_separator || capitals || before.is_none_or(|c| !c.is_alphanumeric()),
        _ => true,
    };
    name_stands && judge_value(text, found)
}

/// A value said in prose is a secret when it looks like one (a digit or a
/// symbol) and ends its clause: "the password is 8-char minimum" is prose.
fn stated_value_is_real(text: &str, found: &Captures<'_>) -> bool {
    if let Some(quoted) = quoted_value(found) {
        return is_literal(quoted, MIN_PROSE_VALUE_CHARS);
    }
    found.name("bare").is_some_and(|bare| {
        let value = bare.as_str().trim_end_matches(['.', '!', '?']);
        ends_clause(text, bare.end())
            && !value.bytes().all(|b| b.is_ascii_digit())
            && has_digit_or_symbol(value)
            && is_literal(value, MIN_PROSE_VALUE_CHARS)
    })
}

fn flag_value_is_real(text: &str, found: &Captures<'_>) -> bool {
    judge_value(text, found)
}

fn command_password_is_real(_: &str, found: &Captures<'_>) -> bool {
    found
        .name("bare")
        .is_some_and(|bare| is_literal(bare.as_str(), MIN_VALUE_CHARS))
}

/// The verdict on a value after a name or a flag. Quoted, any literal
/// counts; bare, a value with a digit or a symbol counts, and a plain word
/// counts where it ends the line or the entry (`password: swordfish`).
/// Numbers after a token's name are counts (`max_token = 4096`).
fn judge_value(text: &str, found: &Captures<'_>) -> bool {
    let counts_allowed = found
        .name("name")
        .is_some_and(|name| name.as_str().to_ascii_lowercase().ends_with("token"));
    let is_count = |value: &str| counts_allowed && value.bytes().all(|b| b.is_ascii_digit());
    if let Some(quoted) = quoted_value(found) {
        return !is_count(quoted) && is_literal(quoted, MIN_VALUE_CHARS);
    }
    found.name("bare").is_some_and(|bare| {
        let value = bare.as_str().trim_end_matches('.');
        !is_count(value)
            && (has_digit_or_symbol(value) || ends_entry(text, bare.end()))
            && is_literal(value, MIN_VALUE_CHARS)
    })
}

fn quoted_value<'t>(found: &Captures<'t>) -> Option<&'t str> {
    found
        .name("double")
        .or_else(|| found.name("single"))
        .or_else(|| found.name("backtick"))
        .map(|quoted| quoted.as_str())
}

/// Long enough, and neither a stand-in nor a reference.
fn is_literal(value: &str, min_chars: usize) -> bool {
    value.chars().count() >= min_chars && !is_placeholder(value) && !is_reference(value)
}

/// A path, a URL, code (`settings.db_password`, `getPassword()`), an
/// environment variable (`GITHUB_TOKEN`) or a snake-case name that says
/// what it holds (`db_password`).
fn is_reference(value: &str) -> bool {
    if !REFERENCE.is_match(value) {
        return false;
    }
    let is_code = value.contains(['.', '/', '(']);
    let is_env_name = value.contains('_')
        && value
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    let lower = value.to_ascii_lowercase();
    let names_a_secret = value.contains('_')
        && ["pass", "pwd", "secret", "token", "key", "credential"]
            .iter()
            .any(|word| lower.contains(word));
    is_code || is_env_name || names_a_secret
}

/// A digit or a symbol other than the dots, dashes and underscores of
/// names: what a literal shows and a word of prose or code does not.
fn has_digit_or_symbol(value: &str) -> bool {
    value
        .chars()
        .any(|c| c.is_ascii_digit() || !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')))
}

/// Nothing but blanks follow `at` up to the end of its line, or a
/// delimiter of an inline entry does (`{password: x, user: y}`).
fn ends_entry(text: &str, at: usize) -> bool {
    let rest = text[at..].trim_start_matches([' ', '\t']);
    rest.is_empty() || rest.starts_with(['\n', '\r', ',', ';', '}', ']'])
}

/// `ends_entry`, or the value closed its sentence (`hunter2.`) or a
/// parenthesis.
fn ends_clause(text: &str, at: usize) -> bool {
    let value = &text[..at];
    value.ends_with(['.', '!', '?']) || ends_entry(text, at) || text[at..].starts_with(')')
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
fn secret_is_random_token(_: &str, found: &Captures<'_>) -> bool {
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
            "password_hash = \"$2b$12$abc\"",
        ] {
            assert_clean(text);
        }
    }

    /// Fullwidth forms, as an evasion of ASCII patterns.
    fn fullwidth(text: &str) -> String {
        text.chars()
            .map(|c| char::from_u32(u32::from(c) + 0xFEE0).unwrap_or(c))
            .collect()
    }

    fn spaced(text: &str) -> String {
        text.chars().map(String::from).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn weak_values_assigned_to_secret_names_are_found() {
        for text in [
            "password: hunter2",
            "password=hunter2",
            "DB_PASSWORD: hunter2",
            "export PGPASSWORD=hunter2",
            "pwd = Xk9mP2vLq7",
            "token: Xk9mP2vLq7Rt5",
            "password: swordfish",
            r#"{"password": "hunter2", "user": "ana"}"#,
            "MYSQL_PWD=abc123 mysql -u root",
            "SECRET_KEY = 'dev-only-9f2'",
            "credentials: admin123",
            "ｐａｓｓｗｏｒｄ: hunter2",
            "pass\u{200B}word: hunter2",
        ] {
            assert_secret(text, SecretKind::PasswordAssignment);
        }
    }

    #[test]
    fn passwords_stated_in_prose_are_found() {
        for text in [
            "the admin password is Sup3rS3cret!",
            "The staging password was hunter22.",
            "Her passphrase is now w1nter-is-coming",
            "the api key is 'Xk9mP2vLq7', keep it safe",
        ] {
            assert_secret(text, SecretKind::PasswordAssignment);
        }
    }

    #[test]
    fn credential_flags_are_found() {
        for text in [
            "mysql -u root -pHunter2Secret app",
            "curl -u admin:Hunter2Secret https://ci.internal/api",
            "curl --user=admin:hunter22 https://ci.internal/api",
            "sshpass -p hunter22 ssh deploy@host",
            "redis-cli -h cache -a hunter22 ping",
            "psql --password hunter22",
            "run it as\n--password hunter22",
            "gh auth login --with-token Xk9mP2vLq7",
        ] {
            assert_secret(text, SecretKind::CredentialFlag);
        }
    }

    #[test]
    fn provider_keys_in_fullwidth_or_spaced_out_are_found() {
        let id = format!("AKIA{}", fake(UPPER_ALNUM, 16, 30));
        assert_secret(
            &format!("aws id {}", fullwidth(&id)),
            SecretKind::AwsAccessKeyId,
        );
        let token = format!("ghp_{}", fake(BASE62, 36, 31));
        assert_secret(
            &format!("my token is {}", spaced(&token)),
            SecretKind::GitHubToken,
        );
        let grouped: Vec<String> = token
            .as_bytes()
            .chunks(4)
            .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
            .collect();
        assert_secret(&grouped.join(" "), SecretKind::GitHubToken);
        let zero_width = token.replace('_', "_\u{200B}");
        assert_secret(&zero_width, SecretKind::GitHubToken);
    }

    #[test]
    fn prose_and_code_about_secrets_pass() {
        for text in [
            "We use a password manager for the shared accounts.",
            "the token bucket rate limiter refills every second",
            "rotate the secret every 90 days",
            "Tests pass: 120/120 after the fix.",
            "Set max_tokens = 4096 and token_budget: 1000.",
            "max_token: 512",
            "The password is 8-char minimum and must hold a digit.",
            "The secret is stored in Vault.",
            "password: must be at least 12 characters",
            "password = getPassword()",
            "secret_key = settings.SECRET_KEY",
            "password: db_password",
            "token: GITHUB_TOKEN",
            "pwd: /home/ana/src/engram",
            "credentials: ~/.aws/credentials",
            "Use `--token` with your PAT.",
            "Pass --token with the value from the vault",
            "cargo test -p engram --lib",
            "docker run -p8080:80 -u 1000:1000 engram",
            "mysql -u root -p app   # prompts for the password",
            "mysql -h db -P3306 -u app",
            "curl -u $CI_USER:$CI_TOKEN https://ci.internal/api",
            "USE AKIA KEYS ONLY FOR TESTING PURPOSES",
            "g h p _ is the prefix of GitHub personal access tokens",
            "東京の チームは パスワード管理 を使う",
        ] {
            assert_clean(text);
        }
    }

    #[test]
    fn hex_digests_shas_and_uuids_pass_after_normalisation() {
        assert_clean("commit 3f2a9b1c0d4e5f60718293a4b5c6d7e8f9012345 fixed it");
        assert_clean(
            "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matches",
        );
        assert_clean("memory ０１９３f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d was merged");
        assert_clean("3f2a 9b1c 0d4e 5f60 7182 93a4 b5c6 d7e8 f901 2345");
    }

    #[test]
    fn a_refusal_names_the_kind_and_not_the_value() {
        let refused = ensure_no_secret("password: hunter2").unwrap_err();
        let message = refused.to_string();
        assert!(message.contains("password-assignment"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
        assert!(ensure_no_secret("We use a password manager").is_ok());
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
        fn fullwidth_and_spaced_text_never_panics(
            text in "[\\PC\\s\u{200B}\u{00AD}\u{FF01}-\u{FF5E}ﬁ①]{0,160}"
        ) {
            let _ = find_secret(&text);
        }

        #[test]
        fn token_shaped_text_never_panics(text in "[A-Za-z0-9+/_=:@.$<>\"' -]{0,120}") {
            let _ = find_secret(&text);
        }
    }
}
