use std::sync::atomic::Ordering;

use floe::bootstrap;
use floe::catalog::purge::RECOVERY_PERIOD;
use floe::model::{BucketAuth, BucketRow, NamespaceRow};
use floe::store::rows::{self, keys};
use floe::store::{Condition, Key, Write};
use floe_tests::*;
use serde_json::json;

/// A namespace with a table whose files stay behind after the table is dropped, then dropped.
async fn dropped_namespace_with_files(c: &TestCatalog, name: &str) -> String {
    let ns = c.create_namespace(name).await;
    c.create_table(name, "t").await;
    c.append_snapshot(ADMIN_TOKEN, name, "t", 1)
        .await
        .assert_ok(200);
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/{name}/tables/t"))
            .await
            .status
            .as_u16(),
        204
    );
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/{name}"))
            .await
            .status
            .as_u16(),
        204
    );
    ns["properties"]["location"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn expired_namespaces_are_emptied_and_removed_and_nothing_else() {
    let c = TestCatalog::frozen().await;
    let location = dropped_namespace_with_files(&c, "expired").await;
    let alive = c.create_namespace("alive").await;
    c.create_table("alive", "t").await;
    let files = c.files_under(&location).await;
    assert!(files.len() >= 3, "marker and metadata files: {files:?}");
    let expired_id = rows::get::<NamespaceRow>(&*c.store, &keys::namespace(ORG, "expired"))
        .await
        .unwrap()
        .unwrap()
        .row
        .id;
    let directory_claims = || async {
        c.store
            .query(
                &keys::namespace_partition(&expired_id),
                keys::DIRECTORY_PREFIX,
                None,
                100,
            )
            .await
            .unwrap()
            .len()
    };
    assert_eq!(
        directory_claims().await,
        1,
        "the dropped table's directory stays claimed"
    );

    // Within the recovery period nothing is touched.
    let early = c
        .catalog
        .namespaces
        .purge_expired(c.now_ms(), RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(early.purged.is_empty());
    assert_eq!(c.files_under(&location).await, files);

    let later = c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    let report = c
        .catalog
        .namespaces
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/expired")]);
    assert_eq!(report.objects_deleted, files.len() as u64);
    assert!(c.files_under(&location).await.is_empty());
    assert_eq!(
        directory_claims().await,
        0,
        "directory claims go with the namespace"
    );
    // The name and prefix are free: a new namespace of that name gets a new prefix.
    let again = c.create_namespace("expired").await;
    assert_ne!(again["properties"]["location"].as_str().unwrap(), location);
    // Live namespaces and their tables are untouched.
    let alive_location = alive["properties"]["location"].as_str().unwrap();
    assert!(!c.files_under(alive_location).await.is_empty());
    c.get(&format!("/v1/{ORG}/namespaces/alive/tables/t"))
        .await
        .assert_ok(200);
    // A second run finds nothing more to do.
    let rerun = c
        .catalog
        .namespaces
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(rerun.purged.is_empty());
}

#[tokio::test]
async fn a_run_killed_midway_is_finished_by_the_next() {
    let c = TestCatalog::frozen().await;
    let location = dropped_namespace_with_files(&c, "halfway").await;
    let later = c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    // A run killed while deleting leaves some objects gone and the rows in place.
    let files = c.files_under(&location).await;
    c.delete_files(&files[..files.len() / 2]).await;
    let report = c
        .catalog
        .namespaces
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/halfway")]);
    assert!(c.files_under(&location).await.is_empty());

    // A run killed after emptying the prefix but before removing the rows. Expired from a
    // time taken after its drop: however long the first part took, it is past the period.
    let location = dropped_namespace_with_files(&c, "emptied").await;
    let later = c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    let files = c.files_under(&location).await;
    c.delete_files(&files).await;
    let report = c
        .catalog
        .namespaces
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(
        (report.purged, report.objects_deleted),
        (vec![format!("{ORG}/emptied")], 0)
    );
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["emptied"]}),
    )
    .await
    .assert_ok(200);
}

#[tokio::test]
async fn a_restored_namespace_is_not_purged() {
    let c = TestCatalog::frozen().await;
    c.create_namespace("back").await;
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/back"))
            .await
            .status
            .as_u16(),
        204
    );
    // Re-created while still empty: restored in place, so it leaves the purge's index.
    c.create_namespace("back").await;
    let later = c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    let report = c
        .catalog
        .namespaces
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(report.purged.is_empty());
    c.get(&format!("/v1/{ORG}/namespaces/back"))
        .await
        .assert_ok(200);
}

/// Past the recovery period of everything dropped so far (the catalog's clock stands still).
fn later(c: &TestCatalog) -> u64 {
    c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000
}

/// A namespace created and dropped while empty: still restorable by creating it again.
async fn dropped_empty_namespace(c: &TestCatalog, name: &str) -> String {
    let ns = c.create_namespace(name).await;
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/{name}"))
            .await
            .status
            .as_u16(),
        204
    );
    ns["properties"]["location"].as_str().unwrap().to_owned()
}

async fn namespace_row(c: &TestCatalog, name: &str) -> Option<NamespaceRow> {
    rows::get::<NamespaceRow>(&*c.store, &keys::namespace(ORG, name))
        .await
        .unwrap()
        .map(|v| v.row)
}

fn reads_of_namespaces(key: &Key) -> bool {
    key.sk.starts_with(keys::NAMESPACE_PREFIX)
}

/// The write that puts a namespace row, first in its batch (a restore or a drop with its event,
/// the purge's fence).
fn namespace_puts(writes: &[Write]) -> bool {
    matches!(writes.first(), Some(Write::Put { item, .. }) if item.key.sk.starts_with(keys::NAMESPACE_PREFIX))
}

/// The purge's final write: the namespace row and its claims removed together.
fn namespace_removals(writes: &[Write]) -> bool {
    writes.iter().any(
        |w| matches!(w, Write::Delete { key, .. } if key.sk.starts_with(keys::NAMESPACE_PREFIX)),
    )
}

#[tokio::test]
async fn a_restore_after_the_purge_read_the_namespace_keeps_its_new_files() {
    let pause = Pause::new();
    let (c, armed) = TestCatalog::frozen_with_fault(
        Target::Read(reads_of_namespaces),
        Fault::Pause(pause.clone()),
    )
    .await;
    let location = dropped_empty_namespace(&c, "raced").await;
    armed.store(true, Ordering::SeqCst);
    let catalog = c.catalog.clone();
    let at = later(&c);
    let purge = tokio::spawn(async move {
        catalog
            .namespaces
            .purge_expired(at, RECOVERY_PERIOD, 100)
            .await
    });
    // The purge has read the expired namespace; it is restored and written to before it goes on.
    pause.reached().await;
    let restored = c.create_namespace("raced").await;
    assert_eq!(restored["properties"]["location"], location.as_str());
    c.create_table("raced", "t").await;
    c.append_snapshot(ADMIN_TOKEN, "raced", "t", 1)
        .await
        .assert_ok(200);
    let files = c.files_under(&location).await;
    pause.resume();
    let report = purge.await.unwrap().unwrap();

    assert!(report.purged.is_empty(), "{report:?}");
    assert_eq!(report.objects_deleted, 0);
    assert_eq!(c.files_under(&location).await, files);
    c.get(&format!("/v1/{ORG}/namespaces/raced/tables/t"))
        .await
        .assert_ok(200);
}

#[tokio::test]
async fn a_restore_that_read_the_namespace_before_the_purge_fenced_it_is_409() {
    let pause = Pause::new();
    let (c, armed) =
        TestCatalog::frozen_with_fault(Target::Write(namespace_puts), Fault::Pause(pause.clone()))
            .await;
    let location = dropped_empty_namespace(&c, "late").await;
    armed.store(true, Ordering::SeqCst);
    let path = format!("/v1/{ORG}/namespaces");
    let restore = c.post(&path, json!({"namespace": ["late"]}));
    // The restore has read the soft-deleted row and checked its storage; its write is held
    // while a whole purge run goes by.
    let purge = async {
        pause.reached().await;
        let report = c
            .catalog
            .namespaces
            .purge_expired(later(&c), RECOVERY_PERIOD, 100)
            .await
            .unwrap();
        pause.resume();
        report
    };
    let (answer, report) = tokio::join!(restore, purge);

    assert_eq!(report.purged, vec![format!("{ORG}/late")]);
    answer.assert_error(409, "AlreadyExistsException");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("being purged"), "{message}");
    assert!(namespace_row(&c, "late").await.is_none());
    // The name is free again: a create now makes a new namespace on a new prefix.
    let again = c.create_namespace("late").await;
    assert_ne!(again["properties"]["location"], location.as_str());
}

#[tokio::test]
async fn restoring_a_namespace_being_purged_is_409() {
    let pause = Pause::new();
    let (c, armed) = TestCatalog::frozen_with_fault(
        Target::Write(namespace_removals),
        Fault::Pause(pause.clone()),
    )
    .await;
    let location = dropped_empty_namespace(&c, "going").await;
    armed.store(true, Ordering::SeqCst);
    let catalog = c.catalog.clone();
    let at = later(&c);
    let purge = tokio::spawn(async move {
        catalog
            .namespaces
            .purge_expired(at, RECOVERY_PERIOD, 100)
            .await
    });
    // The purge has emptied the prefix and is about to remove the row.
    pause.reached().await;
    assert!(c.files_under(&location).await.is_empty());
    let answer = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["going"]}),
        )
        .await;
    answer.assert_error(409, "AlreadyExistsException");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "Namespace going is being purged and can no longer be restored; create it again once the purge has finished"
    );
    pause.resume();
    let report = purge.await.unwrap().unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/going")]);
    assert!(c.files_under(&location).await.is_empty());
}

/// A namespace on its own bucket configuration, with files, then dropped; returns its location.
async fn dropped_namespace_on(c: &TestCatalog, name: &str, bucket: &str) -> String {
    c.add_bucket(bucket, BucketAuth::Server).await;
    let ns = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": [name], "properties": {"arraylake.bucket": bucket}}),
        )
        .await
        .assert_ok(200)
        .clone();
    c.create_table(name, "t").await;
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/{name}/tables/t"))
            .await
            .status
            .as_u16(),
        204
    );
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/{name}"))
            .await
            .status
            .as_u16(),
        204
    );
    ns["properties"]["location"].as_str().unwrap().to_owned()
}

/// Points a bucket configuration at another directory or S3 bucket, so that the storage of its
/// namespaces is out of its reach (listing them fails); returns the previous configuration.
async fn move_bucket_root(c: &TestCatalog, nickname: &str) -> BucketRow {
    let bucket = rows::get::<BucketRow>(&*c.store, &keys::bucket(ORG, nickname))
        .await
        .unwrap()
        .unwrap()
        .row;
    let root = match bucket.root.strip_prefix("s3://") {
        Some(path) => {
            let (name, rest) = path.split_once('/').unwrap_or((path, ""));
            format!("s3://{name}-moved/{rest}")
        }
        None => format!("{}-moved", bucket.root),
    };
    let moved = BucketRow {
        root,
        ..bucket.clone()
    };
    bootstrap::put_bucket(&*c.store, ORG, &moved).await.unwrap();
    bucket
}

async fn remove_bucket(c: &TestCatalog, nickname: &str) {
    c.store
        .write(vec![Write::Delete {
            key: keys::bucket(ORG, nickname),
            condition: Condition::Exists,
        }])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_namespace_whose_storage_fails_does_not_stop_the_run() {
    let c = TestCatalog::frozen().await;
    // The oldest two fail: one's storage is out of reach, the other's bucket configuration gone.
    let broken = dropped_namespace_on(&c, "broken", "flaky").await;
    dropped_namespace_on(&c, "orphan", "gone").await;
    let fine = dropped_namespace_with_files(&c, "fine").await;
    move_bucket_root(&c, "flaky").await;
    remove_bucket(&c, "gone").await;
    let broken_files = c.files_under(&broken).await;

    let report = c
        .catalog
        .namespaces
        .purge_expired(later(&c), RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/fine")]);
    assert_eq!(
        report.failed,
        vec![format!("{ORG}/broken"), format!("{ORG}/orphan")]
    );
    assert!(c.files_under(&fine).await.is_empty());
    assert_eq!(c.files_under(&broken).await, broken_files);

    let row = namespace_row(&c, "broken").await.unwrap();
    assert_eq!(row.purge_attempts, 1);
    let error = row.purge_last_error.unwrap();
    assert!(error.contains("outside this store"), "{error}");
    let row = namespace_row(&c, "orphan").await.unwrap();
    assert_eq!(row.purge_attempts, 1);
    assert_eq!(
        row.purge_last_error.as_deref(),
        Some("bucket configuration 'gone' is gone")
    );
    // The missing configuration was found before any file was touched: not fenced.
    assert_eq!(row.purging, None);
}

#[tokio::test]
async fn a_namespace_that_keeps_failing_does_not_starve_those_behind_it() {
    let c = TestCatalog::frozen().await;
    let broken = dropped_namespace_on(&c, "broken", "flaky").await;
    let fine = dropped_namespace_with_files(&c, "fine").await;
    let bucket = move_bucket_root(&c, "flaky").await;
    let at = later(&c);
    let hour = 60 * 60 * 1000;

    // One namespace per run: the failing one comes first, then waits out its backoff.
    let first = c
        .catalog
        .namespaces
        .purge_expired(at, RECOVERY_PERIOD, 1)
        .await
        .unwrap();
    assert_eq!(
        (first.purged, first.failed),
        (vec![], vec![format!("{ORG}/broken")])
    );
    let second = c
        .catalog
        .namespaces
        .purge_expired(at, RECOVERY_PERIOD, 1)
        .await
        .unwrap();
    assert_eq!(
        (second.purged, second.failed),
        (vec![format!("{ORG}/fine")], vec![])
    );
    assert!(c.files_under(&fine).await.is_empty());
    let waiting = c
        .catalog
        .namespaces
        .purge_expired(at + hour / 2, RECOVERY_PERIOD, 1)
        .await
        .unwrap();
    assert_eq!(waiting, Default::default());

    // After the backoff it is retried; the next wait is longer.
    let third = c
        .catalog
        .namespaces
        .purge_expired(at + hour, RECOVERY_PERIOD, 1)
        .await
        .unwrap();
    assert_eq!(third.failed, vec![format!("{ORG}/broken")]);
    assert_eq!(namespace_row(&c, "broken").await.unwrap().purge_attempts, 2);
    let waiting = c
        .catalog
        .namespaces
        .purge_expired(at + 2 * hour, RECOVERY_PERIOD, 1)
        .await
        .unwrap();
    assert_eq!(waiting, Default::default());
    // A fenced namespace cannot be restored, even while it waits.
    let answer = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["broken"], "properties": {"arraylake.bucket": "flaky"}}),
        )
        .await;
    answer.assert_error(409, "AlreadyExistsException");

    // Once its storage is reachable again, it is purged like any other.
    bootstrap::put_bucket(&*c.store, ORG, &bucket)
        .await
        .unwrap();
    let fixed = c
        .catalog
        .namespaces
        .purge_expired(at + 3 * hour, RECOVERY_PERIOD, 1)
        .await
        .unwrap();
    assert_eq!(fixed.purged, vec![format!("{ORG}/broken")]);
    assert!(c.files_under(&broken).await.is_empty());
    assert!(namespace_row(&c, "broken").await.is_none());
}

#[tokio::test]
async fn a_namespace_counts_as_purged_only_once_its_row_is_gone() {
    let (c, armed) =
        TestCatalog::frozen_with_fault(Target::Write(namespace_removals), Fault::UnknownOutcome)
            .await;
    let location = dropped_namespace_with_files(&c, "unsure").await;
    armed.store(true, Ordering::SeqCst);
    let at = later(&c);
    // The removal's outcome is unknown (and it did not land): the files are gone, the row not.
    let report = c
        .catalog
        .namespaces
        .purge_expired(at, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(report.purged.is_empty(), "{report:?}");
    assert_eq!(report.failed, vec![format!("{ORG}/unsure")]);
    assert!(c.files_under(&location).await.is_empty());
    let row = namespace_row(&c, "unsure").await.unwrap();
    assert!(row.purging.is_some());
    assert_eq!(row.purge_attempts, 1);
    assert!(row.purge_last_error.unwrap().contains("outcome unknown"));

    // The next attempt removes it, and only that run reports it.
    armed.store(false, Ordering::SeqCst);
    let hour = 60 * 60 * 1000;
    let report = c
        .catalog
        .namespaces
        .purge_expired(at + hour, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/unsure")]);
    assert!(namespace_row(&c, "unsure").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_racing_a_restore_never_lets_both_win() {
    let c = TestCatalog::frozen().await;
    let rounds = match c.backend {
        Backend::Local => 30,
        Backend::Aws | Backend::Gcs => 8,
    };
    let (mut restores, mut purges) = (0, 0);
    for round in 0..rounds {
        let name = format!("race{round}");
        let location = dropped_empty_namespace(&c, &name).await;
        let path = format!("/v1/{ORG}/namespaces");
        let restore = async {
            let answer = c.post(&path, json!({"namespace": [&name]})).await;
            let restored =
                answer.status == 200 && answer.body["properties"]["location"] == location.as_str();
            if restored {
                c.create_table(&name, "t").await;
            }
            (answer, restored)
        };
        let purge = c
            .catalog
            .namespaces
            .purge_expired(later(&c), RECOVERY_PERIOD, 100);
        let ((answer, restored), report) = tokio::join!(restore, purge);
        let report = report.unwrap();
        let purged = report.purged.contains(&format!("{ORG}/{name}"));
        assert!(restored != purged, "round {round}: {answer:?} {report:?}");
        if restored {
            restores += 1;
            // Every file the restored namespace holds survived the purge.
            c.get(&format!("/v1/{ORG}/namespaces/{name}/tables/t"))
                .await
                .assert_ok(200);
            let files = c.files_under(&location).await;
            assert!(
                files.iter().any(|f| f.ends_with(".metadata.json")),
                "{files:?}"
            );
        } else {
            purges += 1;
            // Refused while being purged, or created afresh once the old one was gone.
            assert!(
                answer.status == 409 || answer.body["properties"]["location"] != location.as_str(),
                "round {round}: {answer:?}"
            );
            assert!(c.files_under(&location).await.is_empty());
        }
    }
    eprintln!("{restores} restores and {purges} purges won");
}
