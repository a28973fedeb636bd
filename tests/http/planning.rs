//! Server-side scan planning over real Avro manifest lists and manifests (written here with the
//! `iceberg` crate, as an engine writes them): pruning by partition and by column metrics, the
//! delete files that apply to each data file, the ContentFile JSON engines read, paging into
//! plan tasks, incremental scans, the signed tokens, and bad requests. Engines reading through
//! Floe's plans, and the differential test against PyIceberg's own planning:
//! tests/interop/test_planning.py.

use std::collections::{BTreeSet, HashMap};

use floe_tests::*;
use http::Method;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Literal, ManifestFile,
    ManifestListWriter, ManifestWriterBuilder, Struct, TableMetadata,
};
use serde_json::{Value, json};

const NS: &str = "planned";

fn plan_path(table: &str) -> String {
    format!("{}/plan", table_path(NS, table))
}

fn tasks_path(table: &str) -> String {
    format!("{}/tasks", table_path(NS, table))
}

/// A table partitioned by `region` (identity) with columns `id` (long) and `region` (string).
async fn partitioned_table(c: &TestCatalog, name: &str) -> Writer {
    partitioned_table_of_version(c, name, 2).await
}

async fn partitioned_table_of_version(c: &TestCatalog, name: &str, version: u8) -> Writer {
    let body = json!({
        "properties": {"format-version": version.to_string()},
        "name": name,
        "schema": {"type": "struct", "fields": [
            {"id": 1, "name": "id", "type": "long", "required": true},
            {"id": 2, "name": "region", "type": "string", "required": false}
        ]},
        "partition-spec": {"spec-id": 0, "fields": [
            {"name": "region", "transform": "identity", "source-id": 2, "field-id": 1000}
        ]}
    });
    c.post(&tables_path(NS), body).await.assert_ok(200);
    Writer::new(c, name).await
}

/// One data file of the table: its partition and the range of `id` it holds.
struct Rows {
    name: String,
    region: String,
    ids: (i64, i64),
}

fn rows(name: &str, region: &str, ids: (i64, i64)) -> Rows {
    Rows {
        name: name.into(),
        region: region.into(),
        ids,
    }
}

/// Writes manifests and manifest lists as an engine does, and commits snapshots.
struct Writer {
    table: String,
    location: String,
    io: FileIO,
    /// Manifests the next snapshot carries over.
    manifests: Vec<ManifestFile>,
}

impl Writer {
    async fn new(c: &TestCatalog, table: &str) -> Self {
        let loaded = c.get(&table_path(NS, table)).await;
        let location = loaded.assert_ok(200)["metadata"]["location"]
            .as_str()
            .unwrap()
            .to_owned();
        Writer {
            table: table.into(),
            location,
            io: FileIO::new_with_memory(),
            manifests: Vec::new(),
        }
    }

    async fn metadata(&self, c: &TestCatalog) -> (Value, TableMetadata) {
        let json = c.get(&table_path(NS, &self.table)).await.assert_ok(200)["metadata"].clone();
        let parsed = serde_json::from_value(json.clone()).unwrap();
        (json, parsed)
    }

    fn data_path(&self, name: &str) -> String {
        format!("{}/data/{name}.parquet", self.location)
    }

    fn data_file(&self, rows: &Rows) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_format(DataFileFormat::Parquet)
            .file_path(self.data_path(&rows.name))
            .file_size_in_bytes(1000)
            .record_count((rows.ids.1 - rows.ids.0 + 1) as u64)
            .partition_spec_id(0)
            .partition(Struct::from_iter([Some(Literal::string(&rows.region))]))
            .value_counts(HashMap::from([(1, 10), (2, 10)]))
            .null_value_counts(HashMap::from([(1, 0), (2, 0)]))
            .lower_bounds(HashMap::from([
                (1, Datum::long(rows.ids.0)),
                (2, Datum::string(&rows.region)),
            ]))
            .upper_bounds(HashMap::from([
                (1, Datum::long(rows.ids.1)),
                (2, Datum::string(&rows.region)),
            ]))
            .build()
            .unwrap()
    }

    /// A position delete file of `region` whose `file_path` bounds name `target` only.
    fn position_deletes(&self, name: &str, region: &str, target: &str) -> DataFile {
        let path_id = 2_147_483_546;
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_format(DataFileFormat::Parquet)
            .file_path(self.data_path(name))
            .file_size_in_bytes(100)
            .record_count(1)
            .partition_spec_id(0)
            .partition(Struct::from_iter([Some(Literal::string(region))]))
            .lower_bounds(HashMap::from([(path_id, Datum::string(target))]))
            .upper_bounds(HashMap::from([(path_id, Datum::string(target))]))
            .build()
            .unwrap()
    }

    fn equality_deletes(&self, name: &str, region: &str) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::EqualityDeletes)
            .file_format(DataFileFormat::Parquet)
            .file_path(self.data_path(name))
            .file_size_in_bytes(100)
            .record_count(1)
            .partition_spec_id(0)
            .partition(Struct::from_iter([Some(Literal::string(region))]))
            .equality_ids(Some(vec![1]))
            .build()
            .unwrap()
    }

    /// Writes a manifest of `files` (data, or deletes when `deletes`) for `snapshot_id`.
    async fn manifest(
        &self,
        c: &TestCatalog,
        metadata: &TableMetadata,
        snapshot_id: i64,
        name: &str,
        files: Vec<DataFile>,
        deletes: bool,
    ) -> ManifestFile {
        let sequence = metadata.last_sequence_number() + 1;
        let scratch = format!("memory:///{name}.avro");
        let builder = ManifestWriterBuilder::new(
            self.io.new_output(&scratch).unwrap(),
            Some(snapshot_id),
            metadata.current_schema().clone(),
            metadata.default_partition_spec().as_ref().clone(),
        );
        let v3 = metadata.format_version() == iceberg::spec::FormatVersion::V3;
        let mut writer = match (deletes, v3) {
            (true, false) => builder.build_v2_deletes(),
            (false, false) => builder.build_v2_data(),
            (true, true) => builder.build_v3_deletes(),
            (false, true) => builder.build_v3_data(),
        };
        // Added entries leave their sequence numbers to inheritance from the manifest list,
        // as Java and PyIceberg write them.
        let _ = sequence;
        for file in files {
            writer
                .add_file(file, iceberg::spec::UNASSIGNED_SEQUENCE_NUMBER)
                .unwrap();
        }
        let mut manifest = writer.write_manifest_file().await.unwrap();
        let location = format!("{}/metadata/{name}.avro", self.location);
        let bytes = self.io.new_input(&scratch).unwrap().read().await.unwrap();
        c.overwrite(&location, bytes.to_vec()).await;
        manifest.manifest_path = location;
        manifest
    }

    /// Commits snapshot `snapshot_id` holding the carried manifests and `new` ones. On a v3
    /// table, new data manifests are given first row ids from the table's `next-row-id`, as
    /// the snapshot that adds them records.
    async fn commit(
        &mut self,
        c: &TestCatalog,
        snapshot_id: i64,
        operation: &str,
        mut new: Vec<ManifestFile>,
    ) {
        let (json, metadata) = self.metadata(c).await;
        let parent = metadata.current_snapshot().map(|s| s.snapshot_id());
        let sequence = metadata.last_sequence_number() + 1;
        let v3 = metadata.format_version() == iceberg::spec::FormatVersion::V3;
        let first_row_id = json["next-row-id"].as_u64().unwrap_or(0);
        let mut next_row_id = first_row_id;
        if v3 {
            for m in new
                .iter_mut()
                .filter(|m| m.content == iceberg::spec::ManifestContentType::Data)
            {
                m.first_row_id = Some(next_row_id);
                next_row_id += m.added_rows_count.unwrap_or(0) + m.existing_rows_count.unwrap_or(0);
            }
        }
        let scratch = format!("memory:///snap-{snapshot_id}.avro");
        let output = self
            .io
            .new_output(&scratch)
            .unwrap()
            .writer()
            .await
            .unwrap();
        let mut list = if v3 {
            ManifestListWriter::v3(output, snapshot_id, parent, sequence, Some(first_row_id))
        } else {
            ManifestListWriter::v2(output, snapshot_id, parent, sequence)
        };
        let mut listed = self.manifests.clone();
        listed.extend(new);
        list.add_manifests(listed.clone().into_iter()).unwrap();
        list.close().await.unwrap();
        for m in &mut listed {
            if m.sequence_number == iceberg::spec::UNASSIGNED_SEQUENCE_NUMBER {
                m.sequence_number = sequence;
                m.min_sequence_number = sequence;
            }
        }
        self.manifests = listed;
        let location = format!("{}/metadata/snap-{snapshot_id}.avro", self.location);
        let bytes = self.io.new_input(&scratch).unwrap().read().await.unwrap();
        c.overwrite(&location, bytes.to_vec()).await;
        let mut snapshot = json!({
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": parent,
            "sequence-number": sequence,
            "timestamp-ms": json["last-updated-ms"].as_i64().unwrap() + 1,
            "manifest-list": location,
            "summary": {"operation": operation},
            "schema-id": 0
        });
        if v3 {
            snapshot["first-row-id"] = json!(first_row_id);
            snapshot["added-rows"] = json!(next_row_id - first_row_id);
        }
        let body = json!({
            "requirements": [
                {"type": "assert-table-uuid", "uuid": json["table-uuid"]},
                {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}
            ],
            "updates": [
                {"action": "add-snapshot", "snapshot": snapshot},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id}
            ]
        });
        c.post(&table_path(NS, &self.table), body)
            .await
            .assert_ok(200);
    }

    /// Appends one manifest of `rows` as snapshot `snapshot_id`.
    async fn append(&mut self, c: &TestCatalog, snapshot_id: i64, rows: &[Rows]) {
        let (_, metadata) = self.metadata(c).await;
        let files = rows.iter().map(|r| self.data_file(r)).collect();
        let manifest = self
            .manifest(
                c,
                &metadata,
                snapshot_id,
                &format!("m-{snapshot_id}"),
                files,
                false,
            )
            .await;
        self.commit(c, snapshot_id, "append", vec![manifest]).await;
    }
}

fn a() -> Rows {
    rows("us-low", "us", (1, 10))
}

fn b() -> Rows {
    rows("us-high", "us", (11, 20))
}

fn c_rows() -> Rows {
    rows("eu-low", "eu", (1, 10))
}

/// The data file paths a plan answer lists, by file name.
fn planned(answer: &Value) -> BTreeSet<String> {
    answer["file-scan-tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| file_name(&t["data-file"]))
        .collect()
}

fn file_name(file: &Value) -> String {
    let path = file["file-path"].as_str().unwrap();
    path.rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches(".parquet")
        .to_owned()
}

/// Each planned file's delete files, by file name.
fn deletes_of(answer: &Value) -> HashMap<String, BTreeSet<String>> {
    let deletes = answer["delete-files"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    answer["file-scan-tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let applied = t["delete-file-references"]
                .as_array()
                .map(|refs| {
                    refs.iter()
                        .map(|i| file_name(&deletes[i.as_u64().unwrap() as usize]))
                        .collect()
                })
                .unwrap_or_default();
            (file_name(&t["data-file"]), applied)
        })
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A table with A and B in `us`, C in `eu`; then a delete snapshot: position deletes against
/// A, equality deletes in `eu`.
async fn table_with_deletes(c: &TestCatalog, name: &str) -> Writer {
    c.create_namespace(NS).await;
    let mut w = partitioned_table(c, name).await;
    w.append(c, 1, &[a(), b(), c_rows()]).await;
    let (_, metadata) = w.metadata(c).await;
    let target = w.data_path("us-low");
    let deletes = vec![
        w.position_deletes("us-pos", "us", &target),
        w.equality_deletes("eu-eq", "eu"),
    ];
    let manifest = w.manifest(c, &metadata, 2, "d-2", deletes, true).await;
    w.commit(c, 2, "delete", vec![manifest]).await;
    w
}

#[tokio::test]
async fn a_plan_prunes_by_partition_and_metrics_and_carries_the_deletes_that_apply() {
    let c = TestCatalog::new().await;
    table_with_deletes(&c, "orders").await;

    let all = c.post(&plan_path("orders"), json!({"filter": true})).await;
    let all = all.assert_ok(200);
    assert_eq!(all["status"], "completed");
    assert!(all["plan-id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(planned(all), names(&["us-low", "us-high", "eu-low"]));
    let deletes = deletes_of(all);
    assert_eq!(deletes["us-low"], names(&["us-pos"]), "{all}");
    assert_eq!(
        deletes["us-high"],
        names(&[]),
        "its path is outside the deletes' bounds"
    );
    assert_eq!(deletes["eu-low"], names(&["eu-eq"]));
    assert!(
        all.get("plan-tasks").is_none(),
        "a small plan is answered whole"
    );

    let cases = [
        (
            json!({"type": "eq", "term": "region", "value": "us"}),
            vec!["us-low", "us-high"],
        ),
        (
            json!({"type": "lt", "term": "id", "value": 11}),
            vec!["us-low", "eu-low"],
        ),
        (
            json!({"type": "and", "left": {"type": "eq", "term": "region", "value": "us"},
                   "right": {"type": "gt-eq", "term": "id", "value": 15}}),
            vec!["us-high"],
        ),
        (
            json!({"type": "not", "child": {"type": "eq", "term": "region", "value": "us"}}),
            vec!["eu-low"],
        ),
        (
            json!({"type": "in", "term": "id", "values": [25, 30]}),
            vec![],
        ),
        (
            json!({"type": "starts-with", "term": "region", "value": "e"}),
            vec!["eu-low"],
        ),
        (json!({"type": "is-null", "term": "region"}), vec![]),
        // The 1.12 form, references by id.
        (
            json!({"type": "lt", "left": {"type": "reference", "id": 1}, "right": 11}),
            vec!["us-low", "eu-low"],
        ),
    ];
    for (filter, expected) in cases {
        let answer = c
            .post(&plan_path("orders"), json!({"filter": filter}))
            .await;
        let answer = answer.assert_ok(200);
        assert_eq!(planned(answer), names(&expected), "{filter}");
        // Every delete file listed is referenced, and every reference points at one.
        let listed = answer["delete-files"].as_array().map_or(0, Vec::len);
        let referenced: BTreeSet<u64> = answer["file-scan-tasks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| {
                t["delete-file-references"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|i| i.as_u64().unwrap())
            .collect();
        assert_eq!(referenced.len(), listed, "{filter}: {answer}");
    }
}

#[tokio::test]
async fn a_v3_table_plans_deletion_vectors_and_row_lineage() {
    let c = TestCatalog::new().await;
    c.create_namespace(NS).await;
    let mut w = partitioned_table_of_version(&c, "lineage", 3).await;
    w.append(&c, 1, &[a(), b()]).await;
    let (_, metadata) = w.metadata(&c).await;
    let target = w.data_path("us-low");
    let vector = DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_format(DataFileFormat::Puffin)
        .file_path(format!("{}/data/dv-1.puffin", w.location))
        .file_size_in_bytes(200)
        .record_count(2)
        .partition_spec_id(0)
        .partition(Struct::from_iter([Some(Literal::string("us"))]))
        .referenced_data_file(Some(target.clone()))
        .content_offset(Some(4))
        .content_size_in_bytes(Some(40))
        .build()
        .unwrap();
    // A position delete file an older writer left: a deletion vector of the file replaces it.
    let older = w.position_deletes("us-pos", "us", &target);
    let manifest = w
        .manifest(&c, &metadata, 2, "d-2", vec![vector, older], true)
        .await;
    w.commit(&c, 2, "delete", vec![manifest]).await;

    let answer = c.post(&plan_path("lineage"), json!({})).await;
    let answer = answer.assert_ok(200);
    assert_eq!(
        deletes_of(answer)["us-low"],
        names(&["dv-1.puffin"]),
        "{answer}"
    );
    assert_eq!(deletes_of(answer)["us-high"], names(&[]));
    let dv = &answer["delete-files"][0];
    assert_eq!(dv["content"], "position-deletes");
    assert_eq!(dv["file-format"], "puffin");
    assert_eq!(dv["referenced-data-file"], json!(target));
    assert_eq!(dv["content-offset"], 4);
    assert_eq!(dv["content-size-in-bytes"], 40);
    // Row lineage: each data file's first row id, inherited from its manifest in order.
    let first_row_id = |name: &str| {
        answer["file-scan-tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| file_name(&t["data-file"]) == name)
            .unwrap()["data-file"]["first-row-id"]
            .clone()
    };
    assert_eq!(first_row_id("us-low"), json!(0));
    assert_eq!(first_row_id("us-high"), json!(10));
}

#[tokio::test]
async fn tasks_carry_the_files_as_java_writes_them() {
    let c = TestCatalog::new().await;
    table_with_deletes(&c, "shaped").await;
    let answer = c
        .post(
            &plan_path("shaped"),
            json!({"filter": {"type": "eq", "term": "id", "value": 3}, "stats-fields": ["id"]}),
        )
        .await;
    let answer = answer.assert_ok(200);
    let task = answer["file-scan-tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| file_name(&t["data-file"]) == "us-low")
        .unwrap();
    let file = &task["data-file"];
    assert_eq!(file["content"], "data");
    assert_eq!(file["file-format"], "parquet");
    assert_eq!(file["spec-id"], 0);
    assert_eq!(file["partition"], json!(["us"]));
    assert_eq!(file["record-count"], 10);
    assert_eq!(file["file-size-in-bytes"], 1000);
    // Bounds of the stats field only, as the hex of Iceberg's binary single value.
    assert_eq!(
        file["lower-bounds"],
        json!({"keys": [1], "values": ["0100000000000000"]})
    );
    assert_eq!(
        file["upper-bounds"],
        json!({"keys": [1], "values": ["0A00000000000000"]})
    );
    assert_eq!(file["value-counts"], json!({"keys": [1], "values": [10]}));
    assert!(file.get("null-value-counts").is_some());
    // The residual is the filter, in the term form.
    assert_eq!(
        task["residual-filter"],
        json!({"type": "eq", "term": "id", "value": 3})
    );
    let deletes = answer["delete-files"].as_array().unwrap();
    let position = deletes.iter().find(|d| file_name(d) == "us-pos").unwrap();
    assert_eq!(position["content"], "position-deletes");
    let equality = deletes.iter().find(|d| file_name(d) == "eu-eq").unwrap();
    assert_eq!(equality["content"], "equality-deletes");
    assert_eq!(equality["equality-ids"], json!([1]));

    // Without stats-fields, no metrics at all; without a filter, no residual.
    let plain = c.post(&plan_path("shaped"), json!({})).await;
    let first = &plain.assert_ok(200)["file-scan-tasks"][0];
    assert!(first["data-file"].get("lower-bounds").is_none());
    assert!(first.get("residual-filter").is_none());
}

/// A catalog whose plans read at most `entries` manifest entries per answer.
async fn paging_catalog(entries: u64) -> TestCatalog {
    TestCatalog::custom(Wrap::default(), move |b| b.plan_entries_per_answer(entries)).await
}

#[tokio::test]
async fn a_plan_paged_into_tasks_returns_every_file_once() {
    let c = paging_catalog(2).await;
    c.create_namespace(NS).await;
    let mut w = partitioned_table(&c, "paged").await;
    let mut expected = BTreeSet::new();
    let regions = ["us", "eu", "ap"];
    for snapshot in 1..=7i64 {
        let rows: Vec<Rows> = (0..2)
            .map(|i| {
                let region = regions[(snapshot as usize + i) % 3];
                rows(
                    &format!("f-{snapshot}-{i}"),
                    region,
                    (snapshot * 10, snapshot * 10 + 5),
                )
            })
            .collect();
        expected.extend(rows.iter().map(|r| r.name.clone()));
        w.append(&c, snapshot, &rows).await;
    }
    let answer = c.post(&plan_path("paged"), json!({"filter": true})).await;
    let answer = answer.assert_ok(200).clone();
    let tasks: Vec<String> = answer["plan-tasks"]
        .as_array()
        .expect("a plan over 7 manifests of 2 files at 2 entries an answer is paged")
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tasks.len(), 6, "one manifest inline, one per task");
    assert_eq!(
        tasks.iter().collect::<BTreeSet<_>>().len(),
        tasks.len(),
        "no duplicate task"
    );
    let mut seen: Vec<String> = planned(&answer).into_iter().collect();
    for task in &tasks {
        let fetched = c
            .post(&tasks_path("paged"), json!({"plan-task": task}))
            .await;
        let fetched = fetched.assert_ok(200);
        assert!(fetched.get("plan-tasks").is_none());
        seen.extend(planned(fetched));
    }
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "every file once: {seen:?}");
    assert_eq!(unique, expected);

    // A filter applies to every page.
    let answer = c
        .post(
            &plan_path("paged"),
            json!({"filter": {"type": "eq", "term": "region", "value": "ap"}}),
        )
        .await;
    let answer = answer.assert_ok(200).clone();
    // Pages cover only the manifests whose partition summaries admit the filter.
    let pages = answer["plan-tasks"].as_array().map_or(0, Vec::len);
    assert!(
        pages < tasks.len(),
        "{pages} pages for a third of the manifests pruned"
    );
    let mut seen = planned(&answer);
    for task in answer["plan-tasks"].as_array().into_iter().flatten() {
        let fetched = c
            .post(&tasks_path("paged"), json!({"plan-task": task}))
            .await;
        seen.extend(planned(fetched.assert_ok(200)));
    }
    let ap: BTreeSet<String> = (1..=7i64)
        .flat_map(|s| {
            (0..2)
                .filter(move |i| regions[(s as usize + i) % 3] == "ap")
                .map(move |i| format!("f-{s}-{i}"))
        })
        .collect();
    assert_eq!(seen, ap);
}

#[tokio::test]
async fn plan_ids_and_tasks_are_the_callers_own_and_cannot_be_altered() {
    let c = paging_catalog(1).await;
    c.create_namespace(NS).await;
    let mut w = partitioned_table(&c, "guarded").await;
    w.append(&c, 1, &[a()]).await;
    w.append(&c, 2, &[b()]).await;
    let answer = c.post(&plan_path("guarded"), json!({})).await;
    let answer = answer.assert_ok(200).clone();
    let plan_id = answer["plan-id"].as_str().unwrap().to_owned();
    let task = answer["plan-tasks"][0].as_str().unwrap().to_owned();

    // The owner fetches and cancels its own.
    let again = c.get(&format!("{}/{plan_id}", plan_path("guarded"))).await;
    let again = again.assert_ok(200);
    assert_eq!(again["status"], "completed");
    assert!(
        again.get("plan-id").is_none(),
        "a fetched result carries no plan id"
    );
    assert_eq!(planned(again), planned(&answer));
    c.delete(&format!("{}/{plan_id}", plan_path("guarded")))
        .await
        .assert_ok(204);

    // Another principal who may read the table: its own plans work, the owner's do not.
    let created = c
        .management(
            Method::POST,
            &format!("/orgs/{ORG}/api-clients"),
            ADMIN_TOKEN,
            Some(json!({"name": "reader", "role": "read"})),
        )
        .await;
    let reader = created.assert_ok(201)["token"].as_str().unwrap().to_owned();
    c.post_as(&reader, &plan_path("guarded"), json!({}))
        .await
        .assert_ok(200);
    c.post_as(&reader, &tasks_path("guarded"), json!({"plan-task": task}))
        .await
        .assert_error(404, "NoSuchPlanTaskException");
    c.request(
        Method::GET,
        &format!("{}/{plan_id}", plan_path("guarded")),
        Some(&reader),
        None,
    )
    .await
    .assert_error(404, "NoSuchPlanIdException");

    // Altered or made-up tokens name nothing.
    let mut altered = task.clone().into_bytes();
    let last = altered.len() - 1;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for bad in [altered.as_str(), "", "bm90LWEtdGFzaw"] {
        c.post(&tasks_path("guarded"), json!({"plan-task": bad}))
            .await
            .assert_error(404, "NoSuchPlanTaskException");
    }
    c.delete(&format!("{}/not-a-plan", plan_path("guarded")))
        .await
        .assert_error(404, "NoSuchPlanIdException");
    // A task of one table is nothing to another of the same caller.
    let mut other = partitioned_table(&c, "other").await;
    other.append(&c, 1, &[c_rows()]).await;
    c.post(&tasks_path("other"), json!({"plan-task": task}))
        .await
        .assert_error(404, "NoSuchPlanTaskException");
    // A plan's id is accepted for its credentials, another string is not.
    c.get(&format!(
        "{}/credentials?planId={plan_id}",
        table_path(NS, "guarded")
    ))
    .await
    .assert_ok(200);
    c.get(&format!(
        "{}/credentials?planId=made-up",
        table_path(NS, "guarded")
    ))
    .await
    .assert_error(404, "NoSuchPlanIdException");
}

/// A large filter (an `in` list of thousands of values) must not make the plan id a URL
/// that API Gateway or a proxy refuses: the id then names the filter by its digest.
#[tokio::test]
async fn a_plan_of_a_large_filter_has_a_short_id() {
    let c = paging_catalog(1).await;
    c.create_namespace(NS).await;
    let mut w = partitioned_table(&c, "wide").await;
    w.append(&c, 1, &[a()]).await;
    w.append(&c, 2, &[b()]).await;
    let values: Vec<String> = (0..800).map(|i| format!("region-{i:05}")).collect();
    let mut values: Vec<Value> = values.into_iter().map(Value::from).collect();
    values.push(json!("us"));
    values.push(json!("eu"));
    let filter = json!({"type": "in", "term": "region", "values": values});
    let whole = c.post(&plan_path("wide"), json!({})).await;
    let whole = whole.assert_ok(200).clone();
    let answer = c
        .post(&plan_path("wide"), json!({ "filter": filter }))
        .await;
    let answer = answer.assert_ok(200).clone();
    let plan_id = answer["plan-id"].as_str().unwrap().to_owned();
    assert!(
        plan_id.len() <= 1024,
        "a plan id of {} bytes does not fit a URL",
        plan_id.len()
    );
    // Its tasks still carry the filter and plan what the first answer did not.
    let mut seen = planned(&answer);
    for task in answer["plan-tasks"].as_array().into_iter().flatten() {
        let fetched = c
            .post(&tasks_path("wide"), json!({"plan-task": task}))
            .await;
        seen.extend(planned(fetched.assert_ok(200)));
    }
    let mut all = planned(&whole);
    for task in whole["plan-tasks"].as_array().into_iter().flatten() {
        let fetched = c
            .post(&tasks_path("wide"), json!({"plan-task": task}))
            .await;
        all.extend(planned(fetched.assert_ok(200)));
    }
    assert!(!seen.is_empty() && seen.is_subset(&all));
    // Nothing is held, so the id cancels and opens credentials; fetching the result again
    // would need the filter it no longer carries: the plan is gone, as the spec lets a
    // server say.
    let fetched = format!("{}/{plan_id}", plan_path("wide"));
    c.delete(&fetched).await.assert_ok(204);
    c.get(&format!(
        "{}/credentials?planId={plan_id}",
        table_path(NS, "wide")
    ))
    .await
    .assert_ok(200);
    c.get(&fetched)
        .await
        .assert_error(404, "NoSuchPlanIdException");
}

#[tokio::test]
async fn an_incremental_scan_reads_the_appends_after_its_exclusive_start() {
    let c = TestCatalog::new().await;
    c.create_namespace(NS).await;
    let mut w = partitioned_table(&c, "events").await;
    w.append(&c, 1, &[a()]).await;
    w.append(&c, 2, &[b()]).await;
    w.append(&c, 3, &[c_rows()]).await;
    let range = |start: Option<i64>, end: i64| {
        let mut body = json!({"end-snapshot-id": end});
        if let Some(start) = start {
            body["start-snapshot-id"] = json!(start);
        }
        body
    };
    let answer = c.post(&plan_path("events"), range(Some(1), 3)).await;
    assert_eq!(
        planned(answer.assert_ok(200)),
        names(&["us-high", "eu-low"])
    );
    let answer = c.post(&plan_path("events"), range(Some(2), 2)).await;
    assert_eq!(planned(answer.assert_ok(200)), names(&[]));
    let answer = c.post(&plan_path("events"), range(None, 2)).await;
    assert_eq!(
        planned(answer.assert_ok(200)),
        names(&["us-low", "us-high"])
    );
    // A point-in-time scan of an older snapshot.
    let answer = c
        .post(&plan_path("events"), json!({"snapshot-id": 1}))
        .await;
    assert_eq!(planned(answer.assert_ok(200)), names(&["us-low"]));
    // A start that is not an ancestor of the end.
    c.post(&plan_path("events"), range(Some(3), 2))
        .await
        .assert_error(400, "BadRequestException");

    // Once its snapshot is gone, a plan's id and its tasks name nothing.
    let old = c
        .post(&plan_path("events"), json!({"snapshot-id": 1}))
        .await;
    let plan_id = old.assert_ok(200)["plan-id"].as_str().unwrap().to_owned();
    let fetched = format!("{}/{plan_id}", plan_path("events"));
    c.get(&fetched).await.assert_ok(200);
    let expire = json!({"requirements": [], "updates": [
        {"action": "remove-snapshots", "snapshot-ids": [1]}]});
    c.post(&table_path(NS, "events"), expire)
        .await
        .assert_ok(200);
    c.get(&fetched)
        .await
        .assert_error(404, "NoSuchPlanIdException");
}

#[tokio::test]
async fn bad_plan_requests_are_400s_and_an_empty_table_plans_nothing() {
    let c = TestCatalog::new().await;
    c.create_namespace(NS).await;
    let mut w = partitioned_table(&c, "strict").await;
    let empty = c.post(&plan_path("strict"), json!({})).await;
    let empty = empty.assert_ok(200);
    assert_eq!(empty["file-scan-tasks"], json!([]));
    assert_eq!(empty["status"], "completed");
    w.append(&c, 1, &[a()]).await;
    for body in [
        json!({"snapshot-id": 1, "start-snapshot-id": 1, "end-snapshot-id": 1}),
        json!({"snapshot-id": 99}),
        json!({"start-snapshot-id": 1}),
        json!({"filter": {"type": "lt", "term": "id", "value": "many"}}),
        json!({"filter": {"type": "eq", "term": "nope", "value": 1}}),
        json!({"filter": {"type": "frobnicate"}}),
        json!({"stats-fields": ["nope"]}),
        json!({"select": ["id", "nope"]}),
        json!({"filter": {"type": "eq", "term": "ID", "value": 1}}),
    ] {
        c.post(&plan_path("strict"), body.clone())
            .await
            .assert_error(400, "BadRequestException");
    }
    // Names are matched case-insensitively only when asked.
    c.post(
        &plan_path("strict"),
        json!({"case-sensitive": false, "select": ["ID"],
        "filter": {"type": "eq", "term": "ID", "value": 1}}),
    )
    .await
    .assert_ok(200);
    // Not a table: the spec's 404s.
    c.post(&plan_path("missing"), json!({}))
        .await
        .assert_error(404, "NoSuchTableException");
}

#[tokio::test]
async fn a_manifest_outside_the_tables_directory_is_never_read() {
    let c = TestCatalog::new().await;
    c.create_namespace(NS).await;
    let mut victim = partitioned_table(&c, "victim").await;
    victim.append(&c, 1, &[a()]).await;
    let mut thief = partitioned_table(&c, "thief").await;
    // The thief's snapshot lists the victim's manifest.
    let borrowed = victim.manifests.clone();
    thief.commit(&c, 7, "append", borrowed).await;
    let refused = c.post(&plan_path("thief"), json!({})).await;
    refused.assert_error(400, "BadRequestException");
    assert!(
        !refused.body.to_string().contains("us-low"),
        "{}",
        refused.body
    );
}

#[tokio::test]
async fn planning_is_a_read_of_the_table() {
    let c = TestCatalog::new().await;
    c.create_namespace(NS).await;
    let mut w = partitioned_table(&c, "private").await;
    w.append(&c, 1, &[a()]).await;
    let (_, outsider) = principal_without_role(&c, "outsider").await;
    // Refused as a load of the table is.
    let load = c
        .request(
            Method::GET,
            &table_path(NS, "private"),
            Some(&outsider),
            None,
        )
        .await;
    let plan = c.post_as(&outsider, &plan_path("private"), json!({})).await;
    assert_eq!((plan.status, &plan.body), (load.status, &load.body));
    plan.assert_error(403, "ForbiddenException");
    c.post_as(&outsider, &tasks_path("private"), json!({"plan-task": "x"}))
        .await
        .assert_error(403, "ForbiddenException");
}
