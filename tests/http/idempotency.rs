//! `Idempotency-Key` (spec 1.11): replays of finalised answers, refusal of a key reused for
//! another request, concurrent first uses that run once, lost answers of changes that landed,
//! released keys after 5xx, takeover of a dead request's key, and expiry. Both backends.

use std::sync::Arc;

use bytes::Bytes;
use floe::clock::{Clock, ManualClock};
use floe::core::Builder;
use floe::store::Write;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

const KEY: &str = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";

fn new_key() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A request under `/iceberg` with an Idempotency-Key.
async fn keyed(
    c: &TestCatalog,
    token: &str,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> Answer {
    c.send(
        method,
        &format!("/iceberg{path}"),
        Some(token),
        body.map(|b| Bytes::from(b.to_string())),
        &[("idempotency-key", key)],
    )
    .await
}

async fn create_ns(c: &TestCatalog, key: &str, name: &str) -> Answer {
    keyed(
        c,
        ADMIN_TOKEN,
        Method::POST,
        &format!("/v1/{ORG}/namespaces"),
        key,
        Some(json!({"namespace": [name], "properties": {"owner": "floe"}})),
    )
    .await
}

fn set_property(name: &str, value: &str) -> Value {
    json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {name: value}}
    ]})
}

async fn commit(c: &TestCatalog, key: &str, ns: &str, table: &str, body: Value) -> Answer {
    keyed(
        c,
        ADMIN_TOKEN,
        Method::POST,
        &table_path(ns, table),
        key,
        Some(body),
    )
    .await
}

/// The table's metadata log length and current location: how many commits landed.
async fn versions(c: &TestCatalog, ns: &str, table: &str) -> (usize, String) {
    let loaded = c.get(&table_path(ns, table)).await;
    let body = loaded.assert_ok(200);
    (
        body["metadata"]["metadata-log"]
            .as_array()
            .map_or(0, Vec::len),
        body["metadata-location"].as_str().unwrap().to_owned(),
    )
}

/// The namespace `idem` with a table `t`: how many commits it has so far.
async fn idem_table(c: &TestCatalog) -> usize {
    c.create_namespace("idem").await;
    c.create_table("idem", "t").await;
    versions(c, "idem", "t").await.0
}

/// The keyed commit setting `a=1` on `idem.t`.
async fn commit_a(c: &TestCatalog, key: &str) -> Answer {
    commit(c, key, "idem", "t", set_property("a", "1")).await
}

/// [`commit_a`] on a task of its own.
fn spawn_commit_a(c: &Arc<TestCatalog>, key: &str) -> tokio::task::JoinHandle<Answer> {
    let (c, key) = (c.clone(), key.to_owned());
    tokio::spawn(async move { commit_a(&c, &key).await })
}

fn arm(armed: &std::sync::atomic::AtomicBool, on: bool) {
    armed.store(on, std::sync::atomic::Ordering::SeqCst);
}

/// Whether a write batch changes a table row (a commit's swap, with or without a key).
fn writes_a_table(writes: &[Write]) -> bool {
    writes
        .iter()
        .any(|w| matches!(w, Write::Put { item, .. } if item.key.sk.starts_with("TABLE#")))
}

#[tokio::test]
async fn config_advertises_the_key_lifetime() {
    let c = TestCatalog::new().await;
    let config = c.get(&format!("/v1/config?warehouse={ORG}")).await;
    assert_eq!(config.assert_ok(200)["idempotency-key-lifetime"], "PT30M");

    let off = TestCatalog::custom(Wrap::default(), |catalog| {
        catalog.idempotency_lifetime(None)
    })
    .await;
    let config = off.get(&format!("/v1/config?warehouse={ORG}")).await;
    assert!(
        config
            .assert_ok(200)
            .get("idempotency-key-lifetime")
            .is_none()
    );
    // Not advertised, keys are ignored: a repeated create runs again.
    create_ns(&off, KEY, "plain").await.assert_ok(200);
    create_ns(&off, KEY, "plain")
        .await
        .assert_error(409, "AlreadyExistsException");
}

#[tokio::test]
async fn a_retried_create_is_answered_without_running_again() {
    let c = TestCatalog::new().await;
    let key = new_key();
    let first = create_ns(&c, &key, "idem_ns").await;
    let answer = first.assert_ok(200).clone();
    // Gone before the retry: a retry that ran again would create it anew.
    c.delete(&ns_path("idem_ns")).await.assert_ok(204);
    let retry = create_ns(&c, &key, "idem_ns").await;
    assert_eq!(retry.assert_ok(200), &answer);
    c.get(&ns_path("idem_ns"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    // A new key is a new request.
    create_ns(&c, &new_key(), "idem_ns").await.assert_ok(200);
}

#[tokio::test]
async fn final_errors_are_replayed() {
    let c = TestCatalog::new().await;
    c.create_namespace("taken").await;
    let key = new_key();
    create_ns(&c, &key, "taken")
        .await
        .assert_error(409, "AlreadyExistsException");
    c.delete(&ns_path("taken")).await.assert_ok(204);
    // The 409 was final: replayed, though the name is free now.
    create_ns(&c, &key, "taken")
        .await
        .assert_error(409, "AlreadyExistsException");
    c.get(&ns_path("taken"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
}

#[tokio::test]
async fn a_replay_is_refused_to_a_principal_that_lost_access() {
    let c = TestCatalog::new().await;
    c.create_namespace("idem").await;
    c.create_table("idem", "t").await;
    c.create_table("idem", "gone").await;
    c.create_table("idem", "r").await;
    let writer = c
        .catalog
        .sessions
        .authenticate(&c.write_token)
        .await
        .unwrap();
    let member = format!(
        "/orgs/{ORG}/members/{}",
        floe::catalog::display_principal(&writer.id)
    );
    let token = c.write_token.clone();
    let requests = [
        (
            Method::POST,
            format!("/v1/{ORG}/namespaces"),
            Some(json!({"namespace": ["made"]})),
            200,
        ),
        (
            Method::POST,
            format!("{}/properties", ns_path("idem")),
            Some(json!({"updates": {"owner": "etl"}})),
            200,
        ),
        (
            Method::POST,
            table_path("idem", "t"),
            Some(set_property("a", "1")),
            200,
        ),
        (Method::DELETE, table_path("idem", "gone"), None, 204),
        (
            Method::POST,
            format!("/v1/{ORG}/tables/rename"),
            Some(json!({"source": {"namespace": ["idem"], "name": "r"},
                        "destination": {"namespace": ["idem"], "name": "r2"}})),
            204,
        ),
    ];
    let keys: Vec<String> = requests.iter().map(|_| new_key()).collect();
    for ((method, path, body, status), key) in requests.iter().zip(&keys) {
        keyed(&c, &token, method.clone(), path, key, body.clone())
            .await
            .assert_ok(*status);
        // A retry while the access holds is the replay.
        keyed(&c, &token, method.clone(), path, key, body.clone())
            .await
            .assert_ok(*status);
    }
    // Down to read, then out of the org: a fresh request of each would be refused, and so is
    // each replay.
    for role in ["read", "none"] {
        c.management(
            Method::PUT,
            &member,
            ADMIN_TOKEN,
            Some(json!({"role": role})),
        )
        .await
        .assert_ok(204);
        for ((method, path, body, _), key) in requests.iter().zip(&keys) {
            keyed(&c, &token, method.clone(), path, key, body.clone())
                .await
                .assert_error(403, "ForbiddenException");
        }
    }
    // Given back, the key still answers as it first did (nothing ran again).
    c.management(
        Method::PUT,
        &member,
        ADMIN_TOKEN,
        Some(json!({"role": "write"})),
    )
    .await
    .assert_ok(204);
    let (method, path, body, _) = &requests[3];
    keyed(&c, &token, method.clone(), path, &keys[3], body.clone())
        .await
        .assert_ok(204);
}

#[tokio::test]
async fn a_key_reused_for_another_request_is_refused() {
    let c = TestCatalog::new().await;
    let key = new_key();
    create_ns(&c, &key, "first").await.assert_ok(200);
    create_ns(&c, &key, "second")
        .await
        .assert_error(422, "UnprocessableEntityException");
    keyed(
        &c,
        ADMIN_TOKEN,
        Method::DELETE,
        &ns_path("first"),
        &key,
        None,
    )
    .await
    .assert_error(422, "UnprocessableEntityException");
    c.get(&ns_path("second"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    c.get(&ns_path("first")).await.assert_ok(200);
}

#[tokio::test]
async fn keys_belong_to_their_principal_and_must_be_uuids() {
    let c = TestCatalog::new().await;
    let key = new_key();
    create_ns(&c, &key, "mine").await.assert_ok(200);
    // Another principal's request with the same key is its own: it runs (and fails here),
    // never replaying the first principal's answer.
    let theirs = keyed(
        &c,
        &c.write_token,
        Method::POST,
        &format!("/v1/{ORG}/namespaces"),
        &key,
        Some(json!({"namespace": ["mine"], "properties": {"owner": "floe"}})),
    )
    .await;
    assert_ne!(theirs.status, 200, "{}", theirs.body);

    for bad in ["abc", "017f22e279b07cc398c4dc0c0c07398f", ""] {
        create_ns(&c, bad, "refused")
            .await
            .assert_error(400, "BadRequestException");
    }
    c.get(&ns_path("refused"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
}

#[tokio::test]
async fn a_retried_commit_lands_once_and_replays_the_table() {
    let c = TestCatalog::new().await;
    let before = idem_table(&c).await;
    let key = new_key();
    let first = commit_a(&c, &key).await;
    let location = first.assert_ok(200)["metadata-location"].clone();
    let retry = commit_a(&c, &key).await;
    assert_eq!(retry.assert_ok(200)["metadata-location"], location);
    assert_eq!(retry.body["metadata"]["properties"]["a"], "1");
    let (after, current) = versions(&c, "idem", "t").await;
    assert_eq!(after, before + 1, "one commit landed");
    assert_eq!(Value::String(current), location);

    // Properties and drops replay too.
    let key = new_key();
    let props = json!({"updates": {"x": "1"}, "removals": ["missing_key"]});
    let path = format!("{}/properties", ns_path("idem"));
    let answer = keyed(
        &c,
        ADMIN_TOKEN,
        Method::POST,
        &path,
        &key,
        Some(props.clone()),
    )
    .await;
    let answer = answer.assert_ok(200).clone();
    let again = keyed(&c, ADMIN_TOKEN, Method::POST, &path, &key, Some(props)).await;
    assert_eq!(again.assert_ok(200), &answer);

    let key = new_key();
    let drop = keyed(
        &c,
        ADMIN_TOKEN,
        Method::DELETE,
        &table_path("idem", "t"),
        &key,
        None,
    )
    .await;
    assert_eq!(drop.status, 204);
    let again = keyed(
        &c,
        ADMIN_TOKEN,
        Method::DELETE,
        &table_path("idem", "t"),
        &key,
        None,
    )
    .await;
    assert_eq!(again.status, 204, "a replayed drop: {}", again.body);
}

#[tokio::test]
async fn a_retried_create_table_replays_the_table() {
    let c = TestCatalog::new().await;
    c.create_namespace("idem").await;
    let key = new_key();
    let path = tables_path("idem");
    let first = keyed(
        &c,
        ADMIN_TOKEN,
        Method::POST,
        &path,
        &key,
        Some(create_table_body("t")),
    )
    .await;
    let location = first.assert_ok(200)["metadata-location"].clone();
    let retry = keyed(
        &c,
        ADMIN_TOKEN,
        Method::POST,
        &path,
        &key,
        Some(create_table_body("t")),
    )
    .await;
    assert_eq!(retry.assert_ok(200)["metadata-location"], location);
    assert_eq!(
        retry.body["metadata"]["table-uuid"],
        first.body["metadata"]["table-uuid"]
    );
}

/// Eight clients send the same keyed commit at once: one runs, the others wait for it and get
/// its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_uses_run_once() {
    let c = Arc::new(TestCatalog::new().await);
    let before = idem_table(&c).await;
    let key = new_key();
    let tasks: Vec<_> = (0..8).map(|_| spawn_commit_a(&c, &key)).collect();
    let mut locations = Vec::new();
    for task in tasks {
        let answer = task.await.unwrap();
        locations.push(answer.assert_ok(200)["metadata-location"].clone());
    }
    locations.dedup();
    assert_eq!(locations.len(), 1, "every client got the one answer");
    let (after, _) = versions(&c, "idem", "t").await;
    assert_eq!(after, before + 1, "the commit ran once");
}

/// The change landed but its answer was lost (a 500 CommitStateUnknown): the retry gets the
/// success, and the commit is not applied a second time.
#[tokio::test]
async fn a_commit_whose_answer_was_lost_is_replayed_not_run_again() {
    let pause = Pause::new();
    let (c, armed) = TestCatalog::with_fault(
        Target::Write(writes_a_table),
        Fault::LandedThenUnknown(pause.clone()),
    )
    .await;
    let c = Arc::new(c);
    let before = idem_table(&c).await;
    let key = new_key();
    arm(&armed, true);
    let lost = spawn_commit_a(&c, &key);
    pause.reached().await;
    pause.resume();
    lost.await
        .unwrap()
        .assert_error(500, "CommitStateUnknownException");
    let retry = commit_a(&c, &key).await;
    let replayed = retry.assert_ok(200)["metadata-location"].clone();
    let (after, current) = versions(&c, "idem", "t").await;
    assert_eq!(after, before + 1, "landed once");
    assert_eq!(Value::String(current), replayed);
}

/// A 5xx whose change did not land is not stored: the retry runs, and lands.
#[tokio::test]
async fn a_failed_request_releases_its_key() {
    let (c, armed) =
        TestCatalog::with_fault(Target::Write(writes_a_table), Fault::UnknownOutcome).await;
    let before = idem_table(&c).await;
    let key = new_key();
    arm(&armed, true);
    commit_a(&c, &key)
        .await
        .assert_error(500, "CommitStateUnknownException");
    arm(&armed, false);
    commit_a(&c, &key).await.assert_ok(200);
    let (after, _) = versions(&c, "idem", "t").await;
    assert_eq!(after, before + 1);
}

fn manual_clock() -> Arc<ManualClock> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    Arc::new(ManualClock::new(now))
}

fn with_clock(clock: Arc<ManualClock>) -> impl FnOnce(Builder) -> Builder {
    move |builder| builder.clock(clock)
}

/// A request that holds its key past the lease (it hangs) is taken over by its retry, which
/// runs; the hung request can then no longer land.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_request_is_taken_over_and_cannot_land_after() {
    let clock = manual_clock();
    let pause = Pause::new();
    let (c, armed) = TestCatalog::with_fault_configured(
        Target::Write(writes_a_table),
        Fault::Pause(pause.clone()),
        with_clock(clock.clone()),
    )
    .await;
    let c = Arc::new(c);
    let before = idem_table(&c).await;
    let key = new_key();
    arm(&armed, true);
    let hung = spawn_commit_a(&c, &key);
    pause.reached().await;
    // Past the lease, the hung request's key is taken over.
    clock.advance_ms(floe::catalog::idempotency::LEASE.as_millis() as u64 + 1);
    let retry = commit_a(&c, &key).await;
    let landed = retry.assert_ok(200)["metadata-location"].clone();
    pause.resume();
    let late = hung.await.unwrap();
    // Nothing of it was applied (the retry that took the key over ran the change): the 503
    // that asks for the request again, which the key then answers as the retry did.
    late.assert_error(503, "ServiceUnavailableException");
    let (after, current) = versions(&c, "idem", "t").await;
    assert_eq!(after, before + 1, "only the retry landed");
    assert_eq!(Value::String(current), landed);
    // And the key answers as the retry did.
    let again = commit_a(&c, &key).await;
    assert_eq!(again.assert_ok(200)["metadata-location"], landed);
}

/// After its lifetime (and grace), a key is new again.
#[tokio::test]
async fn keys_expire() {
    let clock = manual_clock();
    let c = TestCatalog::custom(Wrap::default(), with_clock(clock.clone())).await;
    let key = new_key();
    create_ns(&c, &key, "ephemeral").await.assert_ok(200);
    c.delete(&ns_path("ephemeral")).await.assert_ok(204);
    clock.advance_ms(29 * 60 * 1000);
    create_ns(&c, &key, "ephemeral").await.assert_ok(200);
    c.get(&ns_path("ephemeral"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    let spent = (floe::catalog::idempotency::DEFAULT_LIFETIME + floe::catalog::idempotency::GRACE)
        .as_millis() as u64;
    clock.advance_ms(spent);
    assert!(clock.now_ms() > 0);
    create_ns(&c, &key, "ephemeral").await.assert_ok(200);
    c.get(&ns_path("ephemeral")).await.assert_ok(200);
}
