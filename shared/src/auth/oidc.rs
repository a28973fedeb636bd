//! OIDC users: a bearer JWT signed by the configured issuer becomes a user principal.
//!
//! The signature is checked against the issuer's published keys (`jwks`), then `iss`, `aud`,
//! `exp` and `nbf` (with a minute of leeway for clock skew). Only asymmetric algorithms are
//! accepted, and only with a key of the matching type: never `none`, never HMAC, whose secret
//! would be the public key. Refused tokens are 401s with one fixed message; the reason goes to
//! the debug log, and neither ever contains the token.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::jwks::{Jwks, JwksError, JwksSource, KeyLookup};
use crate::cache::Cache;
use crate::error::CatalogError;
use crate::model::{Principal, PrincipalKind};

/// Algorithms a token may be signed with. The key set decides which key serves which.
const ACCEPTED: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// Clock skew tolerated on `exp` and `nbf`.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
const CACHE_ENTRIES: u64 = 10_000;
/// Headers are a few hundred bytes; anything much larger is not worth decoding.
const MAX_HEADER_CHARS: usize = 8 * 1024;

/// The message of every refused token: the reason is logged, not told.
const REFUSED: &str = "Invalid or expired token";

/// Where tokens come from and whom they must be for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// The `iss` claim, exactly as the issuer writes it.
    pub issuer: String,
    /// The `aud` Floe's tokens carry (the client id, or an API identifier).
    pub audience: String,
    pub jwks: JwksSource,
}

/// A setting that cannot start OIDC.
#[derive(Debug, thiserror::Error)]
pub enum OidcConfigError {
    #[error(
        "FLOE_OIDC_ISSUER is set but FLOE_OIDC_AUDIENCE is not: tokens must be checked for their audience"
    )]
    MissingAudience,
    #[error(
        "FLOE_OIDC_ISSUER is set but FLOE_OIDC_JWKS is not: the issuer's keys (a URL or a file) are needed to verify tokens"
    )]
    MissingJwks,
    #[error("{0} is set but FLOE_OIDC_ISSUER is not; set the issuer to enable OIDC users")]
    WithoutIssuer(&'static str),
    #[error(transparent)]
    Jwks(#[from] JwksError),
}

impl OidcConfig {
    /// The OIDC settings, or `None` when OIDC is off (no issuer). Empty values count as unset,
    /// as deployment templates pass unset parameters as empty strings.
    pub fn from_settings(
        issuer: Option<&str>,
        audience: Option<&str>,
        jwks: Option<&str>,
    ) -> Result<Option<Self>, OidcConfigError> {
        fn set(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|v| !v.is_empty())
        }
        let (issuer, audience, jwks) = (set(issuer), set(audience), set(jwks));
        let Some(issuer) = issuer else {
            return match (audience, jwks) {
                (None, None) => Ok(None),
                (Some(_), _) => Err(OidcConfigError::WithoutIssuer("FLOE_OIDC_AUDIENCE")),
                (None, Some(_)) => Err(OidcConfigError::WithoutIssuer("FLOE_OIDC_JWKS")),
            };
        };
        let audience = audience.ok_or(OidcConfigError::MissingAudience)?;
        let jwks = jwks.ok_or(OidcConfigError::MissingJwks)?;
        Ok(Some(Self {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            jwks: JwksSource::parse(jwks)?,
        }))
    }
}

/// Why a token was refused. Never holds the token, only facts about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefused {
    #[error("not a well-formed JWT: {0}")]
    Malformed(String),
    #[error("algorithm {0} is not accepted")]
    Algorithm(String),
    #[error("the issuer's key set has no {alg} key with id {kid}")]
    UnknownKey { kid: String, alg: String },
    #[error("bad signature")]
    Signature,
    #[error("expired")]
    Expired,
    #[error("not valid yet (nbf)")]
    NotYetValid,
    #[error("issued by another issuer")]
    Issuer,
    #[error("issued for another audience")]
    Audience,
    #[error("claim {0} is missing")]
    MissingClaim(String),
    #[error("claims rejected: {0}")]
    Claims(String),
}

/// Why a token could not be verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("token refused: {0}")]
    Refused(#[from] TokenRefused),
    /// The issuer's keys could not be read at all: a server-side failure, not a bad token.
    #[error("the issuer's signing keys are unavailable: {0}")]
    KeysUnavailable(JwksError),
}

/// A verified token's principal and when the token expires.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub principal: Principal,
    /// `exp`, in seconds since the Unix epoch.
    pub expires_at: u64,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    preferred_username: Option<String>,
    #[serde(default)]
    email: Option<String>,
    /// `false` (or the string `"false"`, as some issuers send it) when the issuer has not
    /// verified the email; absent when it does not say.
    #[serde(default)]
    email_verified: Option<serde_json::Value>,
}

/// Verifies bearer JWTs of one issuer and remembers the principals of valid ones.
pub struct OidcVerifier {
    issuer: String,
    audience: String,
    jwks: Jwks,
    leeway: Duration,
    cache_ttl: Duration,
    /// SHA-256 of a token -> its principal, until the cache TTL or the token's `exp`,
    /// whichever comes first.
    cache: Cache<String, Principal>,
}

impl OidcVerifier {
    /// A verifier for `config`. A JWKS file is read now (a broken one stops the start); a URL
    /// is fetched on first use.
    pub fn new(config: OidcConfig) -> Result<Self, OidcConfigError> {
        Ok(Self {
            jwks: Jwks::new(config.jwks)?,
            issuer: config.issuer,
            audience: config.audience,
            leeway: DEFAULT_LEEWAY,
            cache_ttl: crate::cache::DEFAULT_TTL,
            cache: Cache::bounded(CACHE_ENTRIES),
        })
    }

    /// How long a verified token's principal is remembered at most (0: verify every time).
    pub fn with_cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl;
        self
    }

    /// The least time between two reads of the issuer's keys (see `Jwks`).
    pub fn with_min_refetch_interval(mut self, interval: Duration) -> Self {
        self.jwks = self.jwks.with_min_refetch_interval(interval);
        self
    }

    /// How long the issuer's keys are used before they are read again (see `Jwks`).
    pub fn with_keys_max_age(mut self, max_age: Duration) -> Self {
        self.jwks = self.jwks.with_max_age(max_age);
        self
    }

    pub fn jwks(&self) -> &Jwks {
        &self.jwks
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Verifies a token, without the cache.
    pub async fn verify(&self, token: &str) -> Result<Verified, VerifyError> {
        let (alg, kid) = peek_header(token)?;
        let key = match self.jwks.key(kid.as_deref(), alg).await {
            Ok(key) => key,
            Err(KeyLookup::Unknown) => {
                return Err(TokenRefused::UnknownKey {
                    kid: kid.as_deref().map_or("(none)".into(), printable),
                    alg: format!("{alg:?}"),
                }
                .into());
            }
            Err(KeyLookup::Unavailable(e)) => return Err(VerifyError::KeysUnavailable(e)),
        };
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = self.leeway.as_secs();
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| refused(e.into_kind()))?;
        let expires_at = data.claims.exp;
        Ok(Verified {
            principal: principal(data.claims)?,
            expires_at,
        })
    }

    /// The principal of a bearer JWT, remembered until the cache TTL or the token's `exp`,
    /// whichever comes first. Refused tokens are 401; unreadable keys are 500.
    pub async fn authenticate(&self, token: &str) -> Result<Principal, CatalogError> {
        let hash = super::hash_token(token);
        if let Some(principal) = self.cache.get(&hash) {
            return Ok(principal);
        }
        let verified = self.verified(token).await?;
        let lifetime = cache_lifetime(self.cache_ttl, verified.expires_at, since_epoch());
        if !lifetime.is_zero() {
            self.cache
                .insert_for(hash, verified.principal.clone(), lifetime);
        }
        Ok(verified.principal)
    }

    /// A token verified now (no cache) with its `exp`, for callers that must not outlive it
    /// (a web view session). Refused tokens are 401; unreadable keys are 500.
    pub async fn verified(&self, token: &str) -> Result<Verified, CatalogError> {
        match self.verify(token).await {
            Ok(verified) => Ok(verified),
            Err(VerifyError::Refused(reason)) => {
                tracing::debug!(%reason, issuer = %self.issuer, "bearer JWT refused");
                Err(unauthenticated())
            }
            Err(VerifyError::KeysUnavailable(e)) => {
                tracing::warn!(error = %e, "cannot verify a bearer JWT without the issuer's keys");
                Err(CatalogError::Internal(
                    "The identity provider's signing keys are unavailable; retry the request"
                        .into(),
                ))
            }
        }
    }
}

/// Authenticates a bearer token that is not an api-client token: a JWT when OIDC is on,
/// otherwise nobody.
pub async fn authenticate(
    verifier: Option<&OidcVerifier>,
    token: &str,
) -> Result<Principal, CatalogError> {
    match verifier {
        Some(verifier) => verifier.authenticate(token).await,
        None => {
            tracing::debug!("bearer token refused: not an api-client token, and OIDC is off");
            Err(unauthenticated())
        }
    }
}

fn unauthenticated() -> CatalogError {
    CatalogError::Unauthenticated(REFUSED.into())
}

/// How long a verified principal may be remembered: the cache TTL, but never past `exp`
/// (`now` and the result to the millisecond, so not even a fraction of a second past it).
fn cache_lifetime(ttl: Duration, expires_at: u64, now: Duration) -> Duration {
    ttl.min(Duration::from_secs(expires_at).saturating_sub(now))
}

fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Header values quoted in logs: short and printable, as they come from the caller.
fn printable(value: &str) -> String {
    let mut out: String = value.chars().take(64).collect();
    if value.chars().count() > 64 {
        out.push('…');
    }
    out.escape_debug().to_string()
}

/// The `alg` and `kid` of a token's header, read before any key is looked up, so a token
/// with an unaccepted algorithm never reaches the key set (or makes it be read again).
fn peek_header(token: &str) -> Result<(Algorithm, Option<String>), TokenRefused> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenRefused::Malformed(
            "not three dot-separated parts".into(),
        ));
    };
    if header.len() > MAX_HEADER_CHARS {
        return Err(TokenRefused::Malformed("header too large".into()));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| TokenRefused::Malformed("header is not base64url".into()))?;
    let header: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| TokenRefused::Malformed("header is not JSON".into()))?;
    let alg = header
        .get("alg")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| TokenRefused::Malformed("header has no alg".into()))?;
    let accepted = alg
        .parse::<Algorithm>()
        .ok()
        .filter(|a| ACCEPTED.contains(a))
        .ok_or_else(|| TokenRefused::Algorithm(printable(alg)))?;
    let kid = match header.get("kid") {
        None => None,
        Some(serde_json::Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(TokenRefused::Malformed("kid is not a string".into())),
    };
    Ok((accepted, kid))
}

fn refused(kind: ErrorKind) -> TokenRefused {
    match kind {
        ErrorKind::InvalidSignature => TokenRefused::Signature,
        ErrorKind::ExpiredSignature => TokenRefused::Expired,
        ErrorKind::ImmatureSignature => TokenRefused::NotYetValid,
        ErrorKind::InvalidIssuer => TokenRefused::Issuer,
        ErrorKind::InvalidAudience => TokenRefused::Audience,
        ErrorKind::MissingRequiredClaim(claim) => TokenRefused::MissingClaim(claim),
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            TokenRefused::Algorithm("(header)".into())
        }
        ErrorKind::Json(e) => TokenRefused::Claims(e.to_string()),
        other => TokenRefused::Malformed(format!("{other:?}")),
    }
}

/// The user a verified token names: `user:<sub>`, shown by its name, else its preferred
/// username, else its email, else its subject. An email the issuer says is unverified
/// (`email_verified: false`) is not the user's: neither its email nor its name.
fn principal(claims: Claims) -> Result<Principal, TokenRefused> {
    if claims.sub.is_empty() {
        return Err(TokenRefused::MissingClaim("sub".into()));
    }
    let given = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    let unverified = match &claims.email_verified {
        Some(serde_json::Value::Bool(verified)) => !verified,
        Some(serde_json::Value::String(verified)) => verified.eq_ignore_ascii_case("false"),
        _ => false,
    };
    let email = given(claims.email).filter(|_| !unverified);
    let name = given(claims.name)
        .or_else(|| given(claims.preferred_username))
        .or_else(|| email.clone())
        .unwrap_or_else(|| claims.sub.clone());
    Ok(Principal {
        id: format!("user:{}", claims.sub),
        kind: PrincipalKind::User,
        name,
        email,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_keys::{TestKey, b64, jwks_json};
    use serde_json::{Value, json};

    const ISSUER: &str = "https://idp.example.com/realms/floe";
    const AUDIENCE: &str = "floe";

    struct Fixture {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        key: TestKey,
        rsa: TestKey,
        verifier: OidcVerifier,
    }

    fn now_secs() -> u64 {
        since_epoch().as_secs()
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        let key = TestKey::es256("k1");
        let rsa = TestKey::rs256("r1");
        std::fs::write(&path, jwks_json(&[&key, &rsa])).unwrap();
        let config =
            OidcConfig::from_settings(Some(ISSUER), Some(AUDIENCE), Some(path.to_str().unwrap()))
                .unwrap()
                .unwrap();
        Fixture {
            _dir: dir,
            path,
            key,
            rsa,
            verifier: OidcVerifier::new(config).unwrap(),
        }
    }

    fn claims(extra: Value) -> Value {
        let now = now_secs();
        let mut claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "u-123",
                                "iat": now, "exp": now + 600});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
        claims
    }

    #[test]
    fn settings_need_an_issuer_an_audience_and_keys() {
        assert!(matches!(
            OidcConfig::from_settings(None, None, None),
            Ok(None)
        ));
        assert!(matches!(
            OidcConfig::from_settings(Some(""), Some(" "), Some("")),
            Ok(None)
        ));
        assert!(matches!(
            OidcConfig::from_settings(Some(ISSUER), None, Some("/jwks.json")),
            Err(OidcConfigError::MissingAudience)
        ));
        assert!(matches!(
            OidcConfig::from_settings(Some(ISSUER), Some(AUDIENCE), None),
            Err(OidcConfigError::MissingJwks)
        ));
        assert!(matches!(
            OidcConfig::from_settings(None, Some(AUDIENCE), None),
            Err(OidcConfigError::WithoutIssuer("FLOE_OIDC_AUDIENCE"))
        ));
        assert!(matches!(
            OidcConfig::from_settings(None, None, Some("/jwks.json")),
            Err(OidcConfigError::WithoutIssuer("FLOE_OIDC_JWKS"))
        ));
        assert!(matches!(
            OidcConfig::from_settings(
                Some(ISSUER),
                Some(AUDIENCE),
                Some("http://idp.example.com/certs")
            ),
            Err(OidcConfigError::Jwks(JwksError::InvalidSource(_)))
        ));
        let config = OidcConfig::from_settings(
            Some(ISSUER),
            Some(AUDIENCE),
            Some("https://idp.example.com/realms/floe/protocol/openid-connect/certs"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.issuer, ISSUER);
        assert_eq!(config.audience, AUDIENCE);
        assert!(matches!(config.jwks, JwksSource::Url(_)));
        // A broken JWKS file is a start-up error, with its path.
        let error = OidcVerifier::new(OidcConfig {
            jwks: JwksSource::File("/nonexistent/jwks.json".into()),
            ..config
        })
        .err()
        .unwrap();
        assert!(
            error.to_string().contains("/nonexistent/jwks.json"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_valid_token_names_a_user() {
        let f = fixture();
        let cases = [
            (
                json!({"name": "Ada Lovelace", "preferred_username": "ada", "email": "ada@example.com"}),
                "Ada Lovelace",
                Some("ada@example.com"),
            ),
            (
                json!({"preferred_username": "ada", "email": "ada@example.com"}),
                "ada",
                Some("ada@example.com"),
            ),
            (
                json!({"name": "", "email": "ada@example.com"}),
                "ada@example.com",
                Some("ada@example.com"),
            ),
            (json!({}), "u-123", None),
            // An email the issuer says is unverified names nobody: it is neither the user's
            // email (stamped as snapshot author) nor a fallback for the name.
            (
                json!({"name": "Ada", "email": "ada@example.com", "email_verified": false}),
                "Ada",
                None,
            ),
            (
                json!({"email": "ada@example.com", "email_verified": false}),
                "u-123",
                None,
            ),
            (
                json!({"preferred_username": "ada", "email": "ada@example.com", "email_verified": "false"}),
                "ada",
                None,
            ),
            (
                json!({"email": "ada@example.com", "email_verified": true}),
                "ada@example.com",
                Some("ada@example.com"),
            ),
            (
                json!({"email": "ada@example.com", "email_verified": "true"}),
                "ada@example.com",
                Some("ada@example.com"),
            ),
        ];
        for (extra, name, email) in cases {
            let verified = f
                .verifier
                .verify(&f.key.token(&claims(extra)))
                .await
                .unwrap();
            assert_eq!(
                verified.principal,
                Principal {
                    id: "user:u-123".into(),
                    kind: PrincipalKind::User,
                    name: name.into(),
                    email: email.map(str::to_owned),
                }
            );
        }
        // RS256 from the RSA key of the same set, and an audience list that includes Floe.
        let token = f.rsa.token(&claims(json!({"aud": ["account", AUDIENCE]})));
        assert_eq!(
            f.verifier.verify(&token).await.unwrap().principal.id,
            "user:u-123"
        );
    }

    #[tokio::test]
    async fn bad_tokens_are_refused_for_their_reason() {
        let f = fixture();
        let now = now_secs();
        let other = TestKey::es256("k1");
        let header = |alg: &str| json!({"alg": alg, "typ": "JWT", "kid": "k1"});
        let unsigned = |header: Value, claims: Value| {
            format!(
                "{}.{}.",
                b64(header.to_string().as_bytes()),
                b64(claims.to_string().as_bytes())
            )
        };
        // HS256 keyed with the published public key: the classic confusion attack.
        let hs256_with_public_key = {
            let jwk = f.key.jwk();
            let secret = format!(
                "{}{}",
                jwk["x"].as_str().unwrap(),
                jwk["y"].as_str().unwrap()
            );
            let message = format!(
                "{}.{}",
                b64(header("HS256").to_string().as_bytes()),
                b64(claims(json!({})).to_string().as_bytes())
            );
            let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
            let tag = aws_lc_rs::hmac::sign(&key, message.as_bytes());
            format!("{message}.{}", b64(tag.as_ref()))
        };
        let cases: Vec<(String, TokenRefused)> = vec![
            (
                f.key.token(&claims(json!({"exp": now - 3600}))),
                TokenRefused::Expired,
            ),
            (
                f.key.token(&claims(json!({"nbf": now + 3600}))),
                TokenRefused::NotYetValid,
            ),
            (
                f.key.token(&claims(json!({"aud": "someone-else"}))),
                TokenRefused::Audience,
            ),
            (
                f.key
                    .token(&claims(json!({"iss": "https://evil.example.com"}))),
                TokenRefused::Issuer,
            ),
            (
                f.key.token(&claims(json!({"iss": null}))),
                TokenRefused::MissingClaim("iss".into()),
            ),
            (
                f.key.token(&claims(json!({"aud": null}))),
                TokenRefused::MissingClaim("aud".into()),
            ),
            (other.token(&claims(json!({}))), TokenRefused::Signature),
            (
                TestKey::es256("k9").token(&claims(json!({}))),
                TokenRefused::UnknownKey {
                    kid: "k9".into(),
                    alg: "ES256".into(),
                },
            ),
            (
                unsigned(header("none"), claims(json!({}))),
                TokenRefused::Algorithm("none".into()),
            ),
            (
                hs256_with_public_key,
                TokenRefused::Algorithm("HS256".into()),
            ),
            // An RSA algorithm named with the EC key's id finds no key.
            (
                f.key
                    .token_with_header(&header("RS256"), &claims(json!({}))),
                TokenRefused::UnknownKey {
                    kid: "k1".into(),
                    alg: "RS256".into(),
                },
            ),
            (
                "not-a-jwt".into(),
                TokenRefused::Malformed("not three dot-separated parts".into()),
            ),
            (
                "a.b.c".into(),
                TokenRefused::Malformed("header is not base64url".into()),
            ),
        ];
        for (token, expected) in cases {
            let refusal = f.verifier.verify(&token).await.unwrap_err();
            assert_eq!(
                refusal,
                VerifyError::Refused(expected.clone()),
                "{expected}"
            );
            assert!(!refusal.to_string().contains(&token));
            let error = f.verifier.authenticate(&token).await.unwrap_err();
            assert!(
                matches!(&error, CatalogError::Unauthenticated(m) if m == REFUSED),
                "{error:?}"
            );
        }
        // Within the leeway an expired token still passes; the control that the cases above
        // fail for their reason and not for a broken fixture.
        let late = f.key.token(&claims(json!({"exp": now - 30})));
        assert!(f.verifier.verify(&late).await.is_ok());
        assert!(
            f.verifier
                .verify(&f.key.token(&claims(json!({}))))
                .await
                .is_ok()
        );
    }

    #[test]
    fn remembered_principals_never_outlive_their_token() {
        let ttl = Duration::from_secs(10);
        let secs = Duration::from_secs;
        assert_eq!(cache_lifetime(ttl, 1_000, secs(900)), ttl);
        assert_eq!(cache_lifetime(ttl, 1_003, secs(1_000)), secs(3));
        assert_eq!(
            cache_lifetime(ttl, 1_003, Duration::from_millis(1_000_900)),
            Duration::from_millis(2_100)
        );
        assert_eq!(cache_lifetime(ttl, 1_000, secs(1_000)), Duration::ZERO);
        assert_eq!(cache_lifetime(ttl, 900, secs(1_000)), Duration::ZERO);
        assert_eq!(
            cache_lifetime(Duration::ZERO, 2_000, secs(1_000)),
            Duration::ZERO
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_remembered_token_stops_working_when_it_expires() {
        let f = fixture();
        // Keys are read again on every lookup, so replacing them takes effect at once.
        let verifier = f
            .verifier
            .with_keys_max_age(Duration::ZERO)
            .with_min_refetch_interval(Duration::ZERO)
            .with_cache_ttl(Duration::from_secs(3600));
        let token = f.key.token(&claims(json!({"exp": now_secs() + 2})));
        assert_eq!(
            verifier.authenticate(&token).await.unwrap().id,
            "user:u-123"
        );
        // The issuer replaces key k1: verification alone now refuses the token...
        std::fs::write(&f.path, jwks_json(&[&TestKey::es256("k1")])).unwrap();
        assert_eq!(
            verifier.verify(&token).await.unwrap_err(),
            VerifyError::Refused(TokenRefused::Signature)
        );
        // ...but the remembered principal still answers,
        assert!(verifier.authenticate(&token).await.is_ok());
        // until the token's exp, long before the hour-long cache TTL (the cache's clock is
        // tokio's, moved here; the JWT's own `exp` is checked against the system's).
        tokio::time::advance(Duration::from_millis(2100)).await;
        assert!(matches!(
            verifier.authenticate(&token).await,
            Err(CatalogError::Unauthenticated(_))
        ));
    }

    #[tokio::test]
    async fn without_oidc_a_jwt_is_nobody() {
        let f = fixture();
        let token = f.key.token(&claims(json!({})));
        assert!(matches!(
            authenticate(None, &token).await,
            Err(CatalogError::Unauthenticated(_))
        ));
        assert!(authenticate(Some(&f.verifier), &token).await.is_ok());
    }
}
