//! The detector and [`redact`] on the fixture files
//! (`tests/fixtures/secrets/`): every secret caught and hidden, every
//! ordinary line passed through unchanged.

use super::*;

const SECRETS: &str = include_str!("../../tests/fixtures/secrets/secrets.txt");
const BENIGN: &str = include_str!("../../tests/fixtures/secrets/benign.txt");

/// A fixture's lines without comments and blank lines.
fn lines(fixture: &str) -> impl Iterator<Item = &str> {
    fixture
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
}

/// A secret line's text (markers out) and the values it marks.
fn marked(line: &str) -> (String, Vec<&str>) {
    let values = line
        .split('«')
        .skip(1)
        .filter_map(|rest| rest.split_once('»').map(|(value, _)| value))
        .collect();
    (line.replace(['«', '»'], ""), values)
}

#[test]
fn every_fixture_secret_is_found() {
    let missed: Vec<String> = lines(SECRETS)
        .map(|line| marked(line).0)
        .filter(|text| find_secret(text).is_none())
        .collect();
    assert!(missed.is_empty(), "missed: {missed:#?}");
}

#[test]
fn every_fixture_secret_is_redacted() {
    for line in lines(SECRETS) {
        let (text, values) = marked(line);
        assert!(!values.is_empty(), "no marked value in {line:?}");
        let redacted = redact(&text);
        for value in values {
            assert!(
                !redacted.contains(value),
                "{value:?} survives in {redacted:?}"
            );
        }
        assert!(redacted.contains("[secret: "), "{redacted:?}");
    }
}

#[test]
fn every_benign_fixture_line_passes() {
    let flagged: Vec<(SecretKind, &str)> = lines(BENIGN)
        .filter_map(|line| find_secret(line).map(|kind| (kind, line)))
        .collect();
    assert!(flagged.is_empty(), "flagged: {flagged:#?}");
}

#[test]
fn benign_text_is_not_redacted() {
    for line in lines(BENIGN) {
        assert!(matches!(redact(line), Cow::Borrowed(_)), "{line:?}");
    }
}

#[test]
fn the_placeholder_names_the_kind_and_keeps_the_rest() {
    assert_eq!(
        redact("use AKIAIOSFODNN7EXAMPLE for the bucket"),
        "use [secret: aws-access-key-id] for the bucket"
    );
    assert_eq!(
        redact("DB_PASSWORD=hunter2 and user ana"),
        "DB_PASSWORD=[secret: password-assignment] and user ana"
    );
    assert_eq!(
        redact("postgres://app:S3cr3t-pw@db:5432/app"),
        "postgres://app:[secret: password-in-url]@db:5432/app"
    );
}

#[test]
fn several_secrets_in_one_text_are_each_redacted() {
    let text = "first AKIAIOSFODNN7EXAMPLE\nthen password: hunter22\nlast line";
    assert_eq!(
        redact(text),
        "first [secret: aws-access-key-id]\nthen password: [secret: password-assignment]\nlast line"
    );
}

#[test]
fn a_private_key_block_is_redacted_to_its_end() {
    let text = "key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----\nafter";
    assert_eq!(redact(text), "key:\n[secret: private-key]\nafter");
}

#[test]
fn a_spaced_out_key_is_redacted_whole() {
    assert_eq!(
        redact("id: A K I A I O S F O D N N 7 E X A M P L E ok"),
        "id: [secret: aws-access-key-id] ok"
    );
}

#[test]
fn the_urls_issue_31_reports_pass() {
    let refused_before =
        "https://newsela.com/view/ck9nooli207bl0iqjfex92s37/?levelId=ck7ecxfee12lx14p7a1gbl5ir";
    assert_eq!(find_secret(refused_before), None);
}

#[test]
fn a_token_in_a_url_query_under_a_secret_name_is_found() {
    assert_eq!(
        find_secret("https://api.example.com/v1/export?format=csv&token=9fKq2LmX7vRtQ"),
        Some(SecretKind::SecretInUrlQuery)
    );
    assert_eq!(
        find_secret("https://api.example.com/v1/export?format=csv&levelId=9fKq2LmX7vRtQ"),
        None
    );
}

#[test]
fn multi_word_password_names_start_a_word() {
    assert_eq!(
        find_secret("pass word: Sunshine2024!"),
        Some(SecretKind::PasswordAssignment)
    );
    assert_eq!(find_secret("bypass word: Sunshine2024!"), None);
}
