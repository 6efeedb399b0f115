//! The detector on the shapes issue 44 found it missing or refusing:
//! passwords said in other languages or with a qualifier, logins split by
//! a slash, hex values named as secrets, a GCP key's id, AWS ids split
//! into literals or written backwards, look-alike letters in provider
//! keys, and the public keys and content ids that must pass.

use super::*;

fn assert_secret(text: &str, kind: SecretKind) {
    assert_eq!(find_secret(text), Some(kind), "{text:?}");
}

fn assert_clean(text: &str) {
    assert_eq!(find_secret(text), None, "{text:?}");
}

#[test]
fn passwords_said_in_languages_without_spaces_are_found() {
    for text in [
        "密码是Hunter2024",
        "服务器的密码是 Hunter2024!。",
        "密碼為Hunter2024，請保存",
        "パスワードはSakura2024です",
        "パスワードは「Sakura#2024」です",
        "비밀번호는 Bom2024! 입니다",
        "密码是Hunter2024 请记住",
        "密码是Hunter2024 helm release",
    ] {
        assert_secret(text, SecretKind::PasswordAssignment);
    }
}

#[test]
fn prose_about_passwords_in_languages_without_spaces_passes() {
    for text in [
        "密码是必填项",
        "密码是 6-12 位",
        "密码是 SHA256 哈希",
        "パスワードは8文字以上です",
        "パスワードは必須です",
        "비밀번호는 필수입니다",
    ] {
        assert_clean(text);
    }
}

#[test]
fn passwords_stated_with_a_qualifier_are_found() {
    for text in [
        "la contraseña del servidor es Verano2024!",
        "the password for the staging db is Sup3rS3cret!",
        "das Passwort für den Server ist Geheim123!",
        "le mot de passe du serveur est Soleil2024!",
        "a senha do banco é Carnaval2024!",
        "la password del server è Estate2024!",
    ] {
        assert_secret(text, SecretKind::PasswordAssignment);
    }
    for text in [
        "the password for the admin account is stored in the vault",
        "the password of each user is hashed with argon2.",
        "la contraseña del usuario es obligatoria.",
    ] {
        assert_clean(text);
    }
}

#[test]
fn a_user_and_password_after_a_login_word_are_found() {
    for text in [
        "login: admin / hunter22",
        "login with ana / S3cret!x",
        "log in as deploy / \"Deploy2024\"",
        "Username: ana / Winter2024!",
    ] {
        assert_secret(text, SecretKind::UserAndPassword);
    }
    for text in [
        "login: GET /api/session",
        "login: rust-lang/rust2024",
        "login with ana / password",
        "login with ana / <password>",
        "log in with SSO / OIDC",
    ] {
        assert_clean(text);
    }
}

#[test]
fn hex_values_named_as_secrets_are_found() {
    for text in [
        "auth token 9f86d081884c7d659a2feaa0c55ad015",
        "unseal key is 4b227777d4dd1fc61c6f884f48641d02",
        "Vault root token: 4b227777d4dd1fc61c6f884f48641d02",
        "the signing key 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    ] {
        assert_secret(text, SecretKind::PasswordAssignment);
    }
    for text in [
        "commit 9f86d081884c7d659a2feaa0c55ad015 fixed the token refresh",
        "public key 9f86d081884c7d659a2feaa0c55ad015",
        "auth token 000102030405060708090a0b0c0d0e0f",
        "auth token deadbeefdeadbeefdeadbeefdeadbeef",
        "key id 9f86d081884c7d659a2feaa0c55ad015",
    ] {
        assert_clean(text);
    }
}

#[test]
fn a_service_accounts_private_key_id_is_found() {
    assert_secret(
        r#""private_key_id": "26de294916614a5ebdf7a065307ed3ea9941902b","#,
        SecretKind::PasswordAssignment,
    );
    assert_clean("let token_id = 42;");
}

#[test]
fn an_aws_id_split_into_joined_literals_is_found() {
    for text in [
        r#"key = "AKIAIOSF" + "ODNN7EXAMPLE""#,
        r#"$key = 'AKIAIOSFODNN' . '7EXAMPLE';"#,
        r#"KEY = ("AKIAIOSFOD" "NN7EXAMPLE")"#,
        r#"local key = "AKIAIOSF" .. "ODNN7EXAMPLE""#,
    ] {
        assert_secret(text, SecretKind::AwsAccessKeyId);
    }
    assert_eq!(
        redact(r#"key = "AKIAIOSF" + "ODNN7EXAMPLE";"#),
        r#"key = "[secret: aws-access-key-id]";"#
    );
    assert_clean(r#"label = "AKIA" + " keys are AWS ids""#);
}

#[test]
fn an_aws_id_written_backwards_is_found() {
    assert_secret("reversed: ELPMAXE7NNDOFSOIAIKA", SecretKind::AwsAccessKeyId);
    assert_clean("THEBIGBOOKSOFMALAIKA is a title, not a key");
}

#[test]
fn provider_keys_with_look_alike_letters_are_found() {
    // A Cyrillic `р` in the prefix, a Greek `Α` and a Cyrillic `І`.
    assert_secret(
        "push with ghр_pzNNybuXMVp0OeCQVSVkZepp1U9NvGyxT5Lj",
        SecretKind::GitHubToken,
    );
    assert_secret("id ΑKІAIOSFODNN7EXAMPLE", SecretKind::AwsAccessKeyId);
    assert_secret(
        "key ѕk-ant-api03-2n02s4OjgllxLQIiTyYmciU2mrQvEpnKJ",
        SecretKind::AnthropicKey,
    );
    assert_eq!(
        redact("push with ghр_pzNNybuXMVp0OeCQVSVkZepp1U9NvGyxT5Lj now"),
        "push with [secret: github-token] now"
    );
}

#[test]
fn cyrillic_and_greek_prose_passes() {
    for text in [
        "Пароль должен быть длинным, а ключ храните в сейфе.",
        "Ο κωδικός πρέπει να έχει 12 χαρακτήρες.",
        "АКІА — так начинаются ключи AWS",
    ] {
        assert_clean(text);
    }
}

#[test]
fn ssh_public_keys_and_ipfs_content_ids_pass() {
    for text in [
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOGDEOgN7SLMHN/iI5vapv4eemnOQcMBwzZihdoQg8Yh ana@laptop",
        "authorized_keys: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOGDEOgN7SLMHN/iI5vapv4eemnOQcMBwzZihdoQg8Yh",
        "pinned at QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG on IPFS",
        "cid zdj7WWeQ43G6JJvLWQWZpyHuAMq6uYWRjkBXFad11vE2LHhQ7",
    ] {
        assert_clean(text);
    }
}

#[test]
fn random_tokens_shaped_like_public_ids_are_still_found() {
    // Opens with `AAAA` but decodes to no key type; `Qm` and 44 characters
    // of base58 that decode to no SHA-256 multihash header (`12 22…`).
    assert_secret(
        "key AAAAx7Whabt4pKQtAojP7NkBJusmpqG56RqMfOWdKSds",
        SecretKind::HighEntropyToken,
    );
    assert_secret(
        "token QmyNoVKf58ZTBqNAYT3j5qcdsyuMNmPfYetW5v6JXmj54o",
        SecretKind::HighEntropyToken,
    );
}
