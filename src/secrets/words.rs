//! The words a password is named by, language by language: one row per
//! language in [`LANGUAGES`], from which the detectors' patterns are
//! built. A new language is one row.
//!
//! Each row holds regex fragments: the words for a password (ASCII
//! spellings of accented words beside the accented ones), the words that
//! say its value follows ("is", "ist", "是"), and the small words that
//! start a qualifier between the two ("for" in "the password for the
//! staging db is …", "del" in "la contraseña del servidor es …").

/// How a language puts its words together.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// Words stand apart by spaces: "das Passwort ist …".
    Spaced,
    /// Particles and values may touch the word: "密码是…", "パスワードは…",
    /// "비밀번호는 …".
    Unspaced,
}

/// One language's words.
pub struct Language {
    pub script: Script,
    /// Words for a password.
    pub passwords: &'static [&'static str],
    /// Words that say the password's value follows.
    pub is: &'static [&'static str],
    /// Words that start a qualifier between the name and `is`.
    pub of: &'static [&'static str],
}

/// English, German, Dutch, Norwegian and Danish, Swedish, Finnish,
/// Portuguese, French, Spanish, Italian, Polish, Czech, Hungarian,
/// Turkish, Russian, Greek, Chinese, Japanese and Korean.
pub const LANGUAGES: &[Language] = &[
    spaced(
        &[r"pass[ \t]?word", "passphrase"],
        &[r"is[ \t]+now", r"(?:set|changed)[ \t]+to", "is", "was"],
        &["for", "of", "on"],
    ),
    spaced(
        &["passwort", "kennwort"],
        &["ist", "lautet", "war"],
        &["für", "fuer", "des", "der", "vom", "zum", "zur", "von"],
    ),
    spaced(&["wachtwoord"], &["is", "was"], &["voor", "van"]),
    spaced(&["passord", "adgangskode"], &["er", "var"], &["for", "til"]),
    spaced(&["lösenord", "losenord"], &["är", "var"], &["för", "till"]),
    spaced(&["salasana"], &["on"], &[]),
    spaced(
        &["senha", "palavra-passe"],
        &["é", "era"],
        &["do", "da", "de", "para"],
    ),
    spaced(
        &[r"mot[ \t]de[ \t]passe"],
        &["est", "était"],
        &["du", "de", "des", "pour"],
    ),
    spaced(
        &["contraseña", "contrasena"],
        &["es", "era"],
        &["del", "de", "para"],
    ),
    spaced(&[], &["è", "era"], &["del", "della", "dello", "di", "per"]),
    spaced(&["hasło", "haslo"], &["jest"], &["do", "dla"]),
    spaced(&["heslo"], &["je"], &["k", "do", "pro"]),
    spaced(&["jelszó", "jelszo"], &[], &[]),
    spaced(&["şifre", "sifre"], &[], &[]),
    spaced(&["пароль"], &["это"], &["от", "для"]),
    spaced(&["κωδικός"], &["είναι"], &[]),
    unspaced(&["密码", "密碼"], &["是", "为", "為"]),
    unspaced(&["パスワード"], &["は", "が"]),
    unspaced(&["비밀번호"], &["는", "은"]),
];

/// Short names that count only in assignments, and only as part of a
/// longer name or in capitals (`DB_PASS`, `MYSQL_PWD`): "tests pass" and
/// "the pass is …" are prose.
pub const SHORT_PASSWORD_NAMES: &str = "passwd|pass|pwd";

const fn spaced(
    passwords: &'static [&'static str],
    is: &'static [&'static str],
    of: &'static [&'static str],
) -> Language {
    Language {
        script: Script::Spaced,
        passwords,
        is,
        of,
    }
}

const fn unspaced(passwords: &'static [&'static str], is: &'static [&'static str]) -> Language {
    Language {
        script: Script::Unspaced,
        passwords,
        is,
        of: &[],
    }
}

/// The password words written in ASCII (`ascii`) or with letters beyond
/// it, of the languages written in `script` (`None`: every language), as
/// one alternation. ASCII words are matched ASCII case-insensitively,
/// which is cheap; the others with Unicode case folding.
pub fn password_words(script: Option<Script>, ascii: bool) -> String {
    alternation(
        script,
        |language| language.passwords,
        |word| word.is_ascii() == ascii,
    )
}

/// The words saying a value follows, of the languages written in `script`.
pub fn is_words(script: Script) -> String {
    alternation(Some(script), |language| language.is, |_| true)
}

/// The words that start a qualifier, of every language.
pub fn of_words() -> String {
    alternation(None, |language| language.of, |_| true)
}

fn alternation(
    script: Option<Script>,
    words: impl Fn(&Language) -> &'static [&'static str],
    keep: impl Fn(&str) -> bool,
) -> String {
    let mut all: Vec<&str> = LANGUAGES
        .iter()
        .filter(|language| script.is_none_or(|script| language.script == script))
        .flat_map(|language| words(language).iter().copied())
        .filter(|word| keep(word))
        .collect();
    // Longest first, so that `is now` is tried before `is`, `des` before
    // `de` (the first alternative that lets the pattern match is taken).
    all.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    all.dedup();
    all.join("|")
}
