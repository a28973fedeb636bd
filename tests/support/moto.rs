//! Access to the moto server the test script started (DynamoDB, S3, STS and KMS).

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use floe::model::{BucketAuth, BucketRow, Platform};

pub fn endpoint() -> String {
    std::env::var("FLOE_MOTO_ENDPOINT").expect(
        "FLOE_MOTO_ENDPOINT is not set: run ./scripts/test, which starts moto on a loopback port",
    )
}

/// SDK settings for moto, loaded the way production loads them (time source, retries, ...).
pub async fn sdk() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await
}

/// A name no other test uses, for tables and buckets.
pub fn unique(stem: &str) -> String {
    format!(
        "{stem}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

pub async fn create_bucket(name: &str) {
    let client = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk().await)
            .force_path_style(true)
            .build(),
    );
    client
        .create_bucket()
        .bucket(name)
        .send()
        .await
        .expect("create bucket on moto");
}

/// A bucket configuration for a moto bucket.
pub fn s3_bucket(nickname: &str, bucket: &str, auth: BucketAuth) -> BucketRow {
    BucketRow {
        nickname: nickname.into(),
        platform: Platform::S3,
        root: format!("s3://{bucket}/wh"),
        auth,
        endpoint: Some(endpoint()),
        region: Some("us-east-1".into()),
        path_style: true,
        static_keys_to_writers: false,
    }
}

/// The backend state moto records, including every AssumeRole call.
pub async fn data() -> serde_json::Value {
    use http_body_util::{BodyExt, Empty};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let uri: http::Uri = format!("{}/moto-api/data.json", endpoint())
        .parse()
        .unwrap();
    let response = client.get(uri).await.expect("moto answers");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).expect("moto data is JSON")
}

/// Session policies of every AssumeRole call moto has seen for `session_name`.
pub async fn assumed_role_policies(session_name: &str) -> Vec<String> {
    data().await["sts"]["AssumedRole"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .filter(|c| c["session_name"] == session_name)
                .filter_map(|c| c["policy"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A KMS client for moto.
pub async fn kms() -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(&sdk().await)
}

/// A new symmetric KMS key on moto; returns its key id.
pub async fn create_kms_key() -> String {
    kms()
        .await
        .create_key()
        .description(unique("floe-secrets"))
        .send()
        .await
        .expect("create KMS key on moto")
        .key_metadata
        .expect("key metadata")
        .key_id
}
