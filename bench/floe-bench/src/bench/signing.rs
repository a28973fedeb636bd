//! The sign route's cost per storage request. Signing reads catalog rows and never storage, so
//! the bench's table is moved onto a bucket configuration with static keys by rewriting rows
//! (no S3 is needed): its row names the bucket and an `s3://` directory, as a table created on
//! such a bucket would.

use floe::catalog::Catalog;
use floe::model::{BucketAuth, BucketRow, NamespaceRow, Platform, TableRow};
use floe::store::Condition;
use floe::store::rows::{self, keys};
use serde_json::{Value, json};

const NICKNAME: &str = "bench-keys";
const BUCKET: &str = "bench-keys";
const ENDPOINT: &str = "http://127.0.0.1:9";

/// Moves the table at `table_path` (`/v1/<org>/namespaces/<ns>/tables/<t>`) onto a bucket with
/// static keys; answers its sign route and a request to sign there (a GET of a data file).
pub async fn move_onto_static_keys(
    catalog: &Catalog,
    table_path: &str,
) -> Result<(String, Value), String> {
    let parts: Vec<&str> = table_path.trim_start_matches('/').split('/').collect();
    let [_, org, _, namespace, _, table] = parts[..] else {
        return Err(format!("not a table path: {table_path}"));
    };
    let sealer = catalog
        .core
        .sealer()
        .ok_or("the bench's catalog cannot seal secrets")?;
    let sealed = sealer
        .seal(b"bench-secret-access-key")
        .await
        .map_err(|e| e.to_string())?;
    let bucket = BucketRow {
        nickname: NICKNAME.into(),
        platform: Platform::S3,
        root: format!("s3://{BUCKET}/wh"),
        auth: BucketAuth::SealedHmac {
            access_key_id: "AKIABENCH".into(),
            sealed_secret: serde_json::to_value(sealed).map_err(|e| e.to_string())?,
        },
        endpoint: Some(ENDPOINT.into()),
        region: Some("us-east-1".into()),
        path_style: true,
        static_keys_to_writers: false,
    };
    floe::bootstrap::put_bucket(&*catalog.core.store, org, &bucket)
        .await
        .map_err(|e| e.to_string())?;
    let ns = rows::get::<NamespaceRow>(&*catalog.core.store, &keys::namespace(org, namespace))
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the bench's namespace is gone")?
        .row;
    let key = keys::table(&ns.id, table);
    let current = rows::get::<TableRow>(&*catalog.core.store, &key)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the bench's table is gone")?;
    let directory = format!("s3://{BUCKET}/wh/{namespace}/{table}");
    let moved = TableRow {
        bucket: Some(NICKNAME.into()),
        directory: Some(directory.clone()),
        location: directory,
        ..current.row
    };
    catalog
        .core
        .store
        .write(vec![rows::put_tokened(
            key,
            &moved,
            Condition::Always,
            Some(current.version),
        )])
        .await
        .map_err(|e| e.to_string())?;
    catalog.forget_cached();
    let request = json!({
        "method": "GET",
        "region": "us-east-1",
        "uri": format!("{ENDPOINT}/{BUCKET}/wh/{namespace}/{table}/data/00000-0-bench.parquet"),
        "headers": {
            "User-Agent": ["Botocore/1.43"],
            "amz-sdk-invocation-id": ["00000000-0000-0000-0000-000000000000"],
            "amz-sdk-request": ["attempt=1"]
        }
    });
    Ok((format!("{table_path}/sign"), request))
}
