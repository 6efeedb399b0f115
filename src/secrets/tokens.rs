//! Whether a long run of token characters is a random secret, or one of
//! the random-looking things ordinary text holds: commit hashes, UUIDs,
//! identifiers, paths, ids in URLs, package integrity hashes
//! (`sha512-…`), image digests and `data:` URIs, SSH public keys and IPFS
//! content ids ([`public_ids`](super::public_ids)), and the test data of
//! code: alphabets written out, constant names, and base64 of counting
//! bytes or of words.

use regex::Captures;

use super::encoded::decode_base64;
use super::public_ids::is_public_id;
use super::values::secret;

/// The shortest run judged as a generic token.
const MIN_TOKEN_CHARS: usize = 32;

/// Bits per character from which a token counts as random. 32 random base62
/// characters almost always score above 4.0; hex cannot (16 symbols).
const MIN_TOKEN_ENTROPY: f64 = 4.0;

/// Prefixes of a run that make it a digest: Subresource Integrity and npm
/// `integrity` (`sha512-…`), Nix, and Go's `go.sum` (`h1:…`).
const DIGEST_PREFIXES: [&str; 5] = ["sha1-", "sha256-", "sha384-", "sha512-", "md5-"];

/// What ends a word before a run: where a URL or a `data:` URI would start.
/// Not commas: a `data:` URI holds one before its content.
const WORD_DELIMITERS: [char; 9] = ['"', '\'', '`', '<', '>', '(', ')', '[', ']'];

/// Whether a run of token characters is random rather than an identifier,
/// a path or an id. Random base62 and base64 tokens of this length hold
/// uppercase, lowercase and digits, score high on entropy and rarely put two
/// lowercase letters side by side. Hex (commit hashes) and UUIDs are single
/// case; `snake_case`, paths and `SCREAMING_CASE` lack a case; `camelCase`
/// identifiers are mostly lowercase pairs. Of 10,000 generated base62 or
/// base64 tokens, 0.4% of 32-character and 0.07% of 40-character ones pass.
///
/// Random tokens inside URLs, digests and `data:` URIs are ids and
/// content, not secrets; a URL's secrets are found by their own detectors
/// (its password, a query value under a secret's name, webhook URLs).
pub fn secret_is_random_token(text: &str, found: &Captures<'_>) -> bool {
    // A commit hash or UUID in a URL path would otherwise lend its digits
    // and entropy to the mixed-case path around it.
    let run = secret(found);
    let telling: Vec<&str> = run
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
        && !is_alphabet_run(bytes)
        && !is_constant_name(&token)
        && !encodes_a_pattern(&token)
        && !is_public_id(run)
        && found
            .get(0)
            .is_none_or(|run| !in_benign_context(text, run.range()))
}

/// Whether the run at `run` is a digest, or sits in a URL or a `data:`
/// URI. Only runs that already look random get here, so the cost of
/// looking back does not matter.
fn in_benign_context(text: &str, run: std::ops::Range<usize>) -> bool {
    let (start, end) = (run.start, run.end);
    let run = &text[start..end];
    let is_digest = DIGEST_PREFIXES.iter().any(|prefix| {
        run.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    });
    let before = &text[..start];
    let word = before
        .char_indices()
        .rev()
        .find(|&(_, c)| c.is_whitespace() || WORD_DELIMITERS.contains(&c))
        .map_or(before, |(at, c)| &before[at + c.len_utf8()..]);
    let labelled_digest = ["sha256:", "sha512:", "h1:"]
        .iter()
        .any(|label| word.to_ascii_lowercase().ends_with(label));
    // The word through the run's end: the run may hold the end of a host
    // (`com/owner/repo/…` after `github.`).
    let word = &text[start - word.len()..end];
    is_digest || labelled_digest || is_url_or_data(word)
}

/// The start of a word that reaches the run: a URL (`scheme://…`, or a host
/// and a path such as `github.com/…`) or a `data:` URI.
fn is_url_or_data(word: &str) -> bool {
    if word.contains("://") || word.starts_with("data:") {
        return true;
    }
    // `host.tld/…`: a dotted host of letters, digits and dashes, then a path.
    word.split_once('/').is_some_and(|(host, _)| {
        let host = host.split_once(':').map_or(host, |(name, _)| name);
        let labels: Vec<&str> = host.split('.').collect();
        labels.len() >= 2
            && labels.iter().all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
            && labels
                .last()
                .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_alphabetic()))
    })
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

/// An alphabet written out (`ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef…0123456789+/`,
/// bcrypt's `./0123…`): at least half of adjacent pairs are consecutive
/// characters, which in a random token about one pair in 62 is.
fn is_alphabet_run(bytes: &[u8]) -> bool {
    let pairs = bytes.len().saturating_sub(1);
    let consecutive = bytes
        .windows(2)
        .filter(|pair| pair[0].checked_add(1) == Some(pair[1]))
        .count();
    consecutive * 2 >= pairs
}

/// A `SCREAMING_SNAKE_CASE` constant with a lowercase letter in it
/// (`NL80211_RATE_INFO_EHT_RU_ALLOC_3x996P484`), or a hex number with
/// separators (`0x00112233_44556677_8899AABB_CCDDEEFF`): four words or
/// more, all but one in capitals and digits. Base64url tokens hold an underscore in
/// 64 characters, and their pieces mix cases.
fn is_constant_name(token: &str) -> bool {
    let words: Vec<&str> = token.split('_').collect();
    let capitals = words
        .iter()
        .filter(|word| !word.is_empty() && !word.bytes().any(|b| b.is_ascii_lowercase()))
        .count();
    words.len() >= 4 && capitals + 1 >= words.len()
}

/// Base64 of a test pattern rather than of random bytes: of counting
/// bytes (`AAECAwQFBgcICQoL…` is 0, 1, 2, 3, …) or of words
/// (`Zm9vYmFyYmF6…` is "foobarbaz…"). A line may cut the base64 anywhere,
/// so each of the four alignments is tried.
fn encodes_a_pattern(token: &str) -> bool {
    let token = token.trim_end_matches('=');
    (0..4).filter_map(|skip| token.get(skip..)).any(|aligned| {
        let whole = &aligned[..aligned.len() / 4 * 4];
        decode_base64(whole).is_some_and(|bytes| {
            let pairs = bytes.len().saturating_sub(1);
            let counting = bytes
                .windows(2)
                .filter(|pair| pair[0].wrapping_add(1) == pair[1])
                .count();
            let words = bytes.iter().all(u8::is_ascii_graphic) && reads_like_words(&bytes);
            pairs > 0 && (counting * 2 >= pairs || words)
        })
    })
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
