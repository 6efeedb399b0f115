//! The secret detector: finds text that looks like a credential, so that
//! it is refused before it is written into a memory file (by capture, and
//! by `POST /memories` in every field it stores), and replaced by a
//! placeholder naming its kind (`[secret: aws-access-key-id]`) before text
//! leaves for an upstream model ([`redact`]).
//!
//! The text is first normalised (NFKC, invisible format characters
//! dropped), so fullwidth or zero-width-split keys read like plain ones.
//! Then four passes, each in its own module:
//! - [`detectors`]: provider key formats by their prefixes (AWS ids also
//!   written backwards), bearer tokens, private key blocks, passwords in
//!   URLs and in URL queries under a secret's name, values assigned to a
//!   password, secret, token or credential name in the languages of
//!   [`words`] (`DB_PASSWORD=hunter2`, `Passwort: …`, "the password for
//!   the db is …", "密码是…"), hex values named as a secret ("auth token
//!   9f86…"), user and password pairs (`login: admin / …`), credential
//!   flags, JWTs, and long random-looking tokens ([`tokens`] says which are
//!   random, [`values`] which values are real);
//! - [`spaced`]: provider keys with whitespace between their characters,
//!   or split into string literals joined in code;
//! - [`homoglyphs`]: provider keys with Cyrillic or Greek look-alike
//!   letters;
//! - [`encoded`]: base64 that decodes to text holding a secret.
//!
//! False positives cost a lost memory, so everything coding memories and
//! conversations mention all the time passes: commit hashes, UUIDs, paths,
//! URLs without credentials (ids in their paths too), package integrity
//! hashes, image digests, `data:` URIs, SSH public keys and IPFS content
//! ids ([`public_ids`]), identifiers in any case, prose
//! about passwords and tokens, references (`${DB_PASSWORD}`,
//! `settings.db_password`), code (`auth_token: Default::default()`,
//! `pub frag_token: __u32`), placeholders (`<password>`, `***`), and test
//! data (alphabets written out, base64 of counting bytes).
//!
//! Cost: every pass is linear in the text. Patterns are compiled once; name
//! matching is ASCII-only case-insensitive (`(?i-u:…)`) where the names are
//! ASCII, which halved its cost. `engram-bench guard` reports the scan
//! speed beside the false-positive rates.

mod detectors;
mod encoded;
mod homoglyphs;
mod public_ids;
mod spaced;
mod tokens;
mod values;
mod words;

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::ops::Range;

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
    WebhookUrl,
    BearerToken,
    PrivateKey,
    PasswordInUrl,
    SecretInUrlQuery,
    PasswordAssignment,
    UserAndPassword,
    CredentialFlag,
    Jwt,
    HighEntropyToken,
}

impl SecretKind {
    /// A stable kebab-case label, for logs, metrics and placeholders.
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
            Self::WebhookUrl => "webhook-url",
            Self::BearerToken => "bearer-token",
            Self::PrivateKey => "private-key",
            Self::PasswordInUrl => "password-in-url",
            Self::SecretInUrlQuery => "secret-in-url-query",
            Self::PasswordAssignment => "password-assignment",
            Self::UserAndPassword => "user-and-password",
            Self::CredentialFlag => "credential-flag",
            Self::Jwt => "jwt",
            Self::HighEntropyToken => "high-entropy-token",
        }
    }
}

/// A field refused because it holds a secret.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{field}` looks like it holds a secret ({}); store a reference to it (such as `${{DB_PASSWORD}}`) rather than its value",
    kind.as_str()
)]
pub struct SecretFound {
    /// The request field that holds it (`content`, `session_id`).
    pub field: std::borrow::Cow<'static, str>,
    pub kind: SecretKind,
}

/// `Err` naming `field` when `text` holds a secret: the guard of every
/// field a memory write stores.
pub fn ensure_no_secret(
    field: impl Into<std::borrow::Cow<'static, str>>,
    text: &str,
) -> Result<(), SecretFound> {
    find_secret(text).map_or(Ok(()), |kind| {
        Err(SecretFound {
            field: field.into(),
            kind,
        })
    })
}

/// The kind of the most specific secret found (an Anthropic key is also
/// shaped like an OpenAI one, and both are high-entropy tokens). `None`
/// when the text looks clean.
pub fn find_secret(text: &str) -> Option<SecretKind> {
    let text = normalize(text);
    findings(&text)
        .into_iter()
        .min_by_key(|finding| finding.rank)
        .map(|finding| finding.kind)
}

/// `text` with every secret replaced by `[secret: KIND]`, for text that
/// leaves for an upstream (the classifier's window, HyDE and expansion
/// prompts, query embeddings). Borrowed, and unchanged, when clean; else
/// the normalised text (NFKC) with its secrets replaced.
pub fn redact(text: &str) -> Cow<'_, str> {
    let normalized = normalize(text);
    let mut found = findings(&normalized);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    found.sort_by_key(|finding| (finding.span.start, finding.rank));
    let mut redacted = String::with_capacity(normalized.len());
    let mut copied = 0;
    let mut pending: Option<Finding> = None;
    for finding in found {
        match &mut pending {
            // Overlapping findings are one secret, under the most specific kind.
            Some(current) if finding.span.start < current.span.end => {
                current.span.end = current.span.end.max(finding.span.end);
                if finding.rank < current.rank {
                    current.rank = finding.rank;
                    current.kind = finding.kind;
                }
            }
            _ => {
                if let Some(done) = pending.replace(finding) {
                    copied = replace(&normalized, &mut redacted, copied, &done);
                }
            }
        }
    }
    if let Some(done) = pending {
        copied = replace(&normalized, &mut redacted, copied, &done);
    }
    redacted.push_str(&normalized[copied..]);
    Cow::Owned(redacted)
}

/// Copies the text up to `finding` and its placeholder; the offset copied to.
fn replace(text: &str, out: &mut String, copied: usize, finding: &Finding) -> usize {
    out.push_str(&text[copied..finding.span.start]);
    out.push_str("[secret: ");
    out.push_str(finding.kind.as_str());
    out.push(']');
    finding.span.end
}

/// One secret in a normalised text.
#[derive(Clone, Debug)]
struct Finding {
    kind: SecretKind,
    /// The bytes to hide: the value where a pattern names one (the password
    /// of `password: …`), else the whole match.
    span: Range<usize>,
    /// Lower is more specific: the detector's place in [`detectors`].
    rank: usize,
}

/// Every finding of the three passes in a normalised text.
fn findings(text: &str) -> Vec<Finding> {
    let mut found = plain_findings(text);
    found.extend(encoded::findings(text));
    found
}

/// The findings of the detectors and of the spaced-out and look-alike
/// passes: what [`encoded`] looks for in decoded text.
fn plain_findings(text: &str) -> Vec<Finding> {
    let mut found = detectors::findings(text);
    found.extend(spaced::findings(text));
    found.extend(homoglyphs::findings(text));
    found
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
