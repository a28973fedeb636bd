//! `write.metadata.compression-codec=gzip`: new metadata files are gzip, named as Java names
//! them (`.gz.metadata.json`), verified by the digest of their stored bytes, and served as JSON.

use floe_tests::*;
use serde_json::{Value, json};

const CODEC: &str = "write.metadata.compression-codec";

fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

fn inflate(bytes: &[u8]) -> Value {
    use std::io::Read;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut json)
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}

fn set_properties(updates: Value) -> Value {
    json!({"requirements": [], "updates": [{"action": "set-properties", "updates": updates}]})
}

#[tokio::test]
async fn gzip_tables_write_compressed_files_and_serve_json() {
    let c = TestCatalog::new().await;
    c.create_namespace("gz").await;
    let mut body = create_table_body("t");
    body["properties"] = json!({CODEC: "gzip"});
    let created = c
        .post(&tables_path("gz"), body)
        .await
        .assert_ok(200)
        .clone();
    let first = created["metadata-location"].as_str().unwrap().to_owned();
    assert!(first.ends_with(".gz.metadata.json"), "{first}");
    assert!(first.contains("/metadata/00000-"), "{first}");
    let stored = c.read_bytes(&first).await;
    assert!(is_gzip(&stored));
    assert_eq!(inflate(&stored), created["metadata"]);

    for id in 1..=20 {
        c.append_snapshot(ADMIN_TOKEN, "gz", "t", id)
            .await
            .assert_ok(200);
    }
    let loaded = c.get(&table_path("gz", "t")).await.assert_ok(200).clone();
    let latest = loaded["metadata-location"].as_str().unwrap().to_owned();
    assert!(latest.ends_with(".gz.metadata.json") && latest.contains("/metadata/00020-"));
    let stored = c.read_bytes(&latest).await;
    assert_eq!(inflate(&stored), loaded["metadata"]);
    let plain = serde_json::to_vec(&loaded["metadata"]).unwrap();
    assert!(
        stored.len() * 4 < plain.len(),
        "{} gzip bytes for {} of JSON",
        stored.len(),
        plain.len()
    );
    // The metadata log names the earlier compressed files.
    let log = loaded["metadata"]["metadata-log"].as_array().unwrap();
    assert!(log.iter().all(|e| {
        e["metadata-file"]
            .as_str()
            .unwrap()
            .ends_with(".gz.metadata.json")
    }));

    // Turning it off writes plain files again; on again, gzip.
    let off = c
        .post(
            &table_path("gz", "t"),
            set_properties(json!({CODEC: "none"})),
        )
        .await
        .assert_ok(200)
        .clone();
    let plain_file = off["metadata-location"].as_str().unwrap().to_owned();
    assert!(!plain_file.ends_with(".gz.metadata.json"), "{plain_file}");
    assert!(!is_gzip(&c.read_bytes(&plain_file).await));
    let on = c
        .post(
            &table_path("gz", "t"),
            set_properties(json!({CODEC: "GZIP"})),
        )
        .await
        .assert_ok(200)
        .clone();
    assert!(
        on["metadata-location"]
            .as_str()
            .unwrap()
            .ends_with(".gz.metadata.json")
    );
}

#[tokio::test]
async fn unknown_codecs_are_refused_and_tampered_gzip_files_are_not_served() {
    let c = TestCatalog::new().await;
    c.create_namespace("gzbad").await;
    let mut body = create_table_body("t");
    body["properties"] = json!({CODEC: "zstd"});
    let refused = c.post(&tables_path("gzbad"), body).await;
    refused.assert_error(400, "BadRequestException");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid codec name: zstd")
    );
    assert_eq!(
        c.get(&tables_path("gzbad")).await.assert_ok(200)["identifiers"],
        json!([])
    );
    c.create_table("gzbad", "t").await;
    let before = c
        .get(&table_path("gzbad", "t"))
        .await
        .assert_ok(200)
        .clone();
    c.post(
        &table_path("gzbad", "t"),
        set_properties(json!({CODEC: "lz4"})),
    )
    .await
    .assert_error(400, "BadRequestException");
    let after = c
        .get(&table_path("gzbad", "t"))
        .await
        .assert_ok(200)
        .clone();
    assert_eq!(after["metadata-location"], before["metadata-location"]);

    // A writer with the table's credentials replaces the compressed file: refused, never served.
    let gz = c
        .post(
            &table_path("gzbad", "t"),
            set_properties(json!({CODEC: "gzip"})),
        )
        .await
        .assert_ok(200)
        .clone();
    let file = gz["metadata-location"].as_str().unwrap().to_owned();
    let mut forged = gz["metadata"].clone();
    forged["properties"]["owner"] = json!("mallory");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, &serde_json::to_vec(&forged).unwrap()).unwrap();
    c.overwrite(&file, encoder.finish().unwrap()).await;
    c.catalog.forget_cached();
    c.get(&table_path("gzbad", "t"))
        .await
        .assert_error(500, "InternalServerError");
}

/// A gzip file written elsewhere registers: its digest is of the stored bytes, and the next
/// commit continues in gzip.
#[tokio::test]
async fn a_gzip_file_registers() {
    let c = TestCatalog::new().await;
    c.create_namespace("gzreg").await;
    let mut body = create_table_body("source");
    body["properties"] = json!({CODEC: "gzip"});
    let created = c
        .post(&tables_path("gzreg"), body)
        .await
        .assert_ok(200)
        .clone();
    let source = created["metadata"]["location"].as_str().unwrap().to_owned();
    let location = format!("{}-copy", source);
    let mut copy = created["metadata"].clone();
    copy["table-uuid"] = json!(uuid::Uuid::new_v4().to_string());
    copy["location"] = json!(location);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, &serde_json::to_vec(&copy).unwrap()).unwrap();
    let file = format!(
        "{location}/metadata/00007-{}.gz.metadata.json",
        uuid::Uuid::new_v4()
    );
    c.overwrite(&file, encoder.finish().unwrap()).await;
    let registered = c
        .post(
            &format!("{}/register", ns_path("gzreg")),
            json!({"name": "copy", "metadata-location": file}),
        )
        .await
        .assert_ok(200)
        .clone();
    assert_eq!(registered["metadata"], copy);
    c.catalog.forget_cached();
    c.get(&table_path("gzreg", "copy")).await.assert_ok(200);
    let next = c
        .append_snapshot(ADMIN_TOKEN, "gzreg", "copy", 1)
        .await
        .assert_ok(200)
        .clone();
    let next_file = next["metadata-location"].as_str().unwrap();
    assert!(next_file.contains("/metadata/00008-") && next_file.ends_with(".gz.metadata.json"));

    // A file named gzip that is not: 400, no table.
    let liar = format!("{location}-2/metadata/00001-x.gz.metadata.json");
    c.overwrite(&liar, serde_json::to_vec(&copy).unwrap()).await;
    c.post(
        &format!("{}/register", ns_path("gzreg")),
        json!({"name": "liar", "metadata-location": liar}),
    )
    .await
    .assert_error(400, "BadRequestException");
}
