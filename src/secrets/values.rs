//! The second look at a value a pattern found after a name, a flag or in
//! a URL: whether it is a real value, or a stand-in (`<password>`, `***`,
//! a test's `new-token`), a reference (`${DB_PASSWORD}`,
//! `settings.db_password`), code (`Default::default()`, `*mut passwd`,
//! the type or expression of a declared name) or prose ("password: must
//! be long").

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// Values shorter than this are left alone after a name or flag: too short
/// to tell from prose such as "password: 12 characters".
const MIN_VALUE_CHARS: usize = 4;

/// Values said in prose ("the password is …") are judged from this length.
const MIN_PROSE_VALUE_CHARS: usize = 6;

/// Random hex of 32 digits or more uses at least this many of the sixteen
/// (fewer than one in a million such values does not).
const MIN_HEX_DISTINCT_DIGITS: usize = 10;

/// URL query values under a secret's name are judged from this length:
/// shorter ones are codes and flags (`?code=200`, `?auth=1`).
const MIN_QUERY_VALUE_CHARS: usize = 8;

/// Template and variable references that stand for a password:
/// `$DB_PASSWORD`, `${DB_PASSWORD}`, `%DB_PASSWORD%`, `<password>`,
/// `{{ .Values.password }}`, `{part_a}{part_b}`, and a tokenizer's
/// special tokens (`[PAD]`).
static PLACEHOLDER_REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%|<[^>]*>|\{\{.*\}\}|(?:\{[A-Za-z_][A-Za-z0-9_.]*\})+|\[[A-Z_]+\])$")
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

/// Bare values that are code rather than a password: Rust's primitive
/// types (also the kernel's `__u32`) and `Some`, which syn's test output
/// prints alone (`colon_token: Some,`).
const CODE_WORDS: &[&str] = &[
    "Some", "Self", "self", "bool", "char", "str", "usize", "isize", "u8", "u16", "u32", "u64",
    "u128", "i8", "i16", "i32", "i64", "i128", "f32", "f64",
];

/// Keywords that declare a name in code (Rust, and the like in other
/// languages): a type or an expression follows it, not a literal secret.
const DECLARATION_KEYWORDS: &[&str] = &[
    "let",
    "mut",
    "const",
    "static",
    "pub",
    "pub(crate)",
    "pub(super)",
    "var",
    "val",
];

pub fn any_match(_: &str, _: &Captures<'_>) -> bool {
    true
}

/// The `secret` group, or the whole match for patterns without one.
pub fn secret<'t>(found: &Captures<'t>) -> &'t str {
    found
        .name("secret")
        .or_else(|| found.get(0))
        .map_or("", |matched| matched.as_str())
}

pub fn secret_looks_random(_: &str, found: &Captures<'_>) -> bool {
    mixes_character_classes(secret(found))
}

/// An AWS access key id as AWS prints it, or split into groups; split, it
/// must hold a digit, as nearly every random id does and words do not
/// (`ASIA-PACIFIC-…`).
pub fn aws_key_id_is_real(_: &str, found: &Captures<'_>) -> bool {
    let id = secret(found);
    !id.contains(['-', '_', '.']) || id.bytes().any(|b| b.is_ascii_digit())
}

/// An AWS access key id written backwards: as the split forms, it must
/// hold a digit, so that no capitalised word ending in `AIKA` counts.
pub fn reversed_aws_key_id_is_real(_: &str, found: &Captures<'_>) -> bool {
    secret(found).bytes().any(|b| b.is_ascii_digit())
}

/// A hex value named as a secret: random hex mixes digits and letters and
/// uses most of the sixteen digits; test patterns (`deadbeef` repeated,
/// counting bytes `000102…`) do not.
pub fn hex_secret_is_real(_: &str, found: &Captures<'_>) -> bool {
    let hex = secret(found).as_bytes();
    let mut seen = [false; 256];
    for &b in hex {
        seen[usize::from(b.to_ascii_lowercase())] = true;
    }
    let distinct = seen.iter().filter(|&&seen| seen).count();
    let counting = hex
        .chunks_exact(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .is_some_and(|bytes| {
            let steps = bytes
                .windows(2)
                .filter(|pair| pair[0].wrapping_add(1) == pair[1])
                .count();
            steps * 2 >= bytes.len().saturating_sub(1)
        });
    hex.iter().any(u8::is_ascii_digit)
        && hex.iter().any(u8::is_ascii_alphabetic)
        && distinct >= MIN_HEX_DISTINCT_DIGITS
        && !counting
}

pub fn url_password_is_real(_: &str, found: &Captures<'_>) -> bool {
    !is_placeholder(secret(found))
}

/// A URL query value under a secret's name: a literal that mixes cases or
/// letters and digits, as tokens do (`?token=${TOKEN}`, `?key=value` and
/// `?session_id=12345678` pass).
pub fn query_value_is_real(_: &str, found: &Captures<'_>) -> bool {
    let value = secret(found);
    mixes_character_classes(value) && is_literal(value, MIN_QUERY_VALUE_CHARS)
}

/// A user and a password said in words: the value must look like a
/// password (a digit or a symbol), as "user input and password hashing"
/// does not.
pub fn spoken_pair_is_real(text: &str, found: &Captures<'_>) -> bool {
    if quoted_value(found).is_some() {
        return judge_value(text, found);
    }
    found.name("bare").is_some_and(|bare| {
        let value = bare.as_str().trim_end_matches(['.', '!', '?']);
        has_digit_or_symbol(value) && is_literal(value, MIN_VALUE_CHARS)
    })
}

/// A value assigned to a secret's name is a secret whatever its entropy,
/// unless it is a stand-in, a reference, or (unquoted) reads as prose or
/// code: a bare word followed by more words ("password: must be long") or
/// by a call.
pub fn assigned_value_is_real(text: &str, found: &Captures<'_>) -> bool {
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
        // "pass word", "mot de passe": a name of several words starts one.
        _ if name.as_str().contains([' ', '\t']) => before.is_none_or(|c| !c.is_alphanumeric()),
        _ => true,
    };
    // `Token::Struct {`, `Password::new(…)`, `P::Token: Parse`: a path in
    // code, not a value.
    let is_path = text[name.end()..].starts_with("::") || text[..name.start()].ends_with("::");
    let declared_code = found.name("bare").is_some() && is_declared(text, name.start());
    name_stands && !is_path && !declared_code && judge_value(text, found)
}

/// A value said in prose is a secret when it looks like one (a digit or a
/// symbol) and ends its clause: "the password is 8-char minimum" is prose.
pub fn stated_value_is_real(text: &str, found: &Captures<'_>) -> bool {
    stated_value_ending(text, found, ends_clause)
}

/// [`stated_value_is_real`] in a language written without spaces, where an
/// ASCII value glued to its particle is the particle's complement however
/// the sentence goes on ("密码是Hunter2024 请记住"); one set apart by blanks
/// must still end its clause ("密码是 SHA256 哈希" is prose).
pub fn unspaced_value_is_real(text: &str, found: &Captures<'_>) -> bool {
    let touches_particle = found
        .name("bare")
        .is_some_and(|bare| !text[..bare.start()].ends_with([' ', '\t']));
    stated_value_ending(text, found, |text, at| {
        touches_particle || ends_clause(text, at)
    })
}

/// A stated value's verdict: quoted, any literal counts; bare, a literal
/// with a digit or a symbol counts where `ends` accepts what follows it.
fn stated_value_ending(
    text: &str,
    found: &Captures<'_>,
    ends: impl Fn(&str, usize) -> bool,
) -> bool {
    if let Some(quoted) = quoted_value(found) {
        return is_literal(quoted, MIN_PROSE_VALUE_CHARS);
    }
    found.name("bare").is_some_and(|bare| {
        let value = bare.as_str().trim_end_matches(['.', '!', '?']);
        ends(text, bare.end())
            && !value.bytes().all(|b| b.is_ascii_digit())
            && has_digit_or_symbol(value)
            && is_literal(value, MIN_PROSE_VALUE_CHARS)
    })
}

pub fn flag_value_is_real(text: &str, found: &Captures<'_>) -> bool {
    judge_value(text, found)
}

pub fn command_password_is_real(_: &str, found: &Captures<'_>) -> bool {
    found
        .name("bare")
        .is_some_and(|bare| is_literal(bare.as_str(), MIN_VALUE_CHARS))
}

/// The verdict on a value after a name or a flag. Quoted, any literal
/// counts; bare, a value with a digit or a symbol counts, and a plain word
/// counts where it ends the line or the entry (`password: swordfish`).
/// Numbers after a token's name are counts (`max_token = 4096`).
pub fn judge_value(text: &str, found: &Captures<'_>) -> bool {
    let counts_allowed = found
        .name("name")
        .is_some_and(|name| name.as_str().to_ascii_lowercase().ends_with("token"));
    let is_count = |value: &str| counts_allowed && value.bytes().all(|b| b.is_ascii_digit());
    if let Some(quoted) = quoted_value(found) {
        return !is_count(quoted) && is_literal(quoted, MIN_VALUE_CHARS);
    }
    found.name("bare").is_some_and(|bare| {
        // A call given a string is judged by the string (the pattern's
        // `argument`); given anything else, it computes the value
        // (`CancellationToken::new()`, `braced!(content in input)`).
        let rest = &text[bare.end()..];
        if rest.starts_with('(') {
            return false;
        }
        let value = bare.as_str().trim_end_matches('.');
        let macro_call = value.ends_with('!') && rest.starts_with(['[', '{']);
        !is_count(value)
            && !macro_call
            && !is_code(value)
            && (has_digit_or_symbol(value) || ends_entry(text, bare.end()))
            && is_literal(value, MIN_VALUE_CHARS)
    })
}

/// A bare value that is code, not a literal: a path (`token::Brace`,
/// `_bindgen_ty_7::IFLA_INET6_TOKEN`), a pointer or dereference
/// (`*mut passwd`, `*semi`), or a primitive type or `Some` (`__u32`,
/// `bool`, syn's `colon_token: Some,`).
fn is_code(value: &str) -> bool {
    let dereferenced = value
        .strip_prefix('*')
        .is_some_and(|name| !name.is_empty() && is_identifier(name));
    value.contains("::") || dereferenced || CODE_WORDS.contains(&value.trim_start_matches('_'))
}

fn is_identifier(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether the name at `name_start` is declared in code (`pub frag_token:
/// __u32`, `let next_token = logits`, `fn new(token: usize)`): what
/// follows is a type or an expression, so only a quoted literal can be a
/// secret.
fn is_declared(text: &str, name_start: usize) -> bool {
    let line_start = text[..name_start].rfind('\n').map_or(0, |at| at + 1);
    let line = &text[line_start..name_start];
    // The whole identifier the name ends (`frag_` of `frag_token`).
    let before = line.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    let keyword = before.trim_end();
    let declares = DECLARATION_KEYWORDS.iter().any(|word| {
        keyword
            .strip_suffix(word)
            .is_some_and(|rest| rest.is_empty() || rest.ends_with([' ', '\t', '(', '{', '<']))
    });
    // Not any parenthesis: "ana (password: hunter22)" is prose.
    let parameter = keyword.ends_with(['(', ',']) && line.contains("fn ");
    declares || parameter
}

fn quoted_value<'t>(found: &Captures<'t>) -> Option<&'t str> {
    found
        .name("double")
        .or_else(|| found.name("single"))
        .or_else(|| found.name("backtick"))
        .or_else(|| found.name("corner"))
        .or_else(|| found.name("argument"))
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
/// parenthesis, or text in another script follows it ("密码是Hunter2024。":
/// a bare value of a language written without spaces is ASCII alone).
fn ends_clause(text: &str, at: usize) -> bool {
    let value = &text[..at];
    let rest = &text[at..];
    value.ends_with(['.', '!', '?'])
        || ends_entry(text, at)
        || rest.starts_with(')')
        || rest.chars().next().is_some_and(|c| !c.is_ascii())
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
        || names_itself(value)
}

/// A lowercase label that says what it stands for (`new-token`,
/// `client-secret-value`, `test-m2m-secret`): a test's stand-in. A real
/// value with such a word mixes in capitals or symbols (`Secret2024!`).
fn names_itself(value: &str) -> bool {
    let words: Vec<&str> = value.split(['-', '_']).collect();
    words.len() >= 2
        && words.iter().all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        && words.iter().any(|word| {
            ["token", "secret", "password", "passwd", "key", "credential"].contains(word)
        })
}

/// At least two of lowercase, uppercase and digits: random tokens mix them,
/// while words, `SCREAMING_CASE` names and `xxxx` stand-ins do not.
pub fn mixes_character_classes(text: &str) -> bool {
    let classes = [
        text.bytes().any(|b| b.is_ascii_lowercase()),
        text.bytes().any(|b| b.is_ascii_uppercase()),
        text.bytes().any(|b| b.is_ascii_digit()),
    ];
    classes.into_iter().filter(|&present| present).count() >= 2
}
