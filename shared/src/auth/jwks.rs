//! The identity provider's public signing keys (a JWKS), from an HTTPS URL or a file.
//!
//! Keys are kept in memory and read again when they grow old or when a token names a key id
//! the set does not hold (the issuer rotated its keys). Reads are rate-limited: a flood of
//! tokens with made-up key ids costs the issuer at most one request per interval, and
//! concurrent misses wait for one shared read. When a read fails, the keys read before stay in
//! use, so an issuer outage does not lock out users whose keys are known.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
// tokio's clock, so that tests move a paused one instead of sleeping.
use tokio::time::Instant;

/// Keys older than this are read again, so keys the issuer withdrew stop being accepted.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(60 * 60);
/// At most one read of the key set per interval, however many unknown key ids arrive.
pub const DEFAULT_MIN_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// A key set larger than this is refused: real ones are a few kilobytes.
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// Bound on one HTTP read (connect, request and body), so a stalled issuer cannot hold
/// requests for long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the key set comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// An `https://` URL, or an `http://` URL on a loopback host.
    Url(url::Url),
    /// A JWKS document on disk, for deployments without access to the issuer.
    File(PathBuf),
}

/// Why a key set could not be obtained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error(
        "FLOE_OIDC_JWKS must be an https:// URL, an http:// URL on a loopback host, or a file path; got {0}"
    )]
    InvalidSource(String),
    #[error("cannot read the JWKS file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("cannot fetch the JWKS from {url}: {reason}")]
    Fetch { url: String, reason: String },
    #[error("the JWKS from {origin} is not usable: {reason}")]
    Parse { origin: String, reason: String },
}

impl JwksSource {
    /// Parses the `FLOE_OIDC_JWKS` setting. Anything with a scheme must be an https URL, or
    /// plain http to a loopback host (a test issuer); everything else is a file path.
    pub fn parse(value: &str) -> Result<Self, JwksError> {
        let invalid = || JwksError::InvalidSource(value.to_owned());
        if !value.contains("://") {
            if value.trim().is_empty() {
                return Err(invalid());
            }
            return Ok(JwksSource::File(PathBuf::from(value)));
        }
        let url = url::Url::parse(value).map_err(|_| invalid())?;
        let loopback = match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => return Err(invalid()),
        };
        match url.scheme() {
            "https" => Ok(JwksSource::Url(url)),
            "http" if loopback => Ok(JwksSource::Url(url)),
            _ => Err(invalid()),
        }
    }

    fn origin(&self) -> String {
        match self {
            JwksSource::Url(url) => url.to_string(),
            JwksSource::File(path) => path.display().to_string(),
        }
    }
}

/// The curve or key type a key verifies with; decides which `alg` values it may serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Rsa,
    P256,
    P384,
}

/// One public signing key of the issuer.
#[derive(Clone)]
pub struct VerifyingKey {
    pub kid: Option<String>,
    pub kind: KeyKind,
    /// The `alg` the JWK pins, if any.
    pub alg: Option<Algorithm>,
    pub key: DecodingKey,
}

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("kind", &self.kind)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl VerifyingKey {
    /// Whether this key may verify a signature made with `alg`. An RSA key never serves an EC
    /// algorithm (nor the reverse), and no key ever serves HMAC or `none`: a public key used
    /// as an HMAC secret would let anyone sign.
    pub fn accepts(&self, alg: Algorithm) -> bool {
        let by_kind = match self.kind {
            KeyKind::Rsa => matches!(
                alg,
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            ),
            KeyKind::P256 => alg == Algorithm::ES256,
            KeyKind::P384 => alg == Algorithm::ES384,
        };
        by_kind && self.alg.is_none_or(|pinned| pinned == alg)
    }
}

/// The signing keys of one read of the key set.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<Arc<VerifyingKey>>,
}

impl KeySet {
    /// Parses a JWKS document. Keys Floe cannot use for signatures (symmetric keys, encryption
    /// keys, other curves) are skipped; a set without any usable key is an error, so a wrong
    /// URL or file is noticed.
    pub fn parse(bytes: &[u8], origin: &str) -> Result<Self, JwksError> {
        let parse_error = |reason: String| JwksError::Parse {
            origin: origin.to_owned(),
            reason,
        };
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|e| parse_error(format!("not JSON: {e}")))?;
        let entries = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| parse_error("no \"keys\" array".into()))?;
        let mut keys = Vec::new();
        for entry in entries {
            match parse_jwk(entry) {
                Ok(key) => keys.push(Arc::new(key)),
                Err(reason) => {
                    let kid = entry.get("kid").and_then(|k| k.as_str()).unwrap_or("-");
                    tracing::debug!(jwks = %origin, kid, reason, "JWKS entry skipped");
                }
            }
        }
        if keys.is_empty() {
            return Err(parse_error("no RSA, P-256 or P-384 signing key".into()));
        }
        Ok(Self { keys })
    }

    /// The key for a token's `kid` and `alg`. A token without `kid` is accepted only when the
    /// set leaves no choice: a single key that accepts the algorithm.
    pub fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<Arc<VerifyingKey>> {
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .find(|k| k.kid.as_deref() == Some(kid) && k.accepts(alg))
                .cloned(),
            None => {
                let mut candidates = self.keys.iter().filter(|k| k.accepts(alg));
                match (candidates.next(), candidates.next()) {
                    (Some(only), None) => Some(only.clone()),
                    _ => None,
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// One JWK as a verifying key, or why it is not one.
fn parse_jwk(jwk: &Value) -> Result<VerifyingKey, String> {
    let text = |name: &str| jwk.get(name).and_then(Value::as_str);
    if let Some(usage) = text("use")
        && usage != "sig"
    {
        return Err(format!("use is {usage}, not sig"));
    }
    if let Some(ops) = jwk.get("key_ops").and_then(Value::as_array)
        && !ops.iter().any(|op| op.as_str() == Some("verify"))
    {
        return Err("key_ops does not include verify".into());
    }
    let alg = match text("alg") {
        None => None,
        Some(name) => match name.parse::<Algorithm>() {
            Ok(alg) => Some(alg),
            Err(_) => return Err(format!("alg {name} is not a signature algorithm")),
        },
    };
    let (kind, key) = match (text("kty"), text("crv")) {
        (Some("RSA"), _) => {
            let (Some(n), Some(e)) = (text("n"), text("e")) else {
                return Err("RSA key without n or e".into());
            };
            let key = DecodingKey::from_rsa_components(n, e).map_err(|e| e.to_string())?;
            (KeyKind::Rsa, key)
        }
        (Some("EC"), Some(crv @ ("P-256" | "P-384"))) => {
            let (Some(x), Some(y)) = (text("x"), text("y")) else {
                return Err("EC key without x or y".into());
            };
            let (kind, len) = if crv == "P-256" {
                (KeyKind::P256, 32)
            } else {
                (KeyKind::P384, 48)
            };
            let key = DecodingKey::from_ec_components(x, y).map_err(|e| e.to_string())?;
            // Uncompressed point: 0x04, then x and y of the curve's size.
            if key.try_get_as_bytes().map(<[u8]>::len).ok() != Some(1 + 2 * len) {
                return Err(format!("{crv} key with coordinates of the wrong size"));
            }
            (kind, key)
        }
        (kty, crv) => {
            return Err(format!(
                "unsupported key type {} {}",
                kty.unwrap_or("-"),
                crv.unwrap_or("")
            ));
        }
    };
    let key = VerifyingKey {
        kid: text("kid").map(str::to_owned),
        kind,
        alg,
        key,
    };
    if let Some(alg) = alg
        && !key.accepts(alg)
    {
        return Err(format!("alg {alg:?} does not fit the key type"));
    }
    Ok(key)
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// A key set as last read.
#[derive(Clone)]
struct Loaded {
    keys: Arc<KeySet>,
    at: Instant,
}

/// The last read attempt, successful or not; the rate limit counts from it.
struct Attempt {
    at: Instant,
    error: Option<JwksError>,
}

/// Why no key could be found for a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyLookup {
    /// The key set (even after a permitted re-read) holds no key for this kid and algorithm.
    Unknown,
    /// No key set was ever obtained; the issuer or file is unreachable.
    Unavailable(JwksError),
}

/// The issuer's keys, cached, with rate-limited re-reads.
pub struct Jwks {
    source: JwksSource,
    max_age: Duration,
    min_refetch: Duration,
    current: RwLock<Option<Loaded>>,
    /// Held while reading, so concurrent misses share one read; remembers the last attempt.
    refresh: tokio::sync::Mutex<Option<Attempt>>,
    client: OnceLock<Result<HttpClient, String>>,
    reads: std::sync::atomic::AtomicU64,
}

impl Jwks {
    /// Keys from `source`. A file is read now, so a missing or broken file stops the start;
    /// a URL is fetched on first use, so a start does not depend on the issuer being up.
    pub fn new(source: JwksSource) -> Result<Self, JwksError> {
        let jwks = Self {
            source,
            max_age: DEFAULT_MAX_AGE,
            min_refetch: DEFAULT_MIN_REFETCH_INTERVAL,
            current: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(None),
            client: OnceLock::new(),
            reads: Default::default(),
        };
        if let JwksSource::File(path) = &jwks.source {
            let keys = Self::parse_file(path, std::fs::read(path))?;
            jwks.store(keys);
            *jwks.refresh.try_lock().expect("not shared yet") = Some(Attempt {
                at: Instant::now(),
                error: None,
            });
        }
        Ok(jwks)
    }

    /// How long keys are used before they are read again.
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// The least time between two reads of the key set.
    pub fn with_min_refetch_interval(mut self, interval: Duration) -> Self {
        self.min_refetch = interval;
        self
    }

    pub fn source(&self) -> &JwksSource {
        &self.source
    }

    /// How many times the key set has been read (successfully or not).
    pub fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn loaded(&self) -> Option<Loaded> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn store(&self, keys: KeySet) {
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Loaded {
            keys: Arc::new(keys),
            at: Instant::now(),
        });
    }

    /// The key that verifies a token with this `kid` and `alg`.
    pub async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Arc<VerifyingKey>, KeyLookup> {
        let known = self.loaded().and_then(|l| {
            let key = l.keys.find(kid, alg)?;
            Some((key, l.at.elapsed() < self.max_age))
        });
        let mut last = match (known, self.refresh.try_lock()) {
            (Some((key, true)), _) => return Ok(key),
            // Old keys, but another request is reading them again: use them meanwhile.
            (Some((key, false)), Err(_)) => return Ok(key),
            (_, Ok(guard)) => guard,
            (_, Err(_)) => self.refresh.lock().await,
        };
        // Another request may have read the keys while this one waited.
        if let Some(l) = self.loaded()
            && let Some(key) = l.keys.find(kid, alg)
            && l.at.elapsed() < self.max_age
        {
            return Ok(key);
        }
        let allowed = last
            .as_ref()
            .is_none_or(|a| a.at.elapsed() >= self.min_refetch);
        if allowed {
            let read = self.read().await;
            let error = match read {
                Ok(keys) => {
                    tracing::debug!(jwks = %self.source.origin(), keys = keys.len(), "JWKS read");
                    self.store(keys);
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "JWKS read failed; keys read before stay in use");
                    Some(e)
                }
            };
            *last = Some(Attempt {
                at: Instant::now(),
                error,
            });
        }
        match self.loaded() {
            Some(l) => l.keys.find(kid, alg).ok_or(KeyLookup::Unknown),
            None => Err(KeyLookup::Unavailable(
                last.as_ref()
                    .and_then(|a| a.error.clone())
                    .unwrap_or_else(|| JwksError::Fetch {
                        url: self.source.origin(),
                        reason: "not read yet".into(),
                    }),
            )),
        }
    }

    async fn read(&self) -> Result<KeySet, JwksError> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match &self.source {
            JwksSource::File(path) => Self::parse_file(path, tokio::fs::read(path).await),
            JwksSource::Url(url) => {
                let fetch_error = |reason: String| JwksError::Fetch {
                    url: url.to_string(),
                    reason,
                };
                let client = self
                    .client
                    .get_or_init(|| http_client(url))
                    .as_ref()
                    .map_err(|e| fetch_error(e.clone()))?;
                let bytes = tokio::time::timeout(FETCH_TIMEOUT, fetch(client, url))
                    .await
                    .map_err(|_| fetch_error(format!("no answer within {FETCH_TIMEOUT:?}")))?
                    .map_err(fetch_error)?;
                KeySet::parse(&bytes, url.as_str())
            }
        }
    }

    fn parse_file(
        path: &std::path::Path,
        read: std::io::Result<Vec<u8>>,
    ) -> Result<KeySet, JwksError> {
        let origin = path.display().to_string();
        let bytes = read.map_err(|e| JwksError::Read {
            path: origin.clone(),
            reason: e.to_string(),
        })?;
        KeySet::parse(&bytes, &origin)
    }
}

/// An HTTP client for the key set's URL: TLS with the system's root certificates for https,
/// plain HTTP only for the loopback URLs `JwksSource::parse` lets through.
fn http_client(url: &url::Url) -> Result<HttpClient, String> {
    let connector = crate::outbound::connector(url.scheme() == "https")?;
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

async fn fetch(client: &HttpClient, url: &url::Url) -> Result<Bytes, String> {
    let request = http::Request::get(url.as_str())
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, "floe")
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status()));
    }
    Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map(|body| body.to_bytes())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_keys::{TestKey, jwks_json};

    #[test]
    fn sources_are_https_loopback_http_or_files() {
        assert!(matches!(
            JwksSource::parse("https://idp.example.com/realms/x/protocol/openid-connect/certs"),
            Ok(JwksSource::Url(_))
        ));
        assert!(matches!(
            JwksSource::parse("http://127.0.0.1:8080/jwks.json"),
            Ok(JwksSource::Url(_))
        ));
        assert!(matches!(
            JwksSource::parse("http://localhost/jwks.json"),
            Ok(JwksSource::Url(_))
        ));
        assert!(matches!(
            JwksSource::parse("http://[::1]:9/jwks"),
            Ok(JwksSource::Url(_))
        ));
        assert_eq!(
            JwksSource::parse("/etc/floe/jwks.json"),
            Ok(JwksSource::File("/etc/floe/jwks.json".into()))
        );
        for refused in [
            "http://idp.example.com/jwks",
            "http://10.0.0.1/jwks",
            "http://localhost.example.com/jwks",
            "ftp://idp.example.com/jwks",
            "file:///etc/jwks.json",
            "https://",
            "",
        ] {
            assert!(
                matches!(JwksSource::parse(refused), Err(JwksError::InvalidSource(_))),
                "{refused}"
            );
        }
    }

    #[test]
    fn only_signature_keys_of_known_types_are_kept() {
        let ec = TestKey::es256("ec-1");
        let rsa = TestKey::rs256("rsa-1");
        let mut enc = rsa.jwk();
        enc["use"] = "enc".into();
        enc["kid"] = "rsa-enc".into();
        let mut unpinned = rsa.jwk();
        unpinned.as_object_mut().unwrap().remove("alg");
        unpinned["kid"] = "rsa-any".into();
        let doc = serde_json::json!({"keys": [
            ec.jwk(),
            rsa.jwk(),
            unpinned,
            enc,
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty": "EC", "crv": "P-256", "kid": "pinned-wrong", "alg": "RS256",
             "x": ec.jwk()["x"], "y": ec.jwk()["y"]},
        ]});
        let set = KeySet::parse(doc.to_string().as_bytes(), "test").unwrap();
        assert_eq!(set.len(), 3);
        assert!(set.find(Some("ec-1"), Algorithm::ES256).is_some());
        assert!(set.find(Some("rsa-1"), Algorithm::RS256).is_some());
        // A key's own alg pins it; without one, any algorithm of its family may use it.
        assert!(set.find(Some("rsa-1"), Algorithm::PS256).is_none());
        assert!(set.find(Some("rsa-any"), Algorithm::PS256).is_some());
        assert!(set.find(Some("rsa-any"), Algorithm::RS512).is_some());
        // Keys never serve another family, nor HMAC with the public key as the secret.
        assert!(set.find(Some("ec-1"), Algorithm::RS256).is_none());
        assert!(set.find(Some("rsa-1"), Algorithm::ES256).is_none());
        assert!(set.find(Some("rsa-1"), Algorithm::HS256).is_none());
        assert!(set.find(Some("ec-1"), Algorithm::ES384).is_none());
        for skipped in ["rsa-enc", "hmac", "ed", "pinned-wrong"] {
            for alg in [Algorithm::HS256, Algorithm::RS256, Algorithm::ES256] {
                assert!(set.find(Some(skipped), alg).is_none(), "{skipped}");
            }
        }
        // No kid: only when a single key fits the algorithm.
        assert!(set.find(None, Algorithm::ES256).is_some());
        assert!(set.find(None, Algorithm::PS256).is_some());
        assert!(
            set.find(None, Algorithm::RS256).is_none(),
            "two RSA keys fit"
        );
        let two = KeySet::parse(
            jwks_json(&[&ec, &TestKey::es256("ec-2")]).as_bytes(),
            "test",
        )
        .unwrap();
        assert!(two.find(None, Algorithm::ES256).is_none());
    }

    #[test]
    fn a_set_without_usable_keys_is_an_error() {
        for doc in [
            "not json",
            "{}",
            r#"{"keys": []}"#,
            r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#,
        ] {
            assert!(
                matches!(
                    KeySet::parse(doc.as_bytes(), "t"),
                    Err(JwksError::Parse { .. })
                ),
                "{doc}"
            );
        }
    }

    #[tokio::test]
    async fn a_missing_file_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let missing = JwksSource::File(dir.path().join("nope.json"));
        assert!(matches!(Jwks::new(missing), Err(JwksError::Read { .. })));
        let broken = dir.path().join("broken.json");
        std::fs::write(&broken, "{").unwrap();
        assert!(matches!(
            Jwks::new(JwksSource::File(broken)),
            Err(JwksError::Parse { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn unknown_kids_reread_the_set_at_most_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        let first = TestKey::es256("first");
        let second = TestKey::es256("second");
        std::fs::write(&path, jwks_json(&[&first])).unwrap();

        // A long interval: the file was just read, so a new kid is not looked for yet.
        let jwks = Jwks::new(JwksSource::File(path.clone()))
            .unwrap()
            .with_min_refetch_interval(Duration::from_secs(3600));
        assert_eq!(jwks.reads(), 0, "the start-up read is not counted");
        assert!(jwks.key(Some("first"), Algorithm::ES256).await.is_ok());
        std::fs::write(&path, jwks_json(&[&first, &second])).unwrap();
        for i in 0..50 {
            let kid = format!("bogus-{i}");
            assert_eq!(
                jwks.key(Some(&kid), Algorithm::ES256).await.unwrap_err(),
                KeyLookup::Unknown
            );
        }
        assert_eq!(
            jwks.key(Some("second"), Algorithm::ES256)
                .await
                .unwrap_err(),
            KeyLookup::Unknown
        );
        assert_eq!(jwks.reads(), 0, "no read within the interval");

        // A short interval: the rotated key is found by one read, shared by concurrent misses.
        std::fs::write(&path, jwks_json(&[&first])).unwrap();
        let jwks = Arc::new(
            Jwks::new(JwksSource::File(path.clone()))
                .unwrap()
                .with_min_refetch_interval(Duration::from_millis(200)),
        );
        std::fs::write(&path, jwks_json(&[&first, &second])).unwrap();
        assert_eq!(
            jwks.key(Some("second"), Algorithm::ES256)
                .await
                .unwrap_err(),
            KeyLookup::Unknown,
            "within the interval"
        );
        tokio::time::advance(Duration::from_millis(250)).await;
        let mut flood = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let jwks = jwks.clone();
            flood.spawn(async move { jwks.key(Some("second"), Algorithm::ES256).await.is_ok() });
        }
        while let Some(found) = flood.join_next().await {
            assert!(found.unwrap());
        }
        assert_eq!(jwks.reads(), 1, "concurrent misses share one read");
    }

    #[tokio::test]
    async fn old_keys_are_read_again_and_kept_when_the_read_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        let key = TestKey::es256("k");
        std::fs::write(&path, jwks_json(&[&key])).unwrap();
        let jwks = Jwks::new(JwksSource::File(path.clone()))
            .unwrap()
            .with_max_age(Duration::ZERO)
            .with_min_refetch_interval(Duration::ZERO);
        std::fs::remove_file(&path).unwrap();
        assert!(jwks.key(Some("k"), Algorithm::ES256).await.is_ok());
        assert_eq!(jwks.reads(), 1, "old keys trigger a read");
        assert!(jwks.key(Some("k"), Algorithm::ES256).await.is_ok());
        assert_eq!(jwks.reads(), 2);
    }

    #[tokio::test]
    async fn an_unreachable_issuer_is_unavailable_not_unknown() {
        // A port nothing listens on: bind one, then free it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let source = JwksSource::parse(&format!("http://127.0.0.1:{port}/jwks")).unwrap();
        let jwks = Jwks::new(source).unwrap();
        assert!(matches!(
            jwks.key(Some("k"), Algorithm::ES256).await,
            Err(KeyLookup::Unavailable(JwksError::Fetch { .. }))
        ));
        // Within the interval the failure is remembered, not retried.
        assert!(matches!(
            jwks.key(Some("k"), Algorithm::ES256).await,
            Err(KeyLookup::Unavailable(JwksError::Fetch { .. }))
        ));
        assert_eq!(jwks.reads(), 1);
    }
}
