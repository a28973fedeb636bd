//! Downscoped-token vending, against a loopback fake of Google's token endpoint and STS: the
//! exchange the catalog asks for, and the keys it hands engines. That Google enforces the
//! boundary only real GCS can show.

use base64::Engine;
use floe::model::{BucketAuth, Principal, PrincipalKind};
use floe::vending::{AccessLevel, CredentialVendor};
use floe_tests::gcs::{self, DOWNSCOPED_TOKEN_SECONDS, FakeGoogle};
use serde_json::{Value, json};

fn principal() -> Principal {
    Principal {
        id: "api-client:etl".into(),
        kind: PrincipalKind::ApiClient,
        name: "etl".into(),
        email: None,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The claims of a JWT (unverified).
fn claims(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).unwrap().trim_end_matches('=');
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn vended_tokens_are_downscoped_to_the_table_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let google = FakeGoogle::start(dir.path()).await;
    let vendor = google.vendor(None);
    let bucket = gcs::gcs_bucket("lake", "my-lake", BucketAuth::ServiceAccount);
    let location = "gs://my-lake/wh/ns-1/orders-x";

    let before = now_ms();
    let read = vendor
        .vend(&bucket, location, AccessLevel::Read, &principal())
        .await
        .unwrap();

    // The source token: the key file's service account, signed JWT grant, cloud-platform scope.
    let grants = google.requests("/oauth2/token");
    assert_eq!(grants.len(), 1);
    assert_eq!(
        grants[0].form["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    let assertion = claims(&grants[0].form["assertion"]);
    assert_eq!(
        assertion["iss"],
        "floe-catalog@floe-test.iam.gserviceaccount.com"
    );
    assert_eq!(
        assertion["scope"],
        "https://www.googleapis.com/auth/cloud-platform"
    );

    // The exchange: that token, for an access token bounded to the table's prefix, read only.
    let exchanges = google.exchanges();
    assert_eq!(exchanges.len(), 1);
    let form = &exchanges[0].form;
    assert_eq!(
        form["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(form["subject_token"], "source-token-1");
    assert_eq!(
        form["subject_token_type"],
        "urn:ietf:params:oauth:token-type:access_token"
    );
    assert_eq!(
        form["requested_token_type"],
        "urn:ietf:params:oauth:token-type:access_token"
    );
    assert_eq!(
        FakeGoogle::boundary(&exchanges[0]),
        json!({"accessBoundary": {"accessBoundaryRules": [{
            "availableResource": "//storage.googleapis.com/projects/_/buckets/my-lake",
            "availablePermissions": ["inRole:roles/storage.objectViewer"],
            "availabilityCondition": {
                "title": "Floe table prefix",
                "expression": "resource.name.startsWith('projects/_/buckets/my-lake/objects/wh/ns-1/orders-x/') || api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('wh/ns-1/orders-x/')"
            }
        }]}})
    );

    // Both spec forms carry the token and its expiry (epoch millis); nothing else.
    assert_eq!(read.credentials.len(), 1);
    assert_eq!(read.credentials[0].prefix, location);
    let config = &read.credentials[0].config;
    assert_eq!(config["gcs.oauth2.token"], "downscoped-1");
    let expires: u64 = config["gcs.oauth2.token-expires-at"].parse().unwrap();
    let lifetime = DOWNSCOPED_TOKEN_SECONDS * 1000;
    assert!(
        (before + lifetime..=now_ms() + lifetime).contains(&expires),
        "{expires}"
    );
    assert_eq!(&read.config, config);
    assert_eq!(config.len(), 2, "{config:?}");

    // Writers get object admin on the same prefix; the source token is reused.
    let write = vendor
        .vend(&bucket, location, AccessLevel::ReadWrite, &principal())
        .await
        .unwrap();
    assert_eq!(write.config["gcs.oauth2.token"], "downscoped-2");
    let exchanges = google.exchanges();
    assert_eq!(exchanges.len(), 2);
    assert_eq!(exchanges[1].form["subject_token"], "source-token-1");
    let rule = &FakeGoogle::boundary(&exchanges[1])["accessBoundary"]["accessBoundaryRules"][0];
    assert_eq!(
        rule["availablePermissions"],
        json!(["inRole:roles/storage.objectAdmin"])
    );
    assert_eq!(google.requests("/oauth2/token").len(), 1);

    // Fresh tokens are remembered per table and level.
    let again = vendor
        .vend(&bucket, location, AccessLevel::Read, &principal())
        .await
        .unwrap();
    assert_eq!(again.config["gcs.oauth2.token"], "downscoped-1");
    assert_eq!(vendor.exchanges(), 2);
}

/// With an emulator configured, engines are pointed at it.
#[tokio::test]
async fn engines_are_sent_to_the_emulator() {
    let dir = tempfile::tempdir().unwrap();
    let google = FakeGoogle::start(dir.path()).await;
    let vendor = google.vendor(Some("http://127.0.0.1:4443".into()));
    let bucket = gcs::gcs_bucket("lake", "my-lake", BucketAuth::ServiceAccount);
    let vended = vendor
        .vend(
            &bucket,
            "gs://my-lake/wh/t",
            AccessLevel::Read,
            &principal(),
        )
        .await
        .unwrap();
    assert_eq!(vended.config["gcs.service.host"], "http://127.0.0.1:4443");
    assert_eq!(
        vended.credentials[0].config["gcs.service.host"],
        "http://127.0.0.1:4443"
    );
}

/// Anonymous buckets are refused (400); a failed exchange is a retryable 500 that names no
/// token; the bucket root itself is never vended.
#[tokio::test]
async fn failures_never_vend() {
    let dir = tempfile::tempdir().unwrap();
    let google = FakeGoogle::start(dir.path()).await;
    let vendor = google.vendor(None);
    let anonymous = gcs::gcs_bucket("lake", "my-lake", BucketAuth::Anonymous);
    let refused = vendor
        .vend(
            &anonymous,
            "gs://my-lake/wh/t",
            AccessLevel::Read,
            &principal(),
        )
        .await
        .map_err(floe::error::CatalogError::from)
        .unwrap_err();
    assert!(
        matches!(refused, floe::error::CatalogError::BadRequest(_)),
        "{refused}"
    );
    let bucket = gcs::gcs_bucket("lake", "my-lake", BucketAuth::ServiceAccount);
    assert!(
        vendor
            .vend(&bucket, "gs://my-lake", AccessLevel::Read, &principal())
            .await
            .is_err()
    );
    assert!(google.exchanges().is_empty());

    // Nothing listens on a freshly closed loopback port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let unreachable = floe::vending::gcs::GcsVendor::new(
        std::sync::Arc::new(floe::google::GoogleCredentials::new(Some(
            google.key_file().to_owned(),
        ))),
        &format!("http://127.0.0.1:{port}/v1/token"),
        std::sync::Arc::new(floe::clock::SystemClock),
        None,
        0,
    )
    .unwrap();
    let failed = unreachable
        .vend(
            &bucket,
            "gs://my-lake/wh/t",
            AccessLevel::Read,
            &principal(),
        )
        .await
        .map_err(floe::error::CatalogError::from)
        .unwrap_err();
    assert!(
        matches!(failed, floe::error::CatalogError::Internal(_)),
        "{failed}"
    );
    assert!(!failed.to_string().contains("source-token"), "{failed}");
}
