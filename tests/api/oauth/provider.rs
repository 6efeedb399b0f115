//! A real OpenID provider for the OAuth tests: panva's `oidc-provider`
//! (the package `tests/oidc-provider`, with the Node release it
//! supports), run as a process on a free loopback port by
//! `tests/oidc-provider/provider.mjs`, issuing JWT access tokens through
//! its real endpoints: the client credentials grant, and the
//! authorization code flow with PKCE after dynamic client registration.
//! Without the package, the tests that need it are skipped
//! ([`Provider::start`] says why).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::helpers::{PATIENCE, npm_installed};

/// One client of the provider, as `provider.mjs` takes it.
pub struct Client {
    pub id: &'static str,
    /// `RS256` (the default), `ES256`, or `HS256` (signed with the
    /// client's secret, which Engram must refuse).
    pub alg: &'static str,
    /// The tokens' lifetime, in seconds.
    pub ttl: u64,
    /// Extra claims written into its tokens.
    pub claims: Value,
}

impl Client {
    pub fn new(id: &'static str) -> Self {
        Self {
            id,
            alg: "RS256",
            ttl: 600,
            claims: json!({}),
        }
    }

    pub fn alg(mut self, alg: &'static str) -> Self {
        self.alg = alg;
        self
    }

    pub fn ttl(mut self, ttl: u64) -> Self {
        self.ttl = ttl;
        self
    }

    pub fn claims(mut self, claims: Value) -> Self {
        self.claims = claims;
        self
    }
}

/// A running provider; stopped when dropped.
pub struct Provider {
    pub issuer: String,
    http: reqwest::Client,
    _process: Child,
}

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc-provider")
}

fn node() -> PathBuf {
    package_dir().join("node_modules/.bin/node")
}

/// The secret of every client: the tests' tokens come from the real
/// endpoint, not from the secret.
const SECRET: &str = "a-client-secret-long-enough-for-hs256-signing";

impl Provider {
    /// A provider with `clients`, signing with the keys in `keys` (made
    /// there when the file does not exist, so two providers given one
    /// file sign alike); `Err` says why it cannot run here.
    pub async fn start(keys: &Path, clients: &[Client]) -> Result<Self, String> {
        npm_installed(&node(), "oidc-provider", "oidc-provider/package.json")?;
        let settings = json!({
            "keys": keys,
            "clients": clients.iter().map(|client| json!({
                "client_id": client.id,
                "client_secret": SECRET,
                "alg": client.alg,
                "secret": SECRET,
                "ttl": client.ttl,
                "claims": client.claims,
            })).collect::<Vec<_>>(),
        });
        let mut process = Command::new(node())
            .arg("provider.mjs")
            .arg(settings.to_string())
            .current_dir(package_dir())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("{} does not start: {err}", node().display()))?;
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let issuer = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(issuer) = line.strip_prefix("listening ") {
                    return issuer.to_owned();
                }
            }
            panic!("the OpenID provider stopped before it listened");
        })
        .await
        .expect("the OpenID provider listens");
        // Whatever it writes later is read, so it never writes into a
        // closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            issuer,
            http: reqwest::Client::new(),
            _process: process,
        })
    }

    /// An access token for `client`, through the client credentials grant,
    /// for `resource` (its audience, RFC 8707) with `scope`.
    pub async fn token(&self, client: &str, resource: &str, scope: &str) -> String {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "client_credentials")
            .append_pair("resource", resource)
            .append_pair("scope", scope)
            .finish();
        let answer: Value = self
            .http
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(SECRET))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token for {client}: {answer}"))
            .to_owned()
    }

    /// An access token for `login`, got as a remote MCP client gets one
    /// (`tests/oidc-provider/authorize.mjs`): dynamic client
    /// registration, the authorization code flow with PKCE for `resource`
    /// and `scope`, the person signing in and consenting on the
    /// provider's own forms.
    pub async fn authorize(&self, resource: &str, scope: &str, login: &str) -> String {
        let output = Command::new(node())
            .arg("authorize.mjs")
            .args([self.issuer.as_str(), resource, scope, login])
            .current_dir(package_dir())
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "the authorization code flow failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// New signing keys (new `kid`s), the old ones no longer published.
    pub async fn rotate_keys(&self) {
        let status = self
            .http
            .post(format!("{}/test/rotate", self.issuer))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 204);
    }
}
