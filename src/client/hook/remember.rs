//! `remember:` prompts: a prompt that asks Engram, in so many words, to
//! remember something becomes a memory with no model involved, written by
//! the prompt hook through `POST /memories` (so the secret guard and the
//! near-duplicate check apply, as for any explicit write).
//!
//! A prompt is a request when, after any leading whitespace, it starts
//! with `remember:` or `#remember` (ASCII case ignored), and `for me`
//! after the word makes it the user's memory instead of the project's:
//! `remember: …`, `remember for me: …`, `#remember …`, `#remember for me …`
//! (the colon is optional after `#remember`). Any other prompt, such as
//! "remember to run the tests", is a plain prompt.
//!
//! A project's memory is about the files it names that are in the working
//! tree: each word of it that could be a path ([`named_files`]) is looked
//! for as the tool calls' files are ([`touched`](super::touched)), and
//! the memory is anchored to those found, at the tree's `HEAD`.

use crate::memory::{Category, Scope};

/// An explicit request to remember `content`.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// `repo` for the project (`remember:`), `user` for `remember for me:`.
    pub scope: Scope,
    /// What follows the prefix, trimmed; may be empty.
    pub content: &'a str,
}

impl Request<'_> {
    /// The category the memory is filed under. No model reads the text,
    /// so the rule is the scope's, with one word looked for: the project's
    /// memories are its conventions; the user's are preferences when they
    /// say so ("prefer"), else facts about the user.
    pub fn category(&self) -> Category {
        match self.scope {
            Scope::Repo => Category::ProjectConventions,
            Scope::User if self.content.to_lowercase().contains("prefer") => {
                Category::CodingPreferences
            }
            Scope::User => Category::UserFacts,
        }
    }
}

/// `content` as the memory says it: the user's own first person at its
/// start ("I prefer …", "I'm …", "My …") told of the user ("The user
/// prefers …"), since an agent reads the memory later, and to it "I"
/// would be itself. Anything else is kept as written.
pub fn told_of_the_user(content: &str) -> String {
    let Some((first, rest)) = content.split_once(' ') else {
        return content.to_owned();
    };
    let subject = match first {
        "I" | "i" => "The user",
        "I'm" | "I’m" | "i'm" => return format!("The user is {rest}"),
        "I've" | "I’ve" => return format!("The user has {rest}"),
        "I'd" | "I’d" => return format!("The user would {rest}"),
        "My" | "my" => return format!("The user's {rest}"),
        _ => return content.to_owned(),
    };
    let mut told = subject.to_owned();
    let mut rest = rest;
    // "I always use …": the adverb stays, the verb after it agrees.
    while let Some((word, tail)) = rest.split_once(' ') {
        if !is_adverb(word) {
            break;
        }
        told.push(' ');
        told.push_str(word);
        rest = tail;
    }
    let (verb, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    let letters = verb.trim_end_matches(|c: char| !c.is_alphabetic());
    told.push(' ');
    told.push_str(&third_person(letters));
    told.push_str(&verb[letters.len()..]);
    if !tail.is_empty() {
        told.push(' ');
        told.push_str(tail);
    }
    told
}

fn is_adverb(word: &str) -> bool {
    word.ends_with("ly")
        || matches!(
            word,
            "always" | "never" | "often" | "also" | "still" | "just" | "sometimes" | "rather"
        )
}

/// `verb` as said of "the user" rather than by "I".
fn third_person(verb: &str) -> String {
    let vowel_before_y = verb
        .strip_suffix('y')
        .is_some_and(|stem| stem.ends_with(['a', 'e', 'i', 'o', 'u']));
    match verb {
        "am" => "is".to_owned(),
        "have" => "has".to_owned(),
        "don't" | "don’t" => "doesn't".to_owned(),
        "was" | "can" | "will" | "would" | "should" | "must" | "may" | "might" | "could" => {
            verb.to_owned()
        }
        _ if ["s", "x", "z", "o", "sh", "ch"]
            .iter()
            .any(|end| verb.ends_with(end)) =>
        {
            format!("{verb}es")
        }
        _ if verb.ends_with('y') && !vowel_before_y => {
            format!("{}ies", &verb[..verb.len() - 1])
        }
        _ => format!("{verb}s"),
    }
}

/// The request in `prompt`, if it is one.
pub fn parse(prompt: &str) -> Option<Request<'_>> {
    let text = prompt.trim_start();
    let (tagged, text) = match text.strip_prefix('#') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let rest = strip_word(text, "remember")?;
    let (scope, rest) = match for_me(rest) {
        Some(after) => (Scope::User, after),
        None => (Scope::Repo, rest),
    };
    let after_colon = rest.trim_start().strip_prefix(':');
    let content = match after_colon {
        Some(content) => content,
        // `#remember` needs no colon, but must end its word there.
        None if tagged && (rest.is_empty() || rest.starts_with(char::is_whitespace)) => rest,
        None => return None,
    };
    Some(Request {
        scope,
        content: content.trim(),
    })
}

/// The words of `content` that could name a file (a `/` or a `.` inside
/// them), without the quotes, brackets and punctuation around them, in
/// order: `src/db/pool.rs`, `` `Makefile.toml` ``, `(README.md)`.
pub fn named_files(content: &str) -> Vec<String> {
    content
        .split_whitespace()
        .map(|word| {
            // A path may start with `.` (`.github/`), never end with one.
            word.trim_start_matches(|c: char| !(c.is_alphanumeric() || "./_-".contains(c)))
                .trim_end_matches(|c: char| !(c.is_alphanumeric() || "/_-".contains(c)))
        })
        .filter(|word| word.contains(['/', '.']))
        .map(str::to_owned)
        .collect()
}

/// `text` past `word` (ASCII case ignored), when it starts with it.
fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let head = text.get(..word.len())?;
    head.eq_ignore_ascii_case(word).then(|| &text[word.len()..])
}

/// `text` past ` for me`, when that is what it starts with.
fn for_me(text: &str) -> Option<&str> {
    let text = strip_word(text.strip_prefix(char::is_whitespace)?.trim_start(), "for")?;
    let text = strip_word(text.strip_prefix(char::is_whitespace)?.trim_start(), "me")?;
    // "remember for merging: …" is not "for me".
    (!text.starts_with(char::is_alphanumeric)).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(prompt: &str) -> Option<(Scope, &str)> {
        parse(prompt).map(|request| (request.scope, request.content))
    }

    #[test]
    fn the_prefixes_are_read_in_any_case_after_leading_whitespace() {
        let fact = "we deploy with Helm";
        for prompt in [
            "remember: we deploy with Helm",
            "  Remember:we deploy with Helm ",
            "\n#remember we deploy with Helm",
            "#REMEMBER: we deploy with Helm",
            "#Remember\twe deploy with Helm",
        ] {
            assert_eq!(parsed(prompt), Some((Scope::Repo, fact)), "{prompt:?}");
        }
        for prompt in [
            "remember for me: we deploy with Helm",
            "REMEMBER  FOR  ME : we deploy with Helm",
            "#remember for me we deploy with Helm",
            " #Remember For Me: we deploy with Helm",
        ] {
            assert_eq!(parsed(prompt), Some((Scope::User, fact)), "{prompt:?}");
        }
    }

    #[test]
    fn other_prompts_are_not_requests() {
        for prompt in [
            "remember to run the tests",
            "Remember when we moved to Helm?",
            "#remembering: the old days",
            "remembered: yes",
            "remember for merging: squash",
            "please remember: this",
            "# remember: a heading",
            "",
            "rem",
            "rémember: x",
        ] {
            assert_eq!(parse(prompt), None, "{prompt:?}");
        }
    }

    #[test]
    fn a_request_may_be_empty() {
        assert_eq!(parsed("remember:"), Some((Scope::Repo, "")));
        assert_eq!(parsed("#remember"), Some((Scope::Repo, "")));
        assert_eq!(parsed("#remember for me"), Some((Scope::User, "")));
    }

    #[test]
    fn the_users_first_person_is_told_of_the_user() {
        for (said, told) in [
            (
                "I prefer table-driven tests",
                "The user prefers table-driven tests",
            ),
            ("I always use tabs", "The user always uses tabs"),
            ("I'm a backend developer", "The user is a backend developer"),
            ("My editor is Helix", "The user's editor is Helix"),
            ("I don't like mocks", "The user doesn't like mocks"),
            ("I push to a fork", "The user pushes to a fork"),
            ("I study Go", "The user studies Go"),
            ("I enjoy Rust", "The user enjoys Rust"),
            ("I prefer, always, tabs", "The user prefers, always, tabs"),
            ("tabs over spaces", "tabs over spaces"),
            ("Ideas go in docs/", "Ideas go in docs/"),
            ("I", "I"),
        ] {
            assert_eq!(told_of_the_user(said), told, "{said:?}");
        }
    }

    #[test]
    fn words_that_could_be_paths_are_the_files_a_request_names() {
        assert_eq!(
            named_files(
                "pool.rs (in `src/db/pool.rs`) connects lazily, see README.md. \
                 Not v1.2 twice: v1.2, nor words, nor ../up, /etc/hosts or \".github/ci.yml\"."
            ),
            [
                "pool.rs",
                "src/db/pool.rs",
                "README.md",
                "v1.2",
                "v1.2",
                "../up",
                "/etc/hosts",
                ".github/ci.yml"
            ]
        );
    }

    #[test]
    fn the_category_follows_the_scope_and_a_stated_preference() {
        let category = |prompt| parse(prompt).unwrap().category();
        assert_eq!(category("remember: tabs"), Category::ProjectConventions);
        assert_eq!(category("remember for me: I am Ana"), Category::UserFacts);
        assert_eq!(
            category("remember for me: I Prefer tabs"),
            Category::CodingPreferences
        );
    }
}
