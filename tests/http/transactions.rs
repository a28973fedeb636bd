//! Multi-table transactions (`POST /v1/{prefix}/transactions/commit`): every table moves or none
//! does, with one change event per table in the same write.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use floe_tests::*;
use serde_json::{Value, json};

fn transactions_path() -> String {
    format!("/v1/{ORG}/transactions/commit")
}

/// `change` (a commit body) for `ns.table`, as a table change of a transaction.
fn member(ns: &str, table: &str, mut change: Value) -> Value {
    change["identifier"] = json!({"namespace": [ns], "name": table});
    change
}

fn set_property(key: &str, value: &str) -> Value {
    json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {key: value}}
    ]})
}

async fn metadata(c: &TestCatalog, ns: &str, table: &str) -> Value {
    let loaded = c.get(&table_path(ns, table)).await;
    loaded.assert_ok(200)["metadata"].clone()
}

async fn events(c: &TestCatalog) -> Vec<Value> {
    let listed = c
        .management(
            http::Method::GET,
            &format!("/orgs/{ORG}/events?limit=1000"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    listed.assert_ok(200)["events"].as_array().unwrap().clone()
}

fn snapshot_ids(metadata: &Value) -> Vec<i64> {
    metadata["snapshots"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|s| s["snapshot-id"].as_i64().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn every_table_moves_with_one_consecutive_event_each() {
    let c = TestCatalog::new().await;
    c.create_namespace("facts").await;
    c.create_namespace("dims").await;
    c.create_table("facts", "sales").await;
    c.create_table("dims", "stores").await;
    c.create_table("dims", "untouched").await;
    let before = events(&c).await.len();
    let sales = metadata(&c, "facts", "sales").await;
    let stores = metadata(&c, "dims", "stores").await;
    let untouched = metadata(&c, "dims", "untouched").await;
    let body = json!({"table-changes": [
        member("facts", "sales", append_body(&sales, 11)),
        member("dims", "stores", append_body(&stores, 12)),
        // No update, and a requirement that holds: checked, not written.
        member("dims", "untouched", json!({"requirements": [
            {"type": "assert-table-uuid", "uuid": untouched["table-uuid"]}
        ], "updates": []})),
    ]});
    let answer = c.post(&transactions_path(), body).await;
    assert_eq!(answer.status.as_u16(), 204, "{}", answer.body);

    let sales = metadata(&c, "facts", "sales").await;
    let stores = metadata(&c, "dims", "stores").await;
    assert_eq!(sales["current-snapshot-id"], 11);
    assert_eq!(stores["current-snapshot-id"], 12);
    // Authors are stamped as in single commits.
    assert_eq!(
        sales["snapshots"][0]["summary"]["arraylake.author-name"],
        stores["snapshots"][0]["summary"]["arraylake.author-name"]
    );
    assert_ne!(
        sales["snapshots"][0]["summary"]["arraylake.author-name"],
        "spoofed"
    );
    assert_eq!(metadata(&c, "dims", "untouched").await, untouched);

    let all = events(&c).await;
    let new: Vec<&Value> = all[before..].iter().collect();
    assert_eq!(new.len(), 2, "one event per changed table: {new:?}");
    let sequences: Vec<u64> = new
        .iter()
        .map(|e| e["data"]["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences[1], sequences[0] + 1, "consecutive");
    let subjects: Vec<&str> = new.iter().map(|e| e["subject"].as_str().unwrap()).collect();
    assert_eq!(
        subjects,
        [
            "namespaces/facts/tables/sales",
            "namespaces/dims/tables/stores"
        ]
    );
    assert!(new.iter().all(|e| e["type"] == "io.floe.table.committed"));
}

#[tokio::test]
async fn one_failed_requirement_lands_nothing() {
    let c = TestCatalog::new().await;
    c.create_namespace("fail").await;
    c.create_table("fail", "a").await;
    c.create_table("fail", "b").await;
    let a = metadata(&c, "fail", "a").await;
    let b = metadata(&c, "fail", "b").await;
    let before = events(&c).await.len();
    let mut stale = append_body(&b, 22);
    stale["requirements"][1]["snapshot-id"] = json!(999);
    let body = json!({"table-changes": [
        member("fail", "a", append_body(&a, 21)),
        member("fail", "b", stale),
    ]});
    c.post(&transactions_path(), body)
        .await
        .assert_error(409, "CommitFailedException");
    assert_eq!(metadata(&c, "fail", "a").await, a);
    assert_eq!(metadata(&c, "fail", "b").await, b);
    assert_eq!(
        events(&c).await.len(),
        before,
        "no event for what did not land"
    );
}

#[tokio::test]
async fn bad_transactions_are_refused_before_anything_is_written() {
    let c = TestCatalog::new().await;
    c.create_namespace("bad").await;
    c.create_table("bad", "t").await;
    let t = metadata(&c, "bad", "t").await;
    let path = transactions_path();
    for (case, body) in [
        ("no table", json!({"table-changes": []})),
        ("not a transaction", json!({"tables": []})),
        (
            "no identifier",
            json!({"table-changes": [set_property("k", "v")]}),
        ),
        (
            "one table twice",
            json!({"table-changes": [
                member("bad", "t", set_property("k", "1")),
                member("bad", "t", set_property("k", "2")),
            ]}),
        ),
        (
            "a create",
            json!({"table-changes": [member("bad", "t", json!({
                "requirements": [{"type": "assert-create"}], "updates": []
            }))]}),
        ),
        (
            "an invalid update",
            json!({"table-changes": [member("bad", "t", json!({
                "requirements": [], "updates": [{"action": "no-such-update"}]
            }))]}),
        ),
    ] {
        let answer = c.post(&path, body).await;
        assert_eq!(answer.status.as_u16(), 400, "{case}: {}", answer.body);
        answer.assert_error(400, "BadRequestException");
    }
    // Above the store's one-write limit: a clear 400 naming it.
    let many: Vec<Value> = (0..=floe::catalog::MAX_TRANSACTION_TABLES)
        .map(|i| member("bad", &format!("t{i}"), set_property("k", "v")))
        .collect();
    let answer = c.post(&path, json!({"table-changes": many})).await;
    answer.assert_error(400, "BadRequestException");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&floe::catalog::MAX_TRANSACTION_TABLES.to_string()),
        "{message}"
    );
    c.post(
        &path,
        json!({"table-changes": [
            member("bad", "t", set_property("k", "v")),
            member("bad", "missing", set_property("k", "v")),
        ]}),
    )
    .await
    .assert_error(404, "NoSuchTableException");
    c.post(
        &path,
        json!({"table-changes": [member("nowhere", "t", set_property("k", "v"))]}),
    )
    .await
    .assert_error(404, "NoSuchNamespaceException");
    assert_eq!(metadata(&c, "bad", "t").await, t);
}

/// As many tables as the limit allows, in one write (on DynamoDB: one TransactWriteItems of
/// 2 × 49 + 2 = 100 items with an idempotency key).
#[tokio::test]
async fn the_largest_transaction_lands_in_one_write() {
    let c = TestCatalog::new().await;
    c.create_namespace("big").await;
    let count = floe::catalog::MAX_TRANSACTION_TABLES;
    for i in 0..count {
        c.create_table("big", &format!("t{i}")).await;
    }
    let changes: Vec<Value> = (0..count)
        .map(|i| member("big", &format!("t{i}"), set_property("round", "1")))
        .collect();
    let key = uuid::Uuid::now_v7().to_string();
    let answer = c
        .send(
            http::Method::POST,
            &format!("/iceberg{}", transactions_path()),
            Some(ADMIN_TOKEN),
            Some(bytes::Bytes::from(
                json!({"table-changes": changes}).to_string(),
            )),
            &[("idempotency-key", &key)],
        )
        .await;
    assert_eq!(answer.status.as_u16(), 204, "{}", answer.body);
    for i in [0, count - 1] {
        let t = metadata(&c, "big", &format!("t{i}")).await;
        assert_eq!(t["properties"]["round"], "1");
    }
}

#[tokio::test]
async fn callers_need_write_on_every_table() {
    let c = TestCatalog::new().await;
    c.create_namespace("authz").await;
    c.create_table("authz", "a").await;
    let reader = c
        .management(
            http::Method::POST,
            &format!("/orgs/{ORG}/api-clients"),
            ADMIN_TOKEN,
            Some(json!({"name": "reader", "role": "read"})),
        )
        .await;
    let token = reader.assert_ok(201)["token"].as_str().unwrap().to_owned();
    let body = json!({"table-changes": [member("authz", "a", set_property("k", "v"))]});
    let denied = c.post_as(&token, &transactions_path(), body).await;
    denied.assert_error(403, "ForbiddenException");
    assert!(metadata(&c, "authz", "a").await["properties"]["k"].is_null());
}

/// A table the transaction changes nothing in is held to the state its requirements were
/// checked on: a commit that lands there before the transaction's write makes it rebase, and the
/// rebased requirement fails.
#[tokio::test]
async fn an_unchanged_table_is_held_to_what_was_read() {
    let pause = Pause::new();
    let (c, armed) = TestCatalog::with_fault(
        Target::Write(writes_two_tables),
        Fault::Pause(pause.clone()),
    )
    .await;
    c.create_namespace("held").await;
    c.create_table("held", "a").await;
    c.create_table("held", "b").await;
    let b = metadata(&c, "held", "b").await;
    let body = json!({"table-changes": [
        member("held", "a", set_property("k", "v")),
        member("held", "b", json!({"requirements": [
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": null}
        ], "updates": []})),
    ]});
    armed.store(true, Ordering::SeqCst);
    let path = transactions_path();
    let (answer, ()) = tokio::join!(c.post(&path, body), async {
        pause.reached().await;
        c.append_snapshot(ADMIN_TOKEN, "held", "b", 31)
            .await
            .assert_ok(200);
        pause.resume();
    });
    answer.assert_error(409, "CommitFailedException");
    assert!(metadata(&c, "held", "a").await["properties"]["k"].is_null());
    assert_ne!(metadata(&c, "held", "b").await, b);
}

/// A write that touches two table rows: a transaction's.
fn writes_two_tables(writes: &[floe::store::Write]) -> bool {
    writes
        .iter()
        .filter(|w| w.key().sk.starts_with("TABLE#"))
        .count()
        >= 2
}

/// Round after round, a transaction appends to two tables while single commits append to each:
/// the transaction's snapshots are on both tables or on neither, and every table has exactly one
/// event per commit that landed on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactions_racing_single_commits_move_all_or_nothing() {
    const ROUNDS: i64 = 20;
    let c = Arc::new(TestCatalog::new().await);
    c.create_namespace("race").await;
    c.create_table("race", "a").await;
    c.create_table("race", "b").await;
    let mut landed = 0;
    for round in 0..ROUNDS {
        let (a, b) = (
            metadata(&c, "race", "a").await,
            metadata(&c, "race", "b").await,
        );
        let txn_a = 1_000 + round * 10;
        let txn_b = txn_a + 1;
        let body = json!({"table-changes": [
            member("race", "a", append_body(&a, txn_a)),
            member("race", "b", append_body(&b, txn_b)),
        ]});
        let transaction = {
            let c = c.clone();
            tokio::spawn(async move { c.post(&transactions_path(), body).await })
        };
        let mut singles = Vec::new();
        for (i, table) in ["a", "b", "a", "b"].into_iter().enumerate() {
            let c = c.clone();
            let id = 100_000 + round * 10 + i as i64;
            singles.push(tokio::spawn(async move {
                c.append_snapshot(ADMIN_TOKEN, "race", table, id).await
            }));
        }
        let answer = transaction.await.unwrap();
        for single in singles {
            let status = single.await.unwrap().status.as_u16();
            assert!(
                matches!(status, 200 | 409),
                "single commit answered {status}"
            );
        }
        let status = answer.status.as_u16();
        assert!(matches!(status, 204 | 409), "{status}: {}", answer.body);
        let on_a = snapshot_ids(&metadata(&c, "race", "a").await).contains(&txn_a);
        let on_b = snapshot_ids(&metadata(&c, "race", "b").await).contains(&txn_b);
        assert_eq!(on_a, on_b, "round {round}: all or nothing");
        assert_eq!(on_a, status == 204, "round {round}: the answer tells");
        landed += i32::from(on_a);
    }
    // One event per landed commit on each table: as many as its metadata log has entries.
    let all = events(&c).await;
    for table in ["a", "b"] {
        let subject = format!("namespaces/race/tables/{table}");
        let committed = all
            .iter()
            .filter(|e| e["type"] == "io.floe.table.committed" && e["subject"] == subject)
            .count();
        let log = metadata(&c, "race", table).await["metadata-log"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(committed, log, "{table}");
    }
    eprintln!("transactions landed in {landed} of {ROUNDS} rounds");
}

#[tokio::test]
async fn a_retry_with_the_same_key_lands_once() {
    let c = TestCatalog::new().await;
    c.create_namespace("idem").await;
    c.create_table("idem", "a").await;
    let a = metadata(&c, "idem", "a").await;
    let body = bytes::Bytes::from(
        json!({"table-changes": [member("idem", "a", append_body(&a, 41))]}).to_string(),
    );
    let key = uuid::Uuid::now_v7().to_string();
    for _ in 0..2 {
        let answer = c
            .send(
                http::Method::POST,
                &format!("/iceberg{}", transactions_path()),
                Some(ADMIN_TOKEN),
                Some(body.clone()),
                &[("idempotency-key", &key)],
            )
            .await;
        assert_eq!(answer.status.as_u16(), 204, "{}", answer.body);
    }
    let a = metadata(&c, "idem", "a").await;
    assert_eq!(snapshot_ids(&a), [41]);
    assert_eq!(a["metadata-log"].as_array().unwrap().len(), 1);
}
