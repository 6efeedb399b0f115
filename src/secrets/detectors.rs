//! The detectors: one pattern per shape of secret, most specific first,
//! each with a second look ([`Confirm`]) for what a pattern cannot say.
//! A detector's place in [`DETECTORS`] is its rank: of two findings of one
//! secret, the lower rank names it.

use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};

use super::tokens::secret_is_random_token;
use super::values::{
    any_match, assigned_value_is_real, aws_key_id_is_real, command_password_is_real,
    flag_value_is_real, judge_value, query_value_is_real, secret_looks_random, spoken_pair_is_real,
    stated_value_is_real, url_password_is_real,
};
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

/// Words for a password, matched ASCII case-insensitively: English (also
/// "pass word"), German, Dutch, Norwegian, Danish, Finnish, Portuguese,
/// French, Czech, and the ASCII spellings of Spanish, Swedish, Polish,
/// Hungarian and Turkish ones.
const PASSWORD_WORDS: &str = r"pass(?:[ \t]?word|wd|phrase)?|pwd|passwort|kennwort|wachtwoord|passord|adgangskode|salasana|senha|palavra-passe|mot[ \t]de[ \t]passe|contrasena|losenord|haslo|jelszo|sifre|heslo";

/// The same words in scripts or with letters beyond ASCII, matched with
/// Unicode case folding (few texts hold them, so the cost stays small).
const UNICODE_PASSWORD_WORDS: &str =
    r"contraseña|lösenord|hasło|jelszó|şifre|пароль|κωδικός|パスワード|密码|密碼|비밀번호";

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
    // A whole word: `Pass` must not stand for the start of `Passwort`.
    let password = format!("(?:(?i-u:{PASSWORD_WORDS})(?-u:\\b)|(?i:{UNICODE_PASSWORD_WORDS}))");
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
        // `DB_PASSWORD=…`, `"token": "…"`, `pwd := …`, `Passwort: …`,
        // `const API_TOKEN: &str = "…"`: the
        // name may end a longer one (`PGPASSWORD`, `client_secret`) or take
        // a `_key` or `_value` suffix, never another (`password_hash`,
        // `token_count`).
        detector(
            SecretKind::PasswordAssignment,
            &format!(
                r#"(?P<name>(?i-u:{PASSWORD_WORDS}|secret|token|credentials?|api[_-]?key|private[_-]?key)|(?i:{UNICODE_PASSWORD_WORDS}))(?i-u:[_-]?(?:key|value|string))?["']?[ \t]*(?:{TYPE_ANNOTATION}=|:=|==|[:=])[ \t]*{VALUE}"#
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
        // "the admin password is Sup3rS3cret!", "das Passwort ist …"; after
        // random tokens, which are the more telling label for a long value.
        detector(
            SecretKind::PasswordAssignment,
            &format!(
                r#"(?:(?-u:\b)(?i-u:pass(?:[ \t]?word|phrase)|secret|token|credentials?|api[ _-]?key|passwort|kennwort|wachtwoord|passord|adgangskode|salasana|senha|palavra-passe|mot[ \t]de[ \t]passe|contrasena|losenord|haslo|jelszo|sifre|heslo)|(?i:{UNICODE_PASSWORD_WORDS}))[ \t]+(?i:is[ \t]+now|(?:set|changed)[ \t]+to|is|was|ist|lautet|war|est|était|es|era|é|è|är|er|jest|je|это)[ \t]+{PROSE_VALUE}"#
            ),
            stated_value_is_real,
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

/// The bytes of a match that hold the secret: its value group where the
/// pattern has one, else the whole match.
pub fn secret_span(found: &Captures<'_>) -> std::ops::Range<usize> {
    ["secret", "double", "single", "backtick", "argument", "bare"]
        .into_iter()
        .find_map(|group| found.name(group))
        .or_else(|| found.get(0))
        .map_or(0..0, |matched| matched.range())
}
