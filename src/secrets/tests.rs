//! The detector on hand-written cases of each kind, and on prose and code
//! that must pass.

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
    assert_clean("See crates/engram_core/src/retrieval/hyde_reply.rs and tests/api/v2/retrieve.rs");
}

#[test]
fn urls_without_credentials_pass() {
    assert_clean("Docs at https://docs.rs/regex/1.11.1/regex/struct.Regex.html#method.captures");
    assert_clean("Staging runs on http://10.0.0.12:8080/api/v1/healthz");
    assert_clean("Remote is git@github.com:entrhq/forge.git or ssh://git@github.com/entrhq/forge");
    assert_clean("mailto:ana@example.com and https://example.com/path@section");
}

#[test]
fn commit_hashes_and_ids_in_urls_pass() {
    assert_clean(
        "Fixed in https://github.com/BurntSushi/ripgrep/commit/3f2a9b1c0d4e5f60718293a4b5c6d7e8f9012345",
    );
    assert_clean("GET /Repos/EngramTeam/memories/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d/Similar2");
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
    assert_clean("Use scikit-learn (sk-learn) for the risk-assessment-for-production-deploys job.");
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
    assert_clean("sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matches");
    assert_clean("memory ０１９３f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d was merged");
    assert_clean("3f2a 9b1c 0d4e 5f60 7182 93a4 b5c6 d7e8 f901 2345");
}

#[test]
fn a_refusal_names_the_kind_and_not_the_value() {
    let refused = ensure_no_secret("content", "password: hunter2").unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("password-assignment"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(ensure_no_secret("content", "We use a password manager").is_ok());
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

#[test]
fn a_secret_name_in_a_code_path_is_not_an_assignment() {
    // serde_test's tokens, as the registry's sources hold them.
    for code in [
        "    Token::Struct { name: \"Config\", len: 2 },",
        "    Token::Str(\"password\"),",
    ] {
        assert_clean(code);
    }
    // A real assignment beside it is still one.
    assert_secret(
        "Token::Str(\"a\"); password: hunter2",
        SecretKind::PasswordAssignment,
    );
}

#[test]
fn values_that_are_code_are_not_secrets() {
    // Lines of the registry's sources that were flagged.
    for code in [
        "    auth_token: Default::default(),",
        "password = config.password()",
        "let token = CancellationToken::new();",
        "let brace_token = braced!(content in input);",
        "let semi_token = input.parse::<Token![;]>()?;",
        "let union_token = input.parse::<Token![union]>()?;",
        "pwd: *mut passwd,",
        "semi_token: *semi,",
        "pub frag_token: __u32,",
        "use_class_token: bool,",
        "colon_token: Some,",
        "type Token = Self;",
        "pub const IFLA_INET6_TOKEN: _bindgen_ty_7 = _bindgen_ty_7::IFLA_INET6_TOKEN;",
        "let next_token = logits",
        "<Input as Stream>::Token: AsChar,",
        "pub(crate) fn new(cancellation_token: CancellationToken, future: F) -> Self {",
    ] {
        assert_clean(code);
    }
    // Literals beside them still count, in code and in prose.
    for text in [
        r#"password = "hunter2-real""#,
        r#"db_password: Some("hunter2-real".into()),"#,
        r#"token: String::from("Xk9mP2vLq7Rt5"),"#,
        r#"let password = "hunter2-real";"#,
        r#"const API_TOKEN: &str = "Xk9mP2vLq7Rt5";"#,
        r#"let password: String = "hunter2-real".into();"#,
        "Log in as ana (password: hunter22)",
        "Passwort: Geheim123!",
        "password: *hunter2*",
    ] {
        assert_secret(text, SecretKind::PasswordAssignment);
    }
}

#[test]
fn labels_that_name_themselves_are_stand_ins() {
    for code in [
        r#""access_token": "new-token", "refresh_token": "rotated-refresh-token","#,
        r#"client_secret: "client-secret-value".to_string(),"#,
        r#"pad_token: String::from("[PAD]"),"#,
        r#""unk_token": "[UNK]","#,
        r#"let new_token = format!("{part_a}{part_b}");"#,
    ] {
        assert_clean(code);
    }
    for text in [
        r#"client_secret: "Client-Secret-2024!".to_string(),"#,
        r#"client_secret="hunter2-but-longer""#,
        r#""access_token": "tok3n-Xk9mP2vLq7""#,
    ] {
        assert_secret(text, SecretKind::PasswordAssignment);
    }
}

#[test]
fn alphabets_constants_and_test_vectors_are_not_random_tokens() {
    for text in [
        r#"Alphabet::new("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")"#,
        r#""./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","#,
        "NL80211_RATE_INFO_EHT_RU_ALLOC_3x996P484 = 14,",
        "let numbered = 0x00112233_44556677_8899AABB_CCDDEEFF;",
        // Base64 of the bytes 0, 1, 2, …, and a line cut from its middle.
        r#""AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7P","#,
        r"D0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn8\",
        // Base64 of "foobarbazquxquuxcorgegraultgarplyz".
        r#""Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5eg==","#,
    ] {
        assert_clean(text);
    }
    // Random tokens of the same alphabets are still found.
    for token in [
        fake(BASE64, 64, 40),
        format!("{}_{}", fake(BASE62, 20, 41), fake(BASE62, 19, 42)),
        format!("0x{}", fake(BASE62, 40, 43)),
    ] {
        assert_secret(&format!("key {token}"), SecretKind::HighEntropyToken);
    }
}
