//! OAuth access tokens: a JWT from the configured authorization server,
//! checked (signature by one of its published keys, `iss`, `aud`, `exp`,
//! `nbf`, with `auth.oauth.leeway_s` of clock skew) and turned into the
//! [`Caller`] it grants: the repos and users of its grants claim, else of
//! its scopes, and the user its `user_claim` names.
//!
//! Only asymmetric signatures are accepted ([`ALGORITHMS`]): a token
//! signed with a shared secret (`HS256`), or with `none`, is refused
//! before any key is looked at, so a public key can never be used as an
//! HMAC secret.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde_json::{Map, Value};

use super::issuer::{IssuerKeys, KeyError};
use super::{Caller, Grant, Owners};
use crate::config;
use crate::memory::UserId;

/// The signatures accepted: RSA (PKCS #1 and PSS) and ECDSA.
const ALGORITHMS: [Algorithm; 7] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
];

/// Why a token was not accepted.
#[derive(Debug)]
pub enum Refusal {
    /// The token is not valid here: the client should get another.
    Invalid(String),
    /// The issuer's keys could not be had, so no token can be checked.
    KeysUnavailable(String),
}

/// The configured authorization server's tokens, and how to read them.
pub struct Tokens {
    config: config::OAuth,
    keys: IssuerKeys,
}

impl Tokens {
    pub fn new(config: &config::OAuth) -> Self {
        Self {
            keys: IssuerKeys::new(&config.issuer, Duration::from_secs(config.keys_cooldown_s)),
            config: config.clone(),
        }
    }

    /// The caller `token` stands for, once it is checked.
    pub async fn caller(&self, token: &str) -> Result<Caller, Refusal> {
        let invalid = |why: String| Refusal::Invalid(why);
        let header =
            decode_header(token).map_err(|_| invalid("the token is not a JWT".to_owned()))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(invalid(format!(
                "tokens signed with {:?} are not accepted (RS256, ES256 and the like are)",
                header.alg
            )));
        }
        let key = self
            .keys
            .key(header.kid.as_deref())
            .await
            .map_err(|err| match err {
                KeyError::Unknown(why) => Refusal::Invalid(why),
                KeyError::Unavailable(why) => Refusal::KeysUnavailable(why),
            })?;
        let decoding = signing_key(&key, header.alg).map_err(invalid)?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = self.config.leeway_s;
        let claims = decode::<Map<String, Value>>(token, &decoding, &validation)
            .map_err(|err| invalid(self.describe(err.kind())))?
            .claims;
        self.grant(&claims).map_err(invalid)
    }

    /// What a failed check means, in words a person reading the log or
    /// the client's error can act on.
    fn describe(&self, kind: &ErrorKind) -> String {
        match kind {
            ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
            ErrorKind::ImmatureSignature => "the token is not valid yet (`nbf`)".to_owned(),
            ErrorKind::InvalidIssuer => {
                format!("the token's issuer (`iss`) is not {}", self.config.issuer)
            }
            ErrorKind::InvalidAudience => format!(
                "the token's audience (`aud`) does not name {} (ask for it as the `resource`)",
                self.config.audience
            ),
            ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
            ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
            other => format!("the token could not be checked: {other:?}"),
        }
    }

    /// The caller a checked token's claims grant.
    fn grant(&self, claims: &Map<String, Value>) -> Result<Caller, String> {
        let mut grant = match claims.get(&self.config.grants_claim) {
            Some(granted) => from_grants_claim(granted).ok_or_else(|| {
                format!(
                    "the token's `{}` claim must be an object of `repos` and `users` lists",
                    self.config.grants_claim
                )
            })?,
            None => from_scopes(claims),
        };
        let user = match &self.config.user_claim {
            None => None,
            Some(claim) => {
                let user = claims
                    .get(claim)
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("the token has no `{claim}` claim naming its user"))?
                    .parse::<UserId>()
                    .map_err(|_| format!("the token's `{claim}` claim is not a valid user id"))?;
                if let Owners::Only(users) = &mut grant.users {
                    users.insert(user.as_str().to_owned());
                }
                Some(user)
            }
        };
        Ok(Caller::new(Arc::new(grant), user))
    }
}

/// A key usable for `alg`: one the issuer marks for signatures (or does
/// not mark), whose own `alg`, when it names one, is the token's.
fn signing_key(key: &Jwk, alg: Algorithm) -> Result<DecodingKey, String> {
    if matches!(
        key.common.public_key_use,
        Some(ref used) if *used != PublicKeyUse::Signature
    ) {
        return Err("the token's key is not published for signatures".to_owned());
    }
    if let Some(key_alg) = key.common.key_algorithm
        && format!("{key_alg:?}") != format!("{alg:?}")
    {
        return Err(format!(
            "the token is signed with {alg:?} by a key published for {key_alg:?}"
        ));
    }
    DecodingKey::from_jwk(key).map_err(|err| format!("the token's key cannot be read: {err}"))
}

/// `{"repos": [...], "users": [...]}`; a list left out grants nothing.
fn from_grants_claim(granted: &Value) -> Option<Grant> {
    let granted = granted.as_object()?;
    let owners = |field: &str| -> Option<Owners> {
        match granted.get(field) {
            None => Some(Owners::Only(HashSet::new())),
            Some(list) => {
                let list = list
                    .as_array()?
                    .iter()
                    .map(|owner| owner.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()?;
                Some(Owners::from_list(&list))
            }
        }
    };
    Some(Grant {
        repos: owners("repos")?,
        users: owners("users")?,
    })
}

/// The grant of a token's scopes: `repo:<id>` and `user:<id>` (`*` for
/// all), from `scope` (RFC 9068, space-separated) or `scp` (a string or a
/// list, as some servers write it).
fn from_scopes(claims: &Map<String, Value>) -> Grant {
    let mut repos = Vec::new();
    let mut users = Vec::new();
    let words = ["scope", "scp"]
        .iter()
        .filter_map(|claim| claims.get(*claim))
        .flat_map(|value| match value {
            Value::String(text) => text.split_whitespace().map(str::to_owned).collect(),
            Value::Array(list) => list
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        });
    for scope in words {
        if let Some(repo) = scope.strip_prefix("repo:") {
            repos.push(repo.to_owned());
        } else if let Some(user) = scope.strip_prefix("user:") {
            users.push(user.to_owned());
        }
    }
    Grant {
        repos: Owners::from_list(&repos),
        users: Owners::from_list(&users),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claims(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(claims) => claims,
            other => panic!("claims are an object, not {other}"),
        }
    }

    #[test]
    fn scopes_grant_repos_and_users_and_nothing_else() {
        let grant = from_scopes(&claims(
            json!({"scope": "openid repo:forge user:ana email"}),
        ));
        assert_eq!(grant.repos, Owners::from_list(&["forge".into()]));
        assert_eq!(grant.users, Owners::from_list(&["ana".into()]));
        let listed = from_scopes(&claims(json!({"scp": ["repo:*", "user:bob"]})));
        assert_eq!(listed.repos, Owners::All);
        assert_eq!(listed.users, Owners::from_list(&["bob".into()]));
        let none = from_scopes(&claims(json!({"scope": "openid"})));
        assert_eq!(none.repos, Owners::Only(HashSet::new()));
    }

    #[test]
    fn a_grants_claim_reads_like_an_api_keys_grant() {
        let grant = from_grants_claim(&json!({"repos": ["forge", "web"], "users": ["*"]})).unwrap();
        assert_eq!(
            grant.repos,
            Owners::from_list(&["forge".into(), "web".into()])
        );
        assert_eq!(grant.users, Owners::All);
        let repos_only = from_grants_claim(&json!({"repos": ["forge"]})).unwrap();
        assert_eq!(repos_only.users, Owners::Only(HashSet::new()));
        assert!(from_grants_claim(&json!(["forge"])).is_none());
        assert!(from_grants_claim(&json!({"repos": [1]})).is_none());
    }
}
