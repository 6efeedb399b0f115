//! The detectors: one pattern per shape of secret, most specific first,
//! each with a second look ([`Confirm`]) for what a pattern cannot say.
//! A detector's place in [`DETECTORS`] is its rank: of two findings of one
//! secret, the lower rank names it.

use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};

use super::tokens::secret_is_random_token;
use super::values::{
    any_match, assigned_value_is_real, aws_key_id_is_real, command_password_is_real,
    flag_value_is_real, hex_secret_is_real, judge_value, query_value_is_real,
    reversed_aws_key_id_is_real, secret_looks_random, spoken_pair_is_real, stated_value_is_real,
    unspaced_value_is_real, url_password_is_real,
};
use super::words::{self, SHORT_PASSWORD_NAMES, Script};
use super::{Finding, SecretKind};

/// A second look at a match, for what a pattern cannot say: that a value is
/// a placeholder, or an identifier rather than a random token. It sees the
/// text searched and the match.
pub type Confirm = fn(&str, &Captures<'_>) -> bool;

pub struct Detector {
    pub kind: SecretKind,
    /// Word boundaries are ASCII (`(?-u:\b)`): tokens are ASCII, and the
    /// Unicode kind made the scan of non-ASCII prose about 40% slower.
    pub pattern: Regex,
    /// For provider keys: the pattern without word boundaries, run over the
    /// text with its whitespace taken out.
    pub spaced_out: Option<Regex>,
    pub confirms: Confirm,
}

const ASCII_WORD_BOUNDARY: &str = r"(?-u:\b)";

/// Words for a user name, in the same languages.
const USER_WORDS: &str =
    r"user(?:[ _-]?name)?|login|benutzer(?:name)?|utilisateur|identifiant|usuario|gebruiker";

/// "and", between a user and a password.
const AND_WORDS: &str = r"and|und|et|y|e|en|og|och";

/// A declared type between a name and its `=` (`const API_TOKEN: &str =`,
/// `password: String =`), so the literal after it is judged.
const TYPE_ANNOTATION: &str =
    r"(?::[ \t]*&?(?:'static[ \t]+)?[A-Za-z_][A-Za-z0-9_:]*(?:<[^>\n]*>)?[ \t]*)";

/// A value after a name: quoted (any literal), the string a call is given
/// (`Some("…")`, `String::from("…")`), or bare. Not in backticks: "the
/// `password:` key" quotes code, not a value.
const VALUE: &str = r#"(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)'|[A-Za-z_][A-Za-z0-9_:]*!?\([ \t]*[rb]?\#*"(?P<argument>[^"\n]*)"|(?P<bare>[^\s"'`,;()\[\]{}<>&]+))"#;

/// A value said in prose: also in backticks ("the password is `…`").
const PROSE_VALUE: &str = r#"(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)'|`(?P<backtick>[^`\n]*)`|(?P<bare>[^\s"'`,;()\[\]{}<>&]+))"#;

/// A value said in a language written without spaces: also in corner
/// brackets (`「…」`), and bare only in ASCII, as the text around it is
/// not ("密码是Hunter2024。").
const UNSPACED_VALUE: &str = r#"(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)'|`(?P<backtick>[^`\n]*)`|「(?P<corner>[^」\n]*)」|(?P<bare>[!-~&&[^"'`,;()\[\]{}<>&]]+))"#;

/// Names of a secret whose value may follow with no `=` or "is" at all
/// ("auth token 9f86…", "unseal key 4b22…"): a hex value after one is
/// a secret (a hex value after other words is a hash or an id).
const HEX_SECRET_NAMES: &str = r"(?:auth(?:entication|orization)?|access|api|bearer|session|refresh|root|vault|unseal|recovery|master|admin|secret|private|signing|encryption|client|webhook|deploy)[ \t_-]?(?:token|key|secret)|token|secret|password|passphrase";

/// Every provider pattern of [`DETECTORS`] without word boundaries, as one
/// set.
pub static SPACED_OUT: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(
        DETECTORS
            .iter()
            .filter_map(|detector| detector.spaced_out.as_ref().map(Regex::as_str)),
    )
    .expect("secret patterns are valid")
});

pub static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(|| {
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
    let ascii_words = format!(
        "{}|{SHORT_PASSWORD_NAMES}",
        words::password_words(None, true)
    );
    let unicode_words = words::password_words(None, false);
    // A whole word: `Pass` must not stand for the start of `Passwort`.
    let password = format!("(?:(?i-u:{ascii_words})(?-u:\\b)|(?i:{unicode_words}))");
    let ascii_spaced = words::password_words(Some(Script::Spaced), true);
    let unicode_spaced = words::password_words(Some(Script::Spaced), false);
    let spaced_is = words::is_words(Script::Spaced);
    let of = words::of_words();
    let unspaced_words = words::password_words(Some(Script::Unspaced), false);
    let unspaced_is = words::is_words(Script::Unspaced);
    vec![
        // The whole block, to its end (or the text's): its body is the key.
        detector(
            SecretKind::PrivateKey,
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
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
        // Also split into groups by dashes, dots or underscores.
        provider_key(
            SecretKind::AwsAccessKeyId,
            r"(?-u:\b)(?:AKIA|ASIA)(?:[-_.]?[A-Z0-9]){16}(?-u:\b)",
            aws_key_id_is_real,
        ),
        // Written backwards, so that a scanner reading forwards misses it.
        detector(
            SecretKind::AwsAccessKeyId,
            r"(?-u:\b)[A-Z0-9]{16}(?:AIKA|AISA)(?-u:\b)",
            reversed_aws_key_id_is_real,
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
        // The URL is the credential: whoever holds it may post.
        detector(
            SecretKind::WebhookUrl,
            r"(?i-u:https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks)/)[A-Za-z0-9/_-]{20,}",
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
        // `?token=…`, `&api_key=…`, `#access_token=…`: a parameter whose
        // name ends in a secret's word. Other parameters (`?levelId=…`)
        // are ids, and pass.
        detector(
            SecretKind::SecretInUrlQuery,
            r#"[?&#;][A-Za-z0-9_.-]*?(?i-u:token|key|secret|pass(?:word|wd)?|pwd|sig|signature|auth|code|session(?:[_-]?id)?|sid)=(?P<secret>[^&#\s"'<>]+)"#,
            query_value_is_real,
        ),
        // `user / password: ana / hunter2`, `Benutzer/Passwort = ana/…`.
        detector(
            SecretKind::UserAndPassword,
            &format!(
                r#"(?-u:\b)(?i-u:{USER_WORDS})[ \t]*(?:/|\||,|&|(?i-u:{AND_WORDS})(?-u:\b))[ \t]*{password}["']?[ \t]*(?::|=|(?i-u:is|are|sind|sont|son|er|är|zijn)(?-u:\b))?[ \t]*["'`]?[^\s/|"'`:,;]+["'`]?[ \t]*(?:/|\||:|,|(?i-u:{AND_WORDS})(?-u:\b))[ \t]*{VALUE}"#
            ),
            judge_value,
        ),
        // "log in as user ana, password hunter2".
        detector(
            SecretKind::UserAndPassword,
            &format!(
                r#"(?-u:\b)(?i-u:{USER_WORDS})(?:[ \t]*[:=][ \t]*|[ \t]+)["'`]?[^\s"'`:,;]+["'`]?[ \t]*[,;]?[ \t]+(?:(?i-u:{AND_WORDS}|with|mit|avec|con)[ \t]+)?{password}[ \t]+{VALUE}"#
            ),
            spoken_pair_is_real,
        ),
        // `login: admin / hunter22`, "log in with ana / S3cret!": a user and
        // a password split by a slash with blanks around it (without them,
        // `owner/repo` is a path).
        detector(
            SecretKind::UserAndPassword,
            &format!(
                r#"(?-u:\b)(?:(?i-u:{USER_WORDS})[ \t]*:|(?i-u:log[ \t]?in|sign[ \t]?in|{USER_WORDS})[ \t]+(?i-u:with|as|using|mit|als|avec|con|com))[ \t]*["'`]?[^\s/"'`:,;]+["'`]?[ \t]+/[ \t]+{VALUE}"#
            ),
            spoken_pair_is_real,
        ),
        // `DB_PASSWORD=…`, `"token": "…"`, `pwd := …`, `Passwort: …`,
        // `const API_TOKEN: &str = "…"`: the
        // name may end a longer one (`PGPASSWORD`, `client_secret`) or take
        // a `_key` or `_value` suffix, never another (`password_hash`,
        // `token_count`). A service account's `private_key_id` goes with
        // its key.
        detector(
            SecretKind::PasswordAssignment,
            &format!(
                r#"(?P<name>(?i-u:{ascii_words}|secret|token|credentials?|api[_-]?key|private[_-]?key(?:[_-]?id)?)|(?i:{unicode_words}))(?i-u:[_-]?(?:key|value|string))?["']?[ \t]*(?:{TYPE_ANNOTATION}=|:=|==|[:=])[ \t]*{VALUE}"#
            ),
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
        // "auth token 9f86…", "unseal key is 4b22…": a hex value (which no
        // random-token check takes) named as a secret.
        detector(
            SecretKind::PasswordAssignment,
            &format!(
                r#"(?-u:\b)(?i-u:{HEX_SECRET_NAMES})(?:[ \t]*[:=][ \t]*|[ \t]+(?i-u:(?:is|was)[ \t]+)?)["'`]?(?P<secret>[0-9A-Fa-f]{{32,}})(?-u:\b)"#
            ),
            hex_secret_is_real,
        ),
        // "the admin password is Sup3rS3cret!", "das Passwort ist …", "la
        // contraseña del servidor es …" ([`words`] holds each language's
        // words); after random tokens, which are the more telling label for
        // a long value.
        detector(
            SecretKind::PasswordAssignment,
            &format!(
                r#"(?:(?-u:\b)(?i-u:{ascii_spaced}|secret|token|credentials?|api[ _-]?key)|(?i:{unicode_spaced}))(?:[ \t]+(?i:{of})(?:[ \t]+[^\s"'`,;:=()\[\]{{}}<>&]+){{1,3}})?[ \t]+(?i:{spaced_is})[ \t]+{PROSE_VALUE}"#
            ),
            stated_value_is_real,
        ),
        // "密码是Hunter2024", "パスワードは「…」", "비밀번호는 …": the particle
        // and the value may touch the word.
        detector(
            SecretKind::PasswordAssignment,
            &format!(r#"(?:{unspaced_words})[ \t]*(?:{unspaced_is})[ \t]*{UNSPACED_VALUE}"#),
            unspaced_value_is_real,
        ),
    ]
});

/// Every confirmed match of every detector in `text`.
pub fn findings(text: &str) -> Vec<Finding> {
    let mut found = Vec::new();
    for (rank, detector) in DETECTORS.iter().enumerate() {
        for captures in detector.pattern.captures_iter(text) {
            if (detector.confirms)(text, &captures) {
                found.push(Finding {
                    kind: detector.kind,
                    span: secret_span(&captures),
                    rank,
                });
            }
        }
    }
    found
}

/// The provider keys found in `rewritten`, a copy of `text` with pieces
/// taken out or letters read as others, placed back in `text` through
/// `origin` (the offset in `text` of each byte of `rewritten`). Each
/// provider's `pattern` is run; a match counts where it holds a digit, as
/// random keys do, where `counts` accepts its place in `text` (given that
/// span and the match), and where its detector confirms it.
pub fn provider_findings(
    text: &str,
    rewritten: &str,
    origin: &[usize],
    pattern: fn(&Detector) -> Option<&Regex>,
    counts: impl Fn(std::ops::Range<usize>, &str) -> bool,
) -> Vec<Finding> {
    let mut found = Vec::new();
    for (rank, detector) in DETECTORS.iter().enumerate() {
        if detector.spaced_out.is_none() {
            continue;
        }
        let Some(pattern) = pattern(detector) else {
            continue;
        };
        for captures in pattern.captures_iter(rewritten) {
            let Some(whole) = captures.get(0) else {
                continue;
            };
            let (start, last) = (origin[whole.start()], origin[whole.end() - 1]);
            let end = last + text[last..].chars().next().map_or(1, char::len_utf8);
            if whole.as_str().bytes().any(|b| b.is_ascii_digit())
                && counts(start..end, whole.as_str())
                && (detector.confirms)(rewritten, &captures)
            {
                found.push(Finding {
                    kind: detector.kind,
                    span: start..end,
                    rank,
                });
            }
        }
    }
    found
}

/// The bytes of a match that hold the secret: its value group where the
/// pattern has one, else the whole match.
pub fn secret_span(found: &Captures<'_>) -> std::ops::Range<usize> {
    [
        "secret", "double", "single", "backtick", "corner", "argument", "bare",
    ]
    .into_iter()
    .find_map(|group| found.name(group))
    .or_else(|| found.get(0))
    .map_or(0..0, |matched| matched.range())
}
