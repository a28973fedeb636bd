//! Table maintenance: snapshot expiry as a catalog commit, the deletion of exactly the files no
//! retained snapshot reaches (read from real Avro manifest lists and manifests, written here
//! with the `iceberg` crate), unreferenced-file removal past its threshold, old metadata files,
//! dry runs that plan what the real run does, and commits racing a run.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use floe::catalog::tables::MaintainOptions;
use floe::clock::{Clock, ManualClock};
use floe::objects::{ObjectError, ObjectMeta, ObjectStore, ObjectStores};
use floe_tests::*;
use http::Method;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, ManifestFile, ManifestListWriter,
    ManifestWriterBuilder, Struct, TableMetadata,
};
use serde_json::{Value, json};

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// A catalog on a clock the test moves, and that clock.
async fn catalog() -> (TestCatalog, Arc<ManualClock>) {
    catalog_wrapped(Wrap::default()).await
}

async fn catalog_wrapped(wrap: Wrap) -> (TestCatalog, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(floe::clock::SystemClock.now_ms()));
    let configured = clock.clone();
    let c = TestCatalog::custom(wrap, move |b| b.clock(configured)).await;
    (c, clock)
}

/// Holds the next directory listing (and the next delete) back: each tells its receiver when
/// it is held and goes on once its sender is used.
#[derive(Default)]
struct ListingGate {
    armed: std::sync::Mutex<Option<Gate>>,
    delete_armed: std::sync::Mutex<Option<Gate>>,
}

type Gate = (
    tokio::sync::oneshot::Sender<()>,
    tokio::sync::oneshot::Receiver<()>,
);

/// Arms `slot`: the receiver hears when the call is held, the sender lets it go.
fn arm(
    slot: &std::sync::Mutex<Option<Gate>>,
) -> (
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (held_tx, held) = tokio::sync::oneshot::channel();
    let (go, go_rx) = tokio::sync::oneshot::channel();
    *slot.lock().unwrap() = Some((held_tx, go_rx));
    (held, go)
}

struct GatedObjects {
    inner: Arc<dyn ObjectStores>,
    gate: Arc<ListingGate>,
}

#[async_trait::async_trait]
impl ObjectStores for GatedObjects {
    async fn for_bucket(
        &self,
        bucket: &floe::model::BucketRow,
    ) -> Result<Arc<dyn ObjectStore>, floe::objects::ObjectStoresError> {
        Ok(Arc::new(GatedStore {
            inner: self.inner.for_bucket(bucket).await?,
            gate: self.gate.clone(),
        }))
    }
}

struct GatedStore {
    inner: Arc<dyn ObjectStore>,
    gate: Arc<ListingGate>,
}

#[async_trait::async_trait]
impl ObjectStore for GatedStore {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError> {
        self.inner.get(location).await
    }

    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError> {
        self.inner.put_if_absent(location, bytes).await
    }

    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError> {
        let listed = self.inner.list_detailed(prefix, limit).await;
        let armed = self.gate.armed.lock().unwrap().take();
        if let Some((listed_tx, go)) = armed {
            listed_tx.send(()).unwrap();
            go.await.unwrap();
        }
        listed
    }

    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError> {
        let armed = self.gate.delete_armed.lock().unwrap().take();
        if let Some((held, go)) = armed {
            held.send(()).unwrap();
            go.await.unwrap();
        }
        self.inner.delete(locations).await
    }
}

/// A catalog on a moved clock whose object stores hold back what its [`ListingGate`] arms.
async fn gated_catalog() -> (Arc<TestCatalog>, Arc<ManualClock>, Arc<ListingGate>) {
    let gate = Arc::new(ListingGate::default());
    let wrapped = gate.clone();
    let (c, clock) = catalog_wrapped(Wrap {
        objects: Box::new(move |inner| {
            Arc::new(GatedObjects {
                inner,
                gate: wrapped,
            })
        }),
        ..Wrap::default()
    })
    .await;
    (Arc::new(c), clock, gate)
}

fn maintain_path(ns: &str, table: &str, query: &str) -> String {
    format!("/orgs/{ORG}/namespaces/{ns}/tables/{table}/maintain?{query}")
}

async fn maintain(c: &TestCatalog, ns: &str, table: &str, query: &str) -> Value {
    c.management(
        Method::POST,
        &maintain_path(ns, table, query),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(200)
    .clone()
}

/// Writes snapshots as an engine does: data files, one manifest per append (fast append: each
/// snapshot lists the manifests of its parent and its own), a manifest list per snapshot.
struct Engine {
    ns: String,
    table: String,
    location: String,
    io: FileIO,
    /// The manifests the next snapshot carries over.
    manifests: Vec<ManifestFile>,
    /// Every file written, by what it is.
    written: Vec<String>,
}

impl Engine {
    async fn new(c: &TestCatalog, ns: &str, table: &str) -> Self {
        let loaded = c.get(&table_path(ns, table)).await;
        let location = loaded.assert_ok(200)["metadata"]["location"]
            .as_str()
            .unwrap()
            .to_owned();
        Engine {
            ns: ns.into(),
            table: table.into(),
            location,
            io: FileIO::new_with_memory(),
            manifests: Vec::new(),
            written: Vec::new(),
        }
    }

    async fn metadata(&self, c: &TestCatalog) -> (Value, TableMetadata) {
        let loaded = c.get(&table_path(&self.ns, &self.table)).await;
        let json = loaded.assert_ok(200)["metadata"].clone();
        let parsed: TableMetadata = serde_json::from_value(json.clone()).unwrap();
        (json, parsed)
    }

    /// Writes `bytes` where the engine would, through the catalog's own storage.
    async fn put(&mut self, c: &TestCatalog, location: &str, bytes: Vec<u8>) {
        c.overwrite(location, bytes).await;
        self.written.push(location.to_owned());
    }

    /// A data file of `size` bytes, written and returned.
    async fn data_file(&mut self, c: &TestCatalog, name: &str, size: usize) -> String {
        let location = format!("{}/data/{name}.parquet", self.location);
        self.put(c, &location, vec![7u8; size]).await;
        location
    }

    /// Commits a snapshot holding `carried` manifests of earlier snapshots and a new one with
    /// `files`; returns the commit's answer and the new manifest.
    async fn commit(
        &mut self,
        c: &TestCatalog,
        snapshot_id: i64,
        timestamp_ms: u64,
        carried: Vec<ManifestFile>,
        files: &[String],
    ) -> (Answer, ManifestFile) {
        let (json, metadata) = self.metadata(c).await;
        let parent = metadata.current_snapshot().map(|s| s.snapshot_id());
        let sequence = metadata.last_sequence_number() + 1;
        let scratch = format!("memory:///m-{snapshot_id}.avro");
        let mut writer = ManifestWriterBuilder::new(
            self.io.new_output(&scratch).unwrap(),
            Some(snapshot_id),
            metadata.current_schema().clone(),
            metadata.default_partition_spec().as_ref().clone(),
        )
        .build_v2_data();
        for file in files {
            let size = c.read_bytes(file).await.len() as u64;
            let data = DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_format(DataFileFormat::Parquet)
                .file_path(file.clone())
                .file_size_in_bytes(size)
                .record_count(1)
                .partition_spec_id(metadata.default_partition_spec_id())
                .partition(Struct::empty())
                .build()
                .unwrap();
            writer.add_file(data, sequence).unwrap();
        }
        let mut manifest = writer.write_manifest_file().await.unwrap();
        let manifest_location = format!("{}/metadata/m-{snapshot_id}.avro", self.location);
        let bytes = self.io.new_input(&scratch).unwrap().read().await.unwrap();
        self.put(c, &manifest_location, bytes.to_vec()).await;
        manifest.manifest_path = manifest_location;

        let list_scratch = format!("memory:///snap-{snapshot_id}.avro");
        let mut list = ManifestListWriter::v2(
            self.io
                .new_output(&list_scratch)
                .unwrap()
                .writer()
                .await
                .unwrap(),
            snapshot_id,
            parent,
            sequence,
        );
        let mut listed = carried;
        listed.push(manifest.clone());
        list.add_manifests(listed.into_iter()).unwrap();
        list.close().await.unwrap();
        // As the list now records it.
        manifest.sequence_number = sequence;
        manifest.min_sequence_number = sequence;
        let list_location = format!("{}/metadata/snap-{snapshot_id}.avro", self.location);
        let bytes: Bytes = self
            .io
            .new_input(&list_scratch)
            .unwrap()
            .read()
            .await
            .unwrap();
        self.put(c, &list_location, bytes.to_vec()).await;

        let body = json!({
            "requirements": [
                {"type": "assert-table-uuid", "uuid": json["table-uuid"]},
                {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}
            ],
            "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": snapshot_id,
                    "parent-snapshot-id": parent,
                    "sequence-number": sequence,
                    "timestamp-ms": timestamp_ms,
                    "manifest-list": list_location,
                    "summary": {"operation": "append"},
                    "schema-id": 0
                }},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id}
            ]
        });
        let answer = c.post(&table_path(&self.ns, &self.table), body).await;
        (answer, manifest)
    }

    /// A fast append of one new data file.
    async fn append(&mut self, c: &TestCatalog, snapshot_id: i64, timestamp_ms: u64) -> String {
        let file = self
            .data_file(
                c,
                &format!("append-{snapshot_id}"),
                100 + snapshot_id as usize,
            )
            .await;
        let carried = self.manifests.clone();
        let (answer, manifest) = self
            .commit(
                c,
                snapshot_id,
                timestamp_ms,
                carried,
                std::slice::from_ref(&file),
            )
            .await;
        answer.assert_ok(200);
        self.manifests.push(manifest);
        file
    }
}

async fn set_properties(c: &TestCatalog, ns: &str, table: &str, properties: Value) {
    c.post(
        &table_path(ns, table),
        json!({"requirements": [], "updates": [{"action": "set-properties", "updates": properties}]}),
    )
    .await
    .assert_ok(200);
}

fn deleted_locations(report: &Value) -> BTreeSet<String> {
    report["deleted-files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["location"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn expiry_commits_and_deletes_exactly_what_no_retained_snapshot_reaches() {
    let (c, clock) = catalog().await;
    c.create_namespace("mx").await;
    c.create_table("mx", "t").await;
    set_properties(
        &c,
        "mx",
        "t",
        json!({"history.expire.max-snapshot-age-ms": "3600000"}),
    )
    .await;
    let mut engine = Engine::new(&c, "mx", "t").await;
    let start = clock.now_ms();
    let mut files = Vec::new();
    for id in 1..=4 {
        files.push(engine.append(&c, id, start + id as u64).await);
    }
    // An overwrite: snapshot 5 drops the first append's manifest (and so its file).
    let replacement = engine.data_file(&c, "rewrite-5", 500).await;
    let carried = engine.manifests[1..].to_vec();
    let (answer, _) = engine
        .commit(
            &c,
            5,
            start + 5,
            carried,
            std::slice::from_ref(&replacement),
        )
        .await;
    answer.assert_ok(200);
    let stray = format!("{}/data/stray.parquet", engine.location);
    c.overwrite(&stray, vec![1; 10]).await;
    let directory = engine.location.clone();
    let before: BTreeSet<String> = c.files_under(&directory).await.into_iter().collect();

    // Nothing is old enough yet: nothing to do.
    let idle = maintain(&c, "mx", "t", "verbose=true").await;
    assert_eq!(idle["snapshots-expired"], 0);
    assert_eq!(idle["files-deleted"], 0);

    clock.advance_ms(2 * 3_600_000);
    let plan = maintain(&c, "mx", "t", "dry_run=true&verbose=true").await;
    assert_eq!(plan["dry-run"], true);
    assert_eq!(plan["snapshots-expired"], 4);
    let after_dry: BTreeSet<String> = c.files_under(&directory).await.into_iter().collect();
    assert_eq!(after_dry, before, "a dry run deletes nothing");

    let run = maintain(&c, "mx", "t", "verbose=true").await;
    assert_eq!(run["dry-run"], false);
    assert_eq!(run["snapshots-expired"], 4);
    let expected: BTreeSet<String> = [
        files[0].clone(),
        format!("{directory}/metadata/m-1.avro"),
        format!("{directory}/metadata/snap-1.avro"),
        format!("{directory}/metadata/snap-2.avro"),
        format!("{directory}/metadata/snap-3.avro"),
        format!("{directory}/metadata/snap-4.avro"),
    ]
    .into_iter()
    .collect();
    assert_eq!(deleted_locations(&run), expected);
    assert_eq!(
        deleted_locations(&plan),
        expected,
        "the dry run planned the same"
    );
    for key in ["files-deleted", "bytes-deleted", "snapshots-expired"] {
        assert_eq!(plan[key], run[key], "{key}");
    }
    assert_eq!(run["files-deleted"], 6);
    assert_eq!(
        run["kept-by-reason"]["removal-off"], 1,
        "the stray file: removal is off"
    );
    let after: BTreeSet<String> = c.files_under(&directory).await.into_iter().collect();
    assert_eq!(
        before.difference(&after).cloned().collect::<BTreeSet<_>>(),
        expected
    );
    assert!(after.contains(&stray));

    // The table keeps snapshot 5, which still reaches every file it lists.
    let (json, metadata) = engine.metadata(&c).await;
    let ids: Vec<i64> = metadata.snapshots().map(|s| s.snapshot_id()).collect();
    assert_eq!(ids, vec![5]);
    assert_eq!(json["metadata-log"].as_array().unwrap().len() as u64, 7);
    for kept in files[1..].iter().chain([&replacement]) {
        assert!(c.exists(kept).await, "{kept}");
    }

    // One commit event by floe-maintenance, then one maintained event with the counts.
    let events = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/events"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    let events = events.assert_ok(200)["events"].as_array().unwrap().clone();
    let maintained: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "io.floe.table.maintained")
        .collect();
    assert_eq!(maintained.len(), 1);
    assert_eq!(maintained[0]["data"]["maintenance"]["files-deleted"], 6);
    assert_eq!(maintained[0]["data"]["principal"]["id"], "floe:maintenance");
    let expiry = events
        .iter()
        .rev()
        .find(|e| e["type"] == "io.floe.table.committed")
        .unwrap();
    assert_eq!(expiry["data"]["principal"]["id"], "floe:maintenance");

    // A second run finds nothing left.
    let again = maintain(&c, "mx", "t", "").await;
    assert_eq!(again["snapshots-expired"], 0);
    assert_eq!(again["files-deleted"], 0);
}

#[tokio::test]
async fn unreferenced_files_go_only_when_older_than_the_threshold() {
    let (c, clock) = catalog().await;
    c.create_namespace("mu").await;
    // The namespace turns removal on for the tables created after it.
    c.post(
        &format!("{}/properties", ns_path("mu")),
        json!({"updates": {"floe.maintenance.unreferenced-file-age-ms": "259200000"}}),
    )
    .await
    .assert_ok(200);
    c.create_table("mu", "t").await;
    let mut engine = Engine::new(&c, "mu", "t").await;
    let live = engine.append(&c, 1, clock.now_ms()).await;
    let stray = format!("{}/data/crashed-writer.parquet", engine.location);
    c.overwrite(&stray, vec![1; 64]).await;

    let young = maintain(&c, "mu", "t", "verbose=true").await;
    assert_eq!(young["files-deleted"], 0, "{young}");
    assert_eq!(young["kept-by-reason"]["too-young"], 1, "{young}");

    clock.advance_ms(4 * DAY_MS);
    let old = maintain(&c, "mu", "t", "verbose=true").await;
    assert_eq!(deleted_locations(&old), BTreeSet::from([stray.clone()]));
    assert_eq!(old["deleted-by-reason"]["unreferenced"], 1);
    assert_eq!(old["bytes-deleted"], 64);
    assert!(!c.exists(&stray).await);
    assert!(c.exists(&live).await, "the referenced file stays");
    // The newest snapshot stays however old (min-snapshots-to-keep 1).
    let (_, metadata) = engine.metadata(&c).await;
    assert_eq!(metadata.snapshots().count(), 1);

    // A table that existed before the namespace turned removal on keeps its strays.
    c.create_namespace("mv").await;
    c.create_table("mv", "t").await;
    c.post(
        &format!("{}/properties", ns_path("mv")),
        json!({"updates": {"floe.maintenance.unreferenced-file-age-ms": "1"}}),
    )
    .await
    .assert_ok(200);
    let other = Engine::new(&c, "mv", "t").await;
    let kept = format!("{}/data/stray.parquet", other.location);
    c.overwrite(&kept, vec![1; 8]).await;
    clock.advance_ms(DAY_MS);
    let report = maintain(&c, "mv", "t", "").await;
    assert_eq!(report["files-deleted"], 0);
    assert!(c.exists(&kept).await);
}

#[tokio::test]
async fn old_metadata_files_go_with_delete_after_commit() {
    let (c, _clock) = catalog().await;
    c.create_namespace("mm").await;
    c.create_table("mm", "t").await;
    set_properties(
        &c,
        "mm",
        "t",
        json!({"write.metadata.previous-versions-max": "2", "write.metadata.delete-after-commit.enabled": "true"}),
    )
    .await;
    for n in 0..4 {
        set_properties(&c, "mm", "t", json!({"n": n.to_string()})).await;
    }
    let loaded = c.get(&table_path("mm", "t")).await;
    let metadata = loaded.assert_ok(200);
    let location = metadata["metadata"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut retained: BTreeSet<String> = metadata["metadata"]["metadata-log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata-file"].as_str().unwrap().to_owned())
        .collect();
    retained.insert(metadata["metadata-location"].as_str().unwrap().to_owned());
    assert_eq!(retained.len(), 3);
    let report = maintain(&c, "mm", "t", "verbose=true").await;
    assert_eq!(report["deleted-by-reason"]["old-metadata"], 3, "{report}");
    let left: BTreeSet<String> = c
        .files_under(&format!("{location}/metadata"))
        .await
        .into_iter()
        .collect();
    assert_eq!(left, retained);
    // The table loads as before.
    c.get(&table_path("mm", "t")).await.assert_ok(200);
}

#[tokio::test]
async fn settings_are_read_with_their_source_and_bad_values_are_refused() {
    let (c, _clock) = catalog().await;
    c.create_namespace("ms").await;
    c.post(
        &format!("{}/properties", ns_path("ms")),
        json!({"updates": {"history.expire.min-snapshots-to-keep": "5"}}),
    )
    .await
    .assert_ok(200);
    c.create_table("ms", "t").await;
    set_properties(
        &c,
        "ms",
        "t",
        json!({"history.expire.max-snapshot-age-ms": "1000"}),
    )
    .await;
    let settings = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/namespaces/ms/tables/t/maintenance"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    let settings = settings.assert_ok(200);
    let source = |key: &str| {
        settings["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .unwrap()["source"]
            .clone()
    };
    assert_eq!(source("history.expire.max-snapshot-age-ms"), "table");
    assert_eq!(source("history.expire.min-snapshots-to-keep"), "namespace");
    assert_eq!(source("history.expire.max-ref-age-ms"), "default");
    assert_eq!(settings["policy"]["min-snapshots-to-keep"], 5);
    assert_eq!(settings["policy"]["max-snapshot-age-ms"], 1000);

    // Refused where they are set, with nothing written.
    let bad = c
        .post(
            &table_path("ms", "t"),
            json!({"requirements": [], "updates": [{"action": "set-properties", "updates": {"history.expire.min-snapshots-to-keep": "0"}}]}),
        )
        .await;
    bad.assert_error(400, "BadRequestException");
    let bad = c
        .post(
            &format!("{}/properties", ns_path("ms")),
            json!({"updates": {"floe.maintenance.unreferenced-file-age-ms": "3 days"}}),
        )
        .await;
    bad.assert_error(400, "BadRequestException");

    // Only a manager of the table may run it.
    let denied = c
        .management(
            Method::POST,
            &maintain_path("ms", "t", ""),
            &c.write_token,
            None,
        )
        .await;
    assert_eq!(denied.status.as_u16(), 403);
}

/// Writers append while runs expire and delete: no commit is lost, and every file the table
/// references afterwards is still there.
#[tokio::test]
async fn commits_racing_runs_never_lose_a_referenced_file() {
    let (c, clock) = catalog().await;
    let c = Arc::new(c);
    c.create_namespace("mr").await;
    c.create_table("mr", "t").await;
    set_properties(
        &c,
        "mr",
        "t",
        json!({"history.expire.max-snapshot-age-ms": "1", "write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}),
    )
    .await;
    let mut engine = Engine::new(&c, "mr", "t").await;
    let rounds = 25;
    let mut committed_during_fence = 0;
    for round in 0..rounds {
        let id = round + 1;
        clock.advance_ms(10);
        let runner = {
            let c = c.clone();
            tokio::spawn(async move {
                c.catalog
                    .tables
                    .maintain_table(
                        &admin_context(&c).await,
                        "mr",
                        "t",
                        MaintainOptions::default(),
                    )
                    .await
            })
        };
        let file = engine.append(&c, id, clock.now_ms()).await;
        let report = runner.await.unwrap().expect("the run");
        if report.error.is_some() {
            committed_during_fence += 1;
        }
        assert!(c.exists(&file).await, "round {round}: the appended file");
    }
    // Everything the table reaches now exists: its lists, manifests and data files.
    let (_, metadata) = engine.metadata(&c).await;
    let snapshot = metadata.current_snapshot().unwrap();
    assert_eq!(snapshot.snapshot_id(), rounds);
    let list = c.read_bytes(snapshot.manifest_list()).await;
    let list =
        iceberg::spec::ManifestList::parse_with_version(&list, metadata.format_version()).unwrap();
    assert_eq!(list.entries().len() as i64, rounds);
    for manifest in list.entries() {
        let bytes = c.read_bytes(&manifest.manifest_path).await;
        let manifest = iceberg::spec::Manifest::parse_avro(&bytes).unwrap();
        for entry in manifest.entries() {
            assert!(c.exists(entry.file_path()).await, "{}", entry.file_path());
        }
    }
    eprintln!("{rounds} rounds; {committed_during_fence} runs stopped by a racing commit");
}

/// A commit that lands after the run judged the directory and before its first batch: the run's
/// fence fails on it, the run re-reads the table, and the file the commit came to reference
/// (an old unreferenced file, judged deletable) is spared.
#[tokio::test]
async fn a_commit_landing_before_the_deletion_saves_what_it_references() {
    let (c, clock, gate) = gated_catalog().await;
    c.create_namespace("mg").await;
    c.create_table("mg", "t").await;
    set_properties(
        &c,
        "mg",
        "t",
        json!({"floe.maintenance.unreferenced-file-age-ms": "1000"}),
    )
    .await;
    let mut engine = Engine::new(&c, "mg", "t").await;
    engine.append(&c, 1, clock.now_ms()).await;
    // Written by a job that commits it late, and a stray nobody will.
    let late = engine.data_file(&c, "late", 300).await;
    let stray = engine.data_file(&c, "stray", 200).await;
    clock.advance_ms(DAY_MS);

    let (listed, go) = arm(&gate.armed);
    let run = {
        let c = c.clone();
        tokio::spawn(async move {
            let options = MaintainOptions {
                verbose: true,
                ..MaintainOptions::default()
            };
            c.catalog
                .tables
                .maintain_table(&admin_context(&c).await, "mg", "t", options)
                .await
        })
    };
    listed.await.unwrap();
    // The run has judged both files deletable; the late job commits its file now.
    let carried = engine.manifests.clone();
    let (answer, _) = engine
        .commit(&c, 2, clock.now_ms(), carried, std::slice::from_ref(&late))
        .await;
    answer.assert_ok(200);
    go.send(()).unwrap();
    let report = run.await.unwrap().unwrap();

    let deleted: BTreeSet<String> = report
        .deleted_files
        .unwrap()
        .into_iter()
        .map(|f| f.location)
        .collect();
    assert_eq!(deleted, BTreeSet::from([stray.clone()]));
    assert!(c.exists(&late).await, "the committed file is spared");
    assert!(!c.exists(&stray).await);
    let spared = report.kept_files.unwrap();
    assert!(
        spared.iter().any(|f| f.location == late),
        "reported as kept: {spared:?}"
    );
    // The table reads its new snapshot's files.
    let (_, metadata) = engine.metadata(&c).await;
    assert_eq!(metadata.current_snapshot().unwrap().snapshot_id(), 2);
}

/// While a batch is deleted the table's commits wait: the fence stands on the row, no commit
/// lands under it, and the waiting commit lands once it is lifted, losing nothing.
#[tokio::test]
async fn commits_wait_while_a_batch_is_deleted() {
    let (c, clock, gate) = gated_catalog().await;
    c.create_namespace("mw").await;
    c.create_table("mw", "t").await;
    set_properties(
        &c,
        "mw",
        "t",
        json!({"floe.maintenance.unreferenced-file-age-ms": "1000"}),
    )
    .await;
    let mut engine = Engine::new(&c, "mw", "t").await;
    engine.append(&c, 1, clock.now_ms()).await;
    let stray = engine.data_file(&c, "stray", 200).await;
    clock.advance_ms(DAY_MS);
    let before = c.get(&table_path("mw", "t")).await.assert_ok(200)["metadata-location"].clone();

    let (held, go) = arm(&gate.delete_armed);
    let run = {
        let c = c.clone();
        tokio::spawn(async move {
            c.catalog
                .tables
                .maintain_table(
                    &admin_context(&c).await,
                    "mw",
                    "t",
                    MaintainOptions::default(),
                )
                .await
        })
    };
    held.await.unwrap();
    let row = floe::store::rows::get::<floe::model::TableRow>(
        &*c.store,
        &floe::store::rows::keys::table(
            &c.catalog
                .core
                .lookups
                .live_namespace(&admin_context(&c).await, "mw")
                .await
                .unwrap()
                .row
                .id,
            "t",
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        row.row.is_fenced(clock.now_ms()),
        "the batch runs under the fence"
    );
    let writer = {
        let c = c.clone();
        let now = clock.now_ms();
        tokio::spawn(async move {
            let mut engine = engine;
            engine.append(&c, 2, now).await;
            engine
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let during = c.get(&table_path("mw", "t")).await.assert_ok(200)["metadata-location"].clone();
    assert_eq!(during, before, "no commit lands under the fence");
    go.send(()).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.files_deleted, 1);
    let engine = writer.await.unwrap();
    assert!(!c.exists(&stray).await);
    let (_, metadata) = engine.metadata(&c).await;
    assert_eq!(metadata.current_snapshot().unwrap().snapshot_id(), 2);
}

/// Tables due at once drain through racing schedulers and workers that take claims off a
/// queue delivering each message twice (as SQS may): every table is maintained exactly once,
/// and each is due again a day later with no lease held.
#[tokio::test]
async fn due_tables_drain_through_racing_workers_once_each() {
    // The local backend makes the thousand tables; the DynamoDB and S3 emulator, a
    // fifth of them in the time one test has.
    let tables: u64 = if std::env::var("FLOE_TEST_BACKEND").as_deref() == Ok("aws") {
        200
    } else {
        1000
    };
    let (c, clock) = catalog().await;
    let c = Arc::new(c);
    let namespaces = c.create_tables_spread("fleet", tables).await;
    let now = clock.now_ms();
    let (queue, inbox) = tokio::sync::mpsc::unbounded_channel();
    let inbox = Arc::new(tokio::sync::Mutex::new(inbox));
    let schedulers: Vec<_> = (0..2)
        .map(|_| {
            let (c, queue) = (c.clone(), queue.clone());
            tokio::spawn(async move {
                loop {
                    let claimed = c.catalog.schedule_due(now, 100).await.unwrap();
                    if claimed.is_empty() {
                        return;
                    }
                    for due in claimed {
                        queue.send(due.clone()).unwrap();
                        queue.send(due).unwrap();
                    }
                }
            })
        })
        .collect();
    drop(queue);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (c, inbox) = (c.clone(), inbox.clone());
            tokio::spawn(async move {
                let mut maintained = 0u64;
                loop {
                    let Some(due) = inbox.lock().await.recv().await else {
                        return maintained;
                    };
                    if let floe::catalog::tables::maintenance::WorkerOutcome::Maintained(o) =
                        c.catalog.maintain_claimed(&due, now).await.unwrap()
                    {
                        assert!(o.error.is_none(), "{o:?}");
                        maintained += 1;
                    }
                }
            })
        })
        .collect();
    for s in schedulers {
        s.await.unwrap();
    }
    let mut maintained = 0;
    for w in workers {
        maintained += w.await.unwrap();
    }
    assert_eq!(maintained, tables, "each table once, duplicates skipped");
    let mut all = std::collections::BTreeMap::new();
    for ns in &namespaces {
        all.extend(c.maintenance_states(ns).await);
    }
    let states = all;
    assert_eq!(states.len() as u64, tables);
    for (name, state) in &states {
        assert_eq!(state.runs, 1, "{name}: {state:?}");
        assert_eq!(state.lease_until_ms, 0, "{name}");
        assert_eq!(state.last_run_ms, now, "{name}");
        assert_eq!(state.next_due_ms, Some(now + DAY_MS), "{name}");
    }
    // Nothing is due until a day has passed.
    assert!(
        c.catalog
            .schedule_due(now + 1000, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        c.catalog
            .schedule_due(now + DAY_MS, 2000)
            .await
            .unwrap()
            .len() as u64,
        tables
    );
}

/// A worker killed in the middle of a table (after its expiry commit, before its deletions)
/// leaves the table leased: another delivery of the claim does nothing, the table is not
/// claimed again until the claim's grace has passed, and then the next worker's lease
/// finishes the run. Nothing of the killed run is half-committed.
#[tokio::test]
async fn a_killed_worker_leaves_the_table_to_the_next_lease() {
    use floe::catalog::tables::maintenance::{CLAIM_GRACE, WorkerOutcome};
    let (c, clock, gate) = gated_catalog().await;
    c.create_namespace("mk").await;
    c.create_table("mk", "t").await;
    let mut engine = Engine::new(&c, "mk", "t").await;
    engine.append(&c, 1, clock.now_ms()).await;
    engine.append(&c, 2, clock.now_ms()).await;
    clock.advance_ms(6 * DAY_MS);
    let now = clock.now_ms();
    let claimed = c.catalog.schedule_due(now, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let due = claimed[0].clone();

    let (listed, _never) = arm(&gate.armed);
    let killed = {
        let (c, due) = (c.clone(), due.clone());
        tokio::spawn(async move { c.catalog.maintain_claimed(&due, now).await })
    };
    listed.await.unwrap();
    killed.abort();
    assert!(killed.await.unwrap_err().is_cancelled());
    let expired_by_killed = c.maintenance_states("mk").await["t"].clone();
    assert!(
        expired_by_killed.lease_until_ms > now,
        "{expired_by_killed:?}"
    );
    assert_eq!(expired_by_killed.runs, 0);

    // The same claim delivered again: the table is held.
    assert!(matches!(
        c.catalog.maintain_claimed(&due, now).await.unwrap(),
        WorkerOutcome::Skipped
    ));
    // Not claimable while the claim's grace runs.
    clock.advance_ms(CLAIM_GRACE.as_millis() as u64 - 1000);
    assert!(
        c.catalog
            .schedule_due(clock.now_ms(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Past it (and past the lease), the next claim's worker runs it to the end.
    clock.advance_ms(2000);
    let later = clock.now_ms();
    let again = c.catalog.schedule_due(later, 10).await.unwrap();
    assert_eq!(again.len(), 1);
    match c.catalog.maintain_claimed(&again[0], later).await.unwrap() {
        WorkerOutcome::Maintained(outcome) => assert!(outcome.error.is_none(), "{outcome:?}"),
        other => panic!("{other:?}"),
    }
    let state = c.maintenance_states("mk").await["t"].clone();
    assert_eq!(state.runs, 1);
    assert_eq!(state.lease_until_ms, 0);
    assert_eq!(state.next_due_ms, Some(later + DAY_MS));
    // The table reads: every file its snapshots reference is there.
    c.get(&table_path("mk", "t")).await.assert_ok(200);
}

/// A dry run of the scheduled pass plans the tables a run would take, those the sweep has
/// not indexed yet included, and writes nothing: no state row, no claim.
#[tokio::test]
async fn a_dry_scheduled_run_plans_unindexed_tables_and_writes_nothing() {
    let (c, clock) = catalog().await;
    c.create_namespace("dry").await;
    c.create_table("dry", "fresh").await;
    let options = MaintainOptions {
        dry_run: true,
        verbose: false,
    };
    let run = c
        .catalog
        .tables
        .maintain_due(clock.now_ms(), options, 100)
        .await
        .unwrap();
    assert!(
        run.tables.iter().any(|t| t.table.ends_with("/dry/fresh")),
        "{run:?}"
    );
    assert!(c.maintenance_states("dry").await.is_empty());
    // The real run then indexes, claims and maintains it.
    let run = c
        .catalog
        .tables
        .maintain_due(clock.now_ms(), MaintainOptions::default(), 100)
        .await
        .unwrap();
    assert!(run.tables.iter().any(|t| t.table.ends_with("/dry/fresh")));
    assert_eq!(c.maintenance_states("dry").await["fresh"].runs, 1);
}
