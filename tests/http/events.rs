//! Change events: one event per change that landed and none for one that did not, a gap-free
//! sequence per org under concurrent writers, the read API's authorization, retention and 410,
//! and the local publishers (NDJSON file, webhook) delivering in order across a restart.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use floe::bootstrap;
use floe::catalog::purge::RECOVERY_PERIOD;
use floe::clock::{Clock, ManualClock, SystemClock};
use floe::events::publish::{NdjsonSink, Publisher, Sink, SinkError, WebhookSink};
use floe::events::{ChangeEvent, Kind};
use floe::model::{Principal, PrincipalKind};
use floe::store::observed::ObservedStore;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// Every event the caller may see, read page by page.
async fn read_all(c: &TestCatalog, token: &str) -> Vec<Value> {
    let mut events = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(token) => format!("/orgs/{ORG}/events?limit=3&after={token}"),
            None => format!("/orgs/{ORG}/events?limit=3"),
        };
        let page = c.management(Method::GET, &path, token, None).await;
        let body = page.assert_ok(200).clone();
        let batch = body["events"].as_array().unwrap().clone();
        let next = body["next-token"].as_str().unwrap().to_owned();
        if batch.is_empty() && after.as_deref() == Some(next.as_str()) {
            return events;
        }
        events.extend(batch);
        after = Some(next);
    }
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn sequences(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["data"]["sequence"].as_u64().unwrap())
        .collect()
}

async fn admin(c: &TestCatalog, method: Method, path: &str, body: Option<Value>) -> Answer {
    c.management(method, &format!("/orgs/{ORG}{path}"), ADMIN_TOKEN, body)
        .await
}

#[tokio::test]
async fn every_change_records_exactly_one_event_with_its_fields() {
    let c = TestCatalog::new().await;
    c.create_namespace("sales").await;
    c.post(
        &format!("{}/properties", ns_path("sales")),
        json!({"updates": {"team": "revenue"}, "removals": ["nope"]}),
    )
    .await
    .assert_ok(200);
    let created = c.create_table("sales", "orders").await;
    let uuid = created["metadata"]["table-uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let first_location = created["metadata-location"].as_str().unwrap().to_owned();
    let committed = c
        .append_snapshot(ADMIN_TOKEN, "sales", "orders", 41)
        .await
        .assert_ok(200)
        .clone();
    let second_location = committed["metadata-location"].as_str().unwrap().to_owned();
    c.post(
        &format!("/v1/{ORG}/tables/rename"),
        json!({"source": {"namespace": ["sales"], "name": "orders"},
               "destination": {"namespace": ["sales"], "name": "orders_v2"}}),
    )
    .await
    .assert_ok(204);
    admin(
        &c,
        Method::POST,
        "/teams",
        Some(json!({"name": "analysts"})),
    )
    .await
    .assert_ok(201);
    admin(
        &c,
        Method::PUT,
        "/namespaces/sales/grants",
        Some(json!({"principal": "team:analysts", "action": "read", "table": "orders_v2"})),
    )
    .await
    .assert_ok(204);
    admin(
        &c,
        Method::DELETE,
        "/namespaces/sales/grants?principal=team:analysts&table=orders_v2",
        None,
    )
    .await
    .assert_ok(204);
    admin(
        &c,
        Method::PATCH,
        "/namespaces/sales",
        Some(json!({"visibility": "AUTHENTICATED_PUBLIC"})),
    )
    .await
    .assert_ok(200);
    c.delete(&table_path("sales", "orders_v2"))
        .await
        .assert_ok(204);
    admin(
        &c,
        Method::POST,
        &format!("/namespaces/sales/deleted-tables/{uuid}/restore"),
        None,
    )
    .await
    .assert_ok(200);
    c.delete(&table_path("sales", "orders_v2"))
        .await
        .assert_ok(204);
    c.delete(&ns_path("sales")).await.assert_ok(204);
    admin(&c, Method::POST, "/namespaces/sales/restore", None)
        .await
        .assert_ok(200);
    admin(&c, Method::DELETE, "/namespaces/sales?immediate=true", None)
        .await
        .assert_ok(204);
    let now = SystemClock.now_ms() + RECOVERY_PERIOD.as_millis() as u64;
    c.catalog
        .namespaces
        .purge_expired(now, RECOVERY_PERIOD, 100)
        .await
        .unwrap();

    let events = read_all(&c, ADMIN_TOKEN).await;
    assert_eq!(
        kinds(&events),
        [
            "io.floe.namespace.created",
            "io.floe.namespace.properties-updated",
            "io.floe.table.created",
            "io.floe.table.committed",
            "io.floe.table.renamed",
            "io.floe.grant.changed",
            "io.floe.grant.changed",
            "io.floe.namespace.visibility-changed",
            "io.floe.table.dropped",
            "io.floe.table.restored",
            "io.floe.table.dropped",
            "io.floe.namespace.dropped",
            "io.floe.namespace.restored",
            "io.floe.namespace.dropped",
            // The namespace's purge takes its dropped table first.
            "io.floe.table.purged",
            "io.floe.namespace.purged",
        ]
    );
    assert_eq!(sequences(&events), (1..=16).collect::<Vec<_>>());
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["specversion"], "1.0");
        assert_eq!(event["source"], format!("/orgs/{ORG}"));
        assert_eq!(event["id"], (i + 1).to_string());
        assert_eq!(event["sequence"], format!("{:020}", i + 1));
        assert_eq!(event["data"]["org"], ORG);
        assert_eq!(event["data"]["namespace"], "sales");
        assert!(event["time"].as_str().unwrap().ends_with('Z'));
    }
    let by_admin = &events[3]["data"]["principal"];
    assert_eq!(by_admin["id"], bootstrap::dev_admin(ORG).id);
    assert_eq!(events[1]["data"]["updated-properties"], json!(["team"]));
    assert!(events[1]["data"].get("removed-properties").is_none());
    assert_eq!(events[2]["data"]["table-uuid"], uuid);
    assert_eq!(events[2]["data"]["metadata-location"], first_location);
    let commit = &events[3];
    assert_eq!(commit["subject"], "namespaces/sales/tables/orders");
    assert_eq!(commit["data"]["table-uuid"], uuid);
    assert_eq!(commit["data"]["previous-metadata-location"], first_location);
    assert_eq!(commit["data"]["metadata-location"], second_location);
    assert_eq!(commit["data"]["added-snapshot-count"], 1);
    let snapshot = &commit["data"]["added-snapshots"][0];
    assert_eq!(snapshot["snapshot-id"], 41);
    assert_eq!(snapshot["operation"], "append");
    // As written: the catalog's author stamp, not the client's.
    assert_ne!(snapshot["summary"]["arraylake.author-name"], "spoofed");
    assert_eq!(snapshot["summary"]["custom.key"], "kept");
    assert_eq!(
        commit["data"]["ref-changes"],
        json!([{"ref": "main", "snapshot-id": 41}])
    );
    assert_eq!(
        events[4]["data"]["renamed-to"],
        json!({"namespace": "sales", "table": "orders_v2"})
    );
    assert_eq!(
        events[5]["data"]["grant"],
        json!({"principal": "team:analysts", "table": "orders_v2", "action": "read"})
    );
    assert!(events[6]["data"]["grant"].get("action").is_none());
    assert_eq!(events[7]["data"]["visibility"], "AUTHENTICATED_PUBLIC");
    assert_eq!(events[8]["data"]["table"], "orders_v2");
    assert_eq!(
        events[8]["data"]["previous-metadata-location"],
        second_location
    );
    assert_eq!(events[9]["data"]["table"], "orders_v2");
    assert_eq!(events[9]["data"]["table-uuid"], uuid);
    assert_eq!(events[9]["data"]["metadata-location"], second_location);
    for purged in [&events[14], &events[15]] {
        assert_eq!(purged["data"]["principal"]["id"], "floe:purge");
    }
    assert_eq!(events[14]["data"]["table-uuid"], uuid);
    assert_eq!(events[14]["subject"], "namespaces/sales/tables/orders_v2");
}

#[tokio::test]
async fn a_change_that_did_not_land_has_no_event_and_one_that_landed_unseen_has_one() {
    let (c, armed) =
        TestCatalog::with_fault(Target::Write(is_table_swap), Fault::UnknownOutcome).await;
    c.create_namespace("unk").await;
    c.create_table("unk", "t").await;
    let before = read_all(&c, ADMIN_TOKEN).await.len();
    // A failed requirement: 409, nothing written.
    let loaded = c.get(&table_path("unk", "t")).await.assert_ok(200).clone();
    let mut stale = append_body(&loaded["metadata"], 5);
    stale["requirements"][0]["uuid"] = json!("00000000-0000-0000-0000-000000000000");
    c.post(&table_path("unk", "t"), stale)
        .await
        .assert_error(409, "CommitFailedException");
    // An unknown outcome of a write that did not land: 500, nothing written.
    armed.store(true, Ordering::SeqCst);
    c.append_snapshot(ADMIN_TOKEN, "unk", "t", 6)
        .await
        .assert_error(500, "CommitStateUnknownException");
    armed.store(false, Ordering::SeqCst);
    assert_eq!(read_all(&c, ADMIN_TOKEN).await.len(), before);

    let pause = Pause::new();
    let (c, armed) = TestCatalog::with_fault(
        Target::Write(is_table_swap),
        Fault::LandedThenUnknown(pause.clone()),
    )
    .await;
    c.create_namespace("landed").await;
    c.create_table("landed", "t").await;
    armed.store(true, Ordering::SeqCst);
    let commit = {
        let c = &c;
        async move { c.append_snapshot(ADMIN_TOKEN, "landed", "t", 7).await }
    };
    let resume = async {
        pause.reached().await;
        pause.resume();
    };
    let (answer, ()) = tokio::join!(commit, resume);
    answer.assert_error(500, "CommitStateUnknownException");
    let events = read_all(&c, ADMIN_TOKEN).await;
    assert_eq!(
        kinds(&events),
        [
            "io.floe.namespace.created",
            "io.floe.table.created",
            "io.floe.table.committed"
        ]
    );
}

#[tokio::test]
async fn concurrent_writers_of_one_org_get_a_gap_free_sequence() {
    let c = Arc::new(TestCatalog::new().await);
    c.create_namespace("busy").await;
    for i in 0..6 {
        c.create_table("busy", &format!("t{i}")).await;
    }
    let mut writers = Vec::new();
    for i in 0..6 {
        let c = c.clone();
        writers.push(tokio::spawn(async move {
            for n in 0..4 {
                let id = 1000 * (i + 1) + n;
                c.append_snapshot(ADMIN_TOKEN, "busy", &format!("t{i}"), id)
                    .await
                    .assert_ok(200);
            }
        }));
    }
    for i in 0..4 {
        let c = c.clone();
        writers.push(tokio::spawn(async move {
            c.create_namespace(&format!("extra{i}")).await;
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let events = read_all(&c, ADMIN_TOKEN).await;
    // 1 namespace + 6 tables before, then 24 commits and 4 namespaces at once.
    assert_eq!(events.len(), 1 + 6 + 24 + 4);
    assert_eq!(sequences(&events), (1..=35).collect::<Vec<_>>());
    let snapshots: BTreeSet<i64> = events
        .iter()
        .filter(|e| e["type"] == "io.floe.table.committed")
        .map(|e| {
            e["data"]["added-snapshots"][0]["snapshot-id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(snapshots.len(), 24, "one event per commit");
    // In order per table: each table's snapshots in the order they were committed.
    for i in 0..6 {
        let table = format!("t{i}");
        let ids: Vec<i64> = events
            .iter()
            .filter(|e| e["type"] == "io.floe.table.committed" && e["data"]["table"] == table)
            .map(|e| {
                e["data"]["added-snapshots"][0]["snapshot-id"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "{table}");
        // Numbered on their own too: created, then four commits, with no gaps.
        let numbers: Vec<u64> = events
            .iter()
            .filter(|e| e["data"]["table"] == table)
            .map(|e| e["data"]["entity-sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5], "{table}");
    }
}

/// Paging the feed while writers change the org: every page read mid-burst, followed from its
/// token, misses and repeats nothing.
#[tokio::test]
async fn a_reader_paging_during_a_burst_of_writers_misses_and_repeats_nothing() {
    let c = Arc::new(TestCatalog::new().await);
    c.create_namespace("burst").await;
    for i in 0..8 {
        c.create_table("burst", &format!("t{i}")).await;
    }
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                for n in 0..5 {
                    c.append_snapshot(ADMIN_TOKEN, "burst", &format!("t{i}"), 100 * (i + 1) + n)
                        .await
                        .assert_ok(200);
                }
            })
        })
        .collect();
    let reader = {
        let c = c.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut after: Option<String> = None;
            for _ in 0..200 {
                let path = match &after {
                    Some(token) => format!("/orgs/{ORG}/events?limit=4&after={token}"),
                    None => format!("/orgs/{ORG}/events?limit=4"),
                };
                let page = c.management(Method::GET, &path, ADMIN_TOKEN, None).await;
                let body = page.assert_ok(200).clone();
                seen.extend(body["events"].as_array().unwrap().clone());
                after = Some(body["next-token"].as_str().unwrap().to_owned());
                tokio::task::yield_now().await;
            }
            (seen, after)
        })
    };
    for writer in writers {
        writer.await.unwrap();
    }
    let (seen, after) = reader.await.unwrap();
    check_burst(seen, &c, after.unwrap()).await;
}

/// Follows `seen` to the end of the feed from `after`, and checks it holds every event once.
async fn check_burst(mut seen: Vec<Value>, c: &TestCatalog, mut after: String) {
    loop {
        let path = format!("/orgs/{ORG}/events?limit=50&after={after}");
        let body = c
            .management(Method::GET, &path, ADMIN_TOKEN, None)
            .await
            .assert_ok(200)
            .clone();
        let batch = body["events"].as_array().unwrap().clone();
        if batch.is_empty() {
            break;
        }
        seen.extend(batch);
        after = body["next-token"].as_str().unwrap().to_owned();
    }
    // 1 namespace, 8 tables, 40 commits: each once, in sequence order.
    assert_eq!(sequences(&seen), (1..=49).collect::<Vec<_>>());
    assert_eq!(seen, read_all(c, ADMIN_TOKEN).await);
}

/// Changes of different tables write no item in common: nothing on the write path is shared
/// by every change of the org, so they never queue on one item.
#[tokio::test]
async fn commits_to_different_tables_write_no_item_in_common() {
    let written: Arc<std::sync::Mutex<Vec<Vec<floe::store::Key>>>> = Arc::default();
    let recorded = written.clone();
    let c = TestCatalog::custom(
        Wrap {
            // The keys of every write batch but its checks.
            store: Box::new(move |inner| {
                Arc::new(ObservedStore::batches(
                    inner,
                    Arc::new(move |writes: &[floe::store::Write]| {
                        let keys = writes
                            .iter()
                            .filter(|w| !matches!(w, floe::store::Write::Check { .. }))
                            .map(|w| w.key().clone())
                            .collect();
                        recorded.lock().unwrap().push(keys);
                    }),
                ))
            }),
            ..Wrap::default()
        },
        |b| b,
    )
    .await;
    c.create_namespace("apart").await;
    c.create_table("apart", "a").await;
    c.create_table("apart", "b").await;
    written.lock().unwrap().clear();
    c.append_snapshot(ADMIN_TOKEN, "apart", "a", 1)
        .await
        .assert_ok(200);
    let first = std::mem::take(&mut *written.lock().unwrap());
    c.append_snapshot(ADMIN_TOKEN, "apart", "b", 2)
        .await
        .assert_ok(200);
    let second = std::mem::take(&mut *written.lock().unwrap());
    let keys = |batches: &[Vec<floe::store::Key>]| -> BTreeSet<floe::store::Key> {
        batches.iter().flatten().cloned().collect()
    };
    let (first, second) = (keys(&first), keys(&second));
    assert!(!first.is_empty() && !second.is_empty());
    let shared: Vec<_> = first.intersection(&second).collect();
    assert!(shared.is_empty(), "both commits wrote {shared:?}");
    // Their events are still numbered in the org's sequence.
    let events = read_all(&c, ADMIN_TOKEN).await;
    assert_eq!(sequences(&events), (1..=5).collect::<Vec<_>>());
}

async fn table_reader(c: &TestCatalog) -> String {
    let principal = Principal {
        id: "api-client:dashboard".into(),
        kind: PrincipalKind::ApiClient,
        name: "dashboard".into(),
        email: None,
    };
    let token = floe::auth::generate_token();
    bootstrap::register_token(&*c.store, &SystemClock, &principal, &token)
        .await
        .unwrap();
    admin(
        c,
        Method::PUT,
        "/namespaces/shared/grants",
        Some(json!({"principal": principal.id, "action": "read", "table": "visible"})),
    )
    .await
    .assert_ok(204);
    token
}

#[tokio::test]
async fn readers_see_the_events_of_what_they_may_read() {
    let c = TestCatalog::new().await;
    c.create_namespace("shared").await;
    c.create_namespace("hidden").await;
    c.create_table("shared", "visible").await;
    c.create_table("shared", "secret").await;
    c.create_table("hidden", "t").await;
    let token = table_reader(&c).await;
    c.append_snapshot(ADMIN_TOKEN, "shared", "visible", 1)
        .await
        .assert_ok(200);
    c.append_snapshot(ADMIN_TOKEN, "shared", "secret", 2)
        .await
        .assert_ok(200);

    let all = read_all(&c, ADMIN_TOKEN).await;
    assert_eq!(all.len(), 8);
    // A table grant: its table's events and its (now visible) namespace's; no other table's,
    // no other namespace's, and nothing about access.
    let seen = read_all(&c, &token).await;
    let subjects: Vec<&str> = seen
        .iter()
        .map(|e| e["subject"].as_str().unwrap())
        .collect();
    assert_eq!(
        subjects,
        [
            "namespaces/shared",
            "namespaces/shared/tables/visible",
            "namespaces/shared/tables/visible"
        ]
    );
    // An org reader: every data event, no grant.
    let read = read_all(&c, &c.read_token).await;
    assert_eq!(read.len(), 7);
    assert!(read.iter().all(|e| e["type"] != "io.floe.grant.changed"));
    // Outsiders see nothing; an unknown org is 404.
    c.management(
        Method::GET,
        &format!("/orgs/{ORG}/events"),
        &c.outsider_token,
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(Method::GET, "/orgs/nope/events", ADMIN_TOKEN, None)
        .await
        .assert_error(404, "NotFoundException");
    for bad in ["limit=0", "limit=1001", "limit=x", "after=x", "after=99"] {
        c.management(
            Method::GET,
            &format!("/orgs/{ORG}/events?{bad}"),
            ADMIN_TOKEN,
            None,
        )
        .await
        .assert_error(400, "BadRequestException");
    }
}

#[tokio::test]
async fn a_table_grant_shows_the_events_of_the_table_holding_the_name_not_of_a_dropped_one() {
    let c = TestCatalog::new().await;
    c.create_namespace("shared").await;
    let dropped = c.create_table("shared", "visible").await["metadata"]["table-uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    // Granted before the drop: the grant stays on the name and covers the table created under
    // it, never the dropped one.
    let token = table_reader(&c).await;
    c.append_snapshot(ADMIN_TOKEN, "shared", "visible", 1)
        .await
        .assert_ok(200);
    c.delete(&table_path("shared", "visible"))
        .await
        .assert_ok(204);
    let current = c.create_table("shared", "visible").await["metadata"]["table-uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(dropped, current);
    c.append_snapshot(ADMIN_TOKEN, "shared", "visible", 2)
        .await
        .assert_ok(200);

    // The org reader sees both tables' histories ...
    let all = read_all(&c, &c.read_token).await;
    assert!(
        all.iter()
            .any(|e| e["data"]["table-uuid"] == dropped.as_str())
    );
    // ... a grant on the name only the table that holds it now.
    let seen = read_all(&c, &token).await;
    let tables: Vec<(&str, &str)> = seen
        .iter()
        .filter(|e| e["data"].get("table").is_some())
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["data"]["table-uuid"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tables,
        [
            ("io.floe.table.created", current.as_str()),
            ("io.floe.table.committed", current.as_str()),
        ]
    );
    // Once the grant is gone, so are the table's events (and, holding nothing else, the
    // principal sees nothing in the org).
    admin(
        &c,
        Method::DELETE,
        "/namespaces/shared/grants?principal=api_client:dashboard&table=visible",
        None,
    )
    .await
    .assert_ok(204);
    c.catalog.forget_cached();
    c.management(Method::GET, &format!("/orgs/{ORG}/events"), &token, None)
        .await
        .assert_error(403, "ForbiddenException");
}

#[tokio::test]
async fn a_token_past_the_retention_is_410() {
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let shared = clock.clone();
    let c = TestCatalog::custom(Wrap::default(), move |catalog| {
        catalog
            .event_retention(Duration::from_secs(3600))
            .clock(shared)
    })
    .await;
    c.create_namespace("old").await;
    c.create_namespace("older").await;
    let first = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/events?limit=1"),
            ADMIN_TOKEN,
            None,
        )
        .await
        .assert_ok(200)
        .clone();
    let token = first["next-token"].as_str().unwrap().to_owned();
    assert_eq!(token, "1");
    clock.advance_ms(2 * 3600 * 1000);
    c.create_namespace("new").await;
    let gone = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/events?after={token}"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    gone.assert_error(410, "GoneException");
    // Without a token, a reader starts at the oldest event kept.
    let kept = read_all(&c, ADMIN_TOKEN).await;
    assert_eq!(sequences(&kept), [3]);
}

/// A sink that records what it takes and, when told, hangs on one sequence number as a
/// publisher killed mid-batch would.
#[derive(Default)]
struct Recording {
    taken: Mutex<Vec<u64>>,
    hang_at: Option<u64>,
    /// Signalled when delivery reaches `hang_at`.
    hung: tokio::sync::Notify,
}

#[async_trait]
impl Sink for Recording {
    fn name(&self) -> &str {
        "recording"
    }

    async fn deliver(&self, event: &ChangeEvent) -> Result<(), SinkError> {
        if self.hang_at == Some(event.data.sequence) {
            self.hung.notify_one();
            std::future::pending::<()>().await;
        }
        self.taken.lock().await.push(event.data.sequence);
        Ok(())
    }
}

#[tokio::test]
async fn a_publisher_killed_mid_batch_delivers_the_rest_in_order_after_a_restart() {
    let c = TestCatalog::new().await;
    for i in 0..10 {
        c.create_namespace(&format!("n{i}")).await;
    }
    let dying = Arc::new(Recording {
        hang_at: Some(4),
        ..Recording::default()
    });
    let publisher = Publisher::new(c.store.clone(), dying.clone());
    let run = tokio::spawn(async move { publisher.publish_pending().await });
    // Killed while event 4 is in flight, however slow the store is.
    tokio::time::timeout(Duration::from_secs(60), dying.hung.notified())
        .await
        .expect("the publisher reaches event 4");
    run.abort();
    assert_eq!(*dying.taken.lock().await, [1, 2, 3]);

    let restarted = Arc::new(Recording::default());
    let delivered = Publisher::new(c.store.clone(), restarted.clone())
        .publish_pending()
        .await
        .unwrap();
    assert_eq!(delivered, 7);
    assert_eq!(*restarted.taken.lock().await, (4..=10).collect::<Vec<_>>());
    // Nothing twice: a second pass has nothing left.
    let again = Publisher::new(c.store.clone(), restarted.clone())
        .publish_pending()
        .await
        .unwrap();
    assert_eq!(again, 0);
}

#[tokio::test]
async fn the_ndjson_file_holds_every_event_once_in_order() {
    let c = TestCatalog::new().await;
    let file = c.dir.path().join("events.ndjson");
    let publisher = || Publisher::new(c.store.clone(), Arc::new(NdjsonSink::new(&file)));
    c.create_namespace("alpha").await;
    c.create_table("alpha", "t").await;
    assert_eq!(publisher().publish_pending().await.unwrap(), 2);
    c.append_snapshot(ADMIN_TOKEN, "alpha", "t", 9)
        .await
        .assert_ok(200);
    assert_eq!(publisher().publish_pending().await.unwrap(), 1);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<ChangeEvent> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<Kind> = lines.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::NamespaceCreated,
            Kind::TableCreated,
            Kind::TableCommitted
        ]
    );
}

#[tokio::test]
async fn the_webhook_gets_every_event_in_order_through_failures() {
    let c = TestCatalog::new().await;
    let received = Arc::new(Mutex::new(Vec::<Value>::new()));
    let refusals = Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let app = {
        let received = received.clone();
        let refusals = refusals.clone();
        axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: http::HeaderMap, body: String| {
                let received = received.clone();
                let refusals = refusals.clone();
                async move {
                    assert_eq!(
                        headers[http::header::CONTENT_TYPE],
                        "application/cloudevents+json"
                    );
                    // The first tries of every other event fail.
                    if refusals.load(Ordering::SeqCst) > 0 {
                        refusals.fetch_sub(1, Ordering::SeqCst);
                        return http::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    received
                        .lock()
                        .await
                        .push(serde_json::from_str(&body).unwrap());
                    refusals.store(1, Ordering::SeqCst);
                    http::StatusCode::ACCEPTED
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    for i in 0..4 {
        c.create_namespace(&format!("h{i}")).await;
    }
    let sink = WebhookSink::new(&url)
        .unwrap()
        .with_retry(Duration::from_millis(5), 5);
    let delivered = Publisher::new(c.store.clone(), Arc::new(sink))
        .publish_pending()
        .await
        .unwrap();
    assert_eq!(delivered, 4);
    let got = received.lock().await.clone();
    assert_eq!(sequences(&got), [1, 2, 3, 4]);
    server.abort();
    // A webhook that stays down: the publisher stops at the event, and delivers it later.
    c.create_namespace("late").await;
    let down = WebhookSink::new(&url)
        .unwrap()
        .with_retry(Duration::from_millis(1), 1);
    let failed = Publisher::new(c.store.clone(), Arc::new(down))
        .publish_pending()
        .await;
    assert!(failed.is_err());
}
