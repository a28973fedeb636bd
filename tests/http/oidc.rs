//! OIDC users: bearer JWTs verified against the issuer's keys (a file, or a URL served by a
//! loopback server), with key pairs generated at run time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256,
    RsaPublicKeyComponents,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use floe::auth::jwks::JwksSource;
use floe::auth::oidc::{OidcConfig, OidcVerifier};
use floe::model::OrgRole;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

const ISSUER: &str = "https://login.example.com/realms/acme";
const AUDIENCE: &str = "floe";
const ALICE: &str = "user:alice-0001";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

enum Private {
    Ec(EcdsaKeyPair),
    Rsa(aws_lc_rs::rsa::KeyPair),
}

/// A signing key of the test issuer, generated at run time.
struct Key {
    kid: String,
    private: Private,
}

impl Key {
    fn es256(kid: &str) -> Self {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        Self {
            kid: kid.into(),
            private: Private::Ec(pair),
        }
    }

    fn rs256(kid: &str) -> Self {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        Self {
            kid: kid.into(),
            private: Private::Rsa(pair),
        }
    }

    fn alg(&self) -> &'static str {
        match self.private {
            Private::Ec(_) => "ES256",
            Private::Rsa(_) => "RS256",
        }
    }

    fn jwk(&self) -> Value {
        match &self.private {
            Private::Ec(pair) => {
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
                       "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Private::Rsa(pair) => {
                let parts = RsaPublicKeyComponents::<Vec<u8>>::from(pair.public_key());
                json!({"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                       "n": b64(&parts.n), "e": b64(&parts.e)})
            }
        }
    }

    fn signed(&self, header: &Value, claims: &Value) -> String {
        let message = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let signature = match &self.private {
            Private::Ec(pair) => pair
                .sign(&rng, message.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec(),
            Private::Rsa(pair) => {
                let mut signature = vec![0; pair.public_modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &rng, message.as_bytes(), &mut signature)
                    .unwrap();
                signature
            }
        };
        format!("{message}.{}", b64(&signature))
    }

    fn token(&self, claims: &Value) -> String {
        self.signed(
            &json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid}),
            claims,
        )
    }
}

fn jwks(keys: &[&Key]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}

/// Alice's claims, valid for ten minutes, with `changes` applied (`null` removes a claim).
fn claims(changes: Value) -> Value {
    let now = now();
    let mut claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "alice-0001", "iat": now, "exp": now + 600,
        "name": "Alice Example", "preferred_username": "alice", "email": "alice@example.com"
    });
    for (name, value) in changes.as_object().unwrap() {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(name);
        } else {
            claims[name] = value.clone();
        }
    }
    claims
}

fn verifier(jwks: JwksSource) -> OidcVerifier {
    OidcVerifier::new(OidcConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        jwks,
    })
    .unwrap()
}

/// A verifier reading `keys` from a JWKS file in `dir`.
fn file_verifier(dir: &tempfile::TempDir, keys: &[&Key]) -> OidcVerifier {
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks(keys)).unwrap();
    verifier(JwksSource::parse(path.to_str().unwrap()).unwrap())
}

async fn list_namespaces(c: &TestCatalog, token: &str) -> Answer {
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces"),
        Some(token),
        None,
    )
    .await
}

async fn make_member(c: &TestCatalog, principal: &str, role: OrgRole) {
    floe::bootstrap::put_member(&*c.store, ORG, principal, role)
        .await
        .unwrap();
    c.catalog.forget_cached();
}

/// Asserts a 401 ErrorModel that quotes no part of the token.
#[track_caller]
fn assert_refused(answer: &Answer, token: &str, case: &str) {
    assert_eq!(answer.status.as_u16(), 401, "{case}: {}", answer.body);
    answer.assert_error(401, "NotAuthorizedException");
    let body = answer.body.to_string();
    for part in token.split('.').filter(|p| p.len() > 8) {
        assert!(
            !body.contains(part),
            "{case}: the answer quotes the token: {body}"
        );
    }
}

/// A loopback server publishing a JWKS that tests can change, counting its requests. It stops
/// when dropped.
struct JwksServer {
    url: String,
    document: Arc<Mutex<String>>,
    hits: Arc<AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl JwksServer {
    async fn start(keys: &[&Key]) -> Self {
        let document = Arc::new(Mutex::new(jwks(keys)));
        let hits = Arc::new(AtomicU64::new(0));
        let (doc, count) = (document.clone(), hits.clone());
        let router = axum::Router::new().route(
            "/realms/acme/certs",
            axum::routing::get(move || {
                let (doc, count) = (doc.clone(), count.clone());
                async move {
                    count.fetch_add(1, Ordering::SeqCst);
                    let body = doc.lock().unwrap().clone();
                    ([(http::header::CONTENT_TYPE, "application/json")], body)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            url: format!("http://{addr}/realms/acme/certs"),
            document,
            hits,
            stop: Some(stop),
        }
    }

    fn publish(&self, keys: &[&Key]) {
        *self.document.lock().unwrap() = jwks(keys);
    }

    fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A verified user who is a member lists namespaces, and commits are stamped with the name and
/// email from the token; api-client tokens keep working beside OIDC.
#[tokio::test]
async fn a_member_user_lists_namespaces_and_commits_as_itself() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key::es256("kc-2024");
    let c = TestCatalog::with_oidc(Arc::new(file_verifier(&dir, &[&key]))).await;
    c.create_namespace("sales").await;
    c.create_table("sales", "orders").await;
    let token = key.token(&claims(json!({})));

    // Authenticated, but no member of the org yet: not a 401.
    let outsider = list_namespaces(&c, &token).await;
    assert_eq!(outsider.status.as_u16(), 403, "{}", outsider.body);

    make_member(&c, ALICE, OrgRole::Write).await;
    let listed = list_namespaces(&c, &token).await;
    assert_eq!(listed.assert_ok(200)["namespaces"], json!([["sales"]]));

    let committed = c.append_snapshot(&token, "sales", "orders", 7).await;
    let summary = &committed.assert_ok(200)["metadata"]["snapshots"][0]["summary"];
    assert_eq!(
        summary["arraylake.author-name"], "Alice Example",
        "{summary}"
    );
    assert_eq!(summary["arraylake.author-email"], "alice@example.com");

    // Without a name claim, the preferred username names the user.
    let token = key.token(&claims(json!({"name": null})));
    let committed = c.append_snapshot(&token, "sales", "orders", 8).await;
    let summary = &committed.assert_ok(200)["metadata"]["snapshots"][1]["summary"];
    assert_eq!(summary["arraylake.author-name"], "alice", "{summary}");

    list_namespaces(&c, ADMIN_TOKEN).await.assert_ok(200);
    list_namespaces(&c, &c.read_token).await.assert_ok(200);
    assert_refused(
        &list_namespaces(&c, "ema_not_a_real_token").await,
        "ema_not_a_real_token",
        "unknown api-client token",
    );
}

/// Every way a token can be wrong is a 401 NotAuthorizedException that does not quote it,
/// for a user who is a member (so nothing but authentication refuses them).
#[tokio::test]
async fn bad_tokens_are_401_error_models() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key::es256("kc-2024");
    let c = TestCatalog::with_oidc(Arc::new(file_verifier(&dir, &[&key]))).await;
    make_member(&c, ALICE, OrgRole::Admin).await;
    let now = now();
    let header = |alg: &str| json!({"alg": alg, "typ": "JWT", "kid": "kc-2024"});
    let unsigned = format!(
        "{}.{}.",
        b64(header("none").to_string().as_bytes()),
        b64(claims(json!({})).to_string().as_bytes())
    );
    // HS256 keyed with the published public key, the algorithm-confusion attack.
    let hs256 = {
        let jwk = key.jwk();
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
        let hmac = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
        let tag = aws_lc_rs::hmac::sign(&hmac, message.as_bytes());
        format!("{message}.{}", b64(tag.as_ref()))
    };
    let valid = key.token(&claims(json!({})));
    let (valid_header, valid_payload, _) = {
        let mut parts = valid.split('.');
        (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        )
    };
    let cases = [
        ("expired", key.token(&claims(json!({"exp": now - 3600})))),
        (
            "not yet valid",
            key.token(&claims(json!({"nbf": now + 3600}))),
        ),
        (
            "wrong audience",
            key.token(&claims(json!({"aud": "another-app"}))),
        ),
        (
            "wrong issuer",
            key.token(&claims(
                json!({"iss": "https://login.example.com/realms/other"}),
            )),
        ),
        ("no issuer", key.token(&claims(json!({"iss": null})))),
        ("no expiry", key.token(&claims(json!({"exp": null})))),
        ("no subject", key.token(&claims(json!({"sub": null})))),
        (
            "signed by another key",
            Key::es256("kc-2024").token(&claims(json!({}))),
        ),
        (
            "unknown kid",
            Key::es256("kc-2099").token(&claims(json!({}))),
        ),
        ("alg none", unsigned),
        ("HS256 with the public key", hs256),
        (
            "RS256 claimed for an EC key",
            key.signed(&header("RS256"), &claims(json!({}))),
        ),
        (
            "claims swapped after signing",
            format!(
                "{valid_header}.{}.{}",
                b64(claims(json!({"sub": "mallory"})).to_string().as_bytes()),
                valid.rsplit('.').next().unwrap()
            ),
        ),
        (
            "signature stripped",
            format!("{valid_header}.{valid_payload}."),
        ),
        ("not a JWT", "eyJhbGciOiJFUzI1NiJ9.garbage".into()),
    ];
    for (case, token) in &cases {
        assert_refused(&list_namespaces(&c, token).await, token, case);
    }
    // The control: the same user with a good token is let in.
    list_namespaces(&c, &valid).await.assert_ok(200);
    // Within the minute of leeway an expired token still passes.
    let late = key.token(&claims(json!({"exp": now - 20})));
    list_namespaces(&c, &late).await.assert_ok(200);
}

/// Without an issuer configured, a JWT authenticates nobody, however valid.
#[tokio::test]
async fn without_oidc_a_jwt_is_401() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key::es256("kc-2024");
    let token = key.token(&claims(json!({})));
    let plain = TestCatalog::new().await;
    make_member(&plain, ALICE, OrgRole::Admin).await;
    assert_refused(&list_namespaces(&plain, &token).await, &token, "OIDC off");
    let with_oidc = TestCatalog::with_oidc(Arc::new(file_verifier(&dir, &[&key]))).await;
    make_member(&with_oidc, ALICE, OrgRole::Admin).await;
    list_namespaces(&with_oidc, &token).await.assert_ok(200);
}

/// Keys from a URL: read once and reused; a key the issuer adds (rotation, here to RS256) is
/// found by reading the set again.
#[tokio::test]
async fn keys_from_a_url_and_rotation() {
    let old = Key::es256("2024-old");
    let new = Key::rs256("2025-new");
    let server = JwksServer::start(&[&old]).await;
    let verifier =
        verifier(JwksSource::parse(&server.url).unwrap()).with_min_refetch_interval(Duration::ZERO);
    let c = TestCatalog::with_oidc(Arc::new(verifier)).await;
    make_member(&c, ALICE, OrgRole::Read).await;

    assert_eq!(server.hits(), 0, "keys are fetched on first use");
    list_namespaces(&c, &old.token(&claims(json!({}))))
        .await
        .assert_ok(200);
    list_namespaces(&c, &old.token(&claims(json!({"iat": now() - 1}))))
        .await
        .assert_ok(200);
    assert_eq!(server.hits(), 1, "the key set is reused");

    let rotated = new.token(&claims(json!({})));
    server.publish(&[&old, &new]);
    list_namespaces(&c, &rotated).await.assert_ok(200);
    assert_eq!(server.hits(), 2, "an unknown kid reads the set again");
    list_namespaces(&c, &old.token(&claims(json!({"iat": now() - 2}))))
        .await
        .assert_ok(200);
    assert_eq!(server.hits(), 2);
}

/// Made-up key ids cannot make Floe hammer the issuer: within the refetch interval the set is
/// not read again, and every such token is a 401.
#[tokio::test]
async fn a_flood_of_unknown_kids_does_not_reach_the_issuer() {
    let key = Key::es256("kc-2024");
    let server = JwksServer::start(&[&key]).await;
    let verifier = verifier(JwksSource::parse(&server.url).unwrap())
        .with_min_refetch_interval(Duration::from_secs(3600));
    let c = TestCatalog::with_oidc(Arc::new(verifier)).await;
    make_member(&c, ALICE, OrgRole::Read).await;
    list_namespaces(&c, &key.token(&claims(json!({}))))
        .await
        .assert_ok(200);
    assert_eq!(server.hits(), 1);
    for i in 0..25 {
        let token = Key::es256(&format!("bogus-{i}")).token(&claims(json!({})));
        assert_refused(&list_namespaces(&c, &token).await, &token, "bogus kid");
    }
    assert_eq!(server.hits(), 1, "no read of the key set for bogus kids");
}

/// An issuer whose keys cannot be read is a server failure (500), not a bad token.
#[tokio::test]
async fn unreadable_keys_are_a_server_error() {
    let key = Key::es256("kc-2024");
    let server = JwksServer::start(&[&key]).await;
    let url = server.url.replace("/certs", "/missing");
    let c = TestCatalog::with_oidc(Arc::new(verifier(JwksSource::parse(&url).unwrap()))).await;
    make_member(&c, ALICE, OrgRole::Read).await;
    let token = key.token(&claims(json!({})));
    let answer = list_namespaces(&c, &token).await;
    answer.assert_error(500, "InternalServerError");
    assert!(!answer.body.to_string().contains(&token));
}
