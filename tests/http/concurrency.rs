use std::collections::HashSet;

use floe_tests::*;

const WRITERS: i64 = 8;
const COMMITS_PER_WRITER: i64 = 6;

/// Eight writers append to one table at once. Every attempt lands or gets 409; after retries
/// every commit is present and none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_lose_nothing() {
    let c = std::sync::Arc::new(TestCatalog::new().await);
    c.create_namespace("conc").await;
    c.create_table("conc", "t").await;
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0u32;
            for n in 0..COMMITS_PER_WRITER {
                let snapshot_id = 1_000 * (writer + 1) + n;
                loop {
                    let answer = c
                        .append_snapshot(ADMIN_TOKEN, "conc", "t", snapshot_id)
                        .await;
                    match answer.status.as_u16() {
                        200 => break,
                        409 => {
                            answer.assert_error(409, "CommitFailedException");
                            conflicts += 1;
                        }
                        other => panic!("unexpected status {other}: {}", answer.body),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for task in tasks {
        conflicts += task.await.unwrap();
    }
    let loaded = c.get("/v1/acme/namespaces/conc/tables/t").await;
    let metadata = &loaded.assert_ok(200)["metadata"];
    let ids: HashSet<i64> = metadata["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot-id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len() as i64, WRITERS * COMMITS_PER_WRITER);
    // One linear history: each snapshot's parent is the previous one.
    let log = metadata["snapshot-log"].as_array().unwrap();
    assert_eq!(log.len() as i64, WRITERS * COMMITS_PER_WRITER);
    assert_eq!(
        metadata["last-sequence-number"].as_i64().unwrap(),
        WRITERS * COMMITS_PER_WRITER
    );
    assert!(
        loaded.body["metadata-location"]
            .as_str()
            .unwrap()
            .contains(&format!("/metadata/{:05}-", WRITERS * COMMITS_PER_WRITER))
    );
    eprintln!(
        "{} commits landed with {conflicts} conflicts retried",
        WRITERS * COMMITS_PER_WRITER
    );
    assert!(conflicts > 0, "the writers never actually raced");
}
