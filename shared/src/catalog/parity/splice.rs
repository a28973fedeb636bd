//! A commit's metadata file built from its base file's bytes, so that a commit costs what it
//! changes: the small fields are serialised afresh, and the lists that only grow or lose items
//! (`snapshots`, `snapshot-log`, `metadata-log`, statistics) keep the bytes the base file already
//! holds for every item that did not change. A one-snapshot append to a 10,000-snapshot table
//! serialises one snapshot, not ten thousand.
//!
//! The result is byte for byte what [`super::order::to_java_json`] writes for the same metadata
//! (the tests compare both paths, and debug builds compare them on every commit). Only files this
//! process wrote are spliced: their [`Layout`] is known and their bytes are this serialiser's. A
//! file read from storage, which any writer could have formatted, goes through the full path once
//! and is spliced from then on. Format-version 1 tables, whose refs Floe keeps beside the crate,
//! always take the full path.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use iceberg::TableUpdate;
use iceberg::spec::{FormatVersion, Snapshot, Summary, TableMetadata};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::order::{self, JAVA_FIELD_ORDER};

/// Where a metadata file's parts lie in its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// Each top-level field's value, in document order.
    fields: Vec<(&'static str, Range<usize>)>,
    /// Each object of the `snapshots` array with its snapshot id, in document order.
    snapshots: Vec<(i64, Range<usize>)>,
}

impl Layout {
    /// The layout of a format-version 2 or 3 document written by [`order::to_java_json`]; `None`
    /// when the document has a field the splice does not know (nothing it writes today).
    pub fn scan(raw: &[u8]) -> Option<Layout> {
        let document: Vec<(String, &RawValue)> =
            serde_json::from_slice::<OrderedFields>(raw).ok()?.0;
        let base = raw.as_ptr() as usize;
        let range_of = |value: &RawValue| {
            let start = value.get().as_ptr() as usize - base;
            start..start + value.get().len()
        };
        let mut layout = Layout::default();
        for (key, value) in document {
            let key = *JAVA_FIELD_ORDER.iter().find(|known| **known == key)?;
            if key == "snapshots" {
                let items: Vec<&RawValue> = serde_json::from_str(value.get()).ok()?;
                for item in items {
                    let id: SnapshotId = serde_json::from_str(item.get()).ok()?;
                    layout.snapshots.push((id.snapshot_id, range_of(item)));
                }
            }
            layout.fields.push((key, range_of(value)));
        }
        Some(layout)
    }

    fn field(&self, key: &str) -> Option<Range<usize>> {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, range)| range.clone())
    }

    /// The bytes this layout holds besides the file itself, for cache weights.
    pub fn weight(&self) -> usize {
        self.snapshots.len() * std::mem::size_of::<(i64, Range<usize>)>()
            + self.fields.len() * std::mem::size_of::<(&str, Range<usize>)>()
    }
}

#[derive(Deserialize)]
struct SnapshotId {
    #[serde(rename = "snapshot-id")]
    snapshot_id: i64,
}

/// A JSON object's fields in document order, values left as raw slices of the input.
struct OrderedFields<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for OrderedFields<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Fields<'a> {
            type Value = OrderedFields<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a metadata document")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Self::Value, M::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    fields.push(entry);
                }
                Ok(OrderedFields(fields))
            }
        }
        deserializer.deserialize_map(Fields(std::marker::PhantomData))
    }
}

/// `next`'s metadata file, built from `base`'s file (`base_raw`, laid out as `layout`), and its
/// layout. `changes` are what the builder applied to `base` to make `next` (its refs are
/// replayed from them: the crate does not show a document's refs). `None` when the splice does
/// not apply (format-version 1, a format upgrade, a change it cannot follow): the caller writes
/// the full document instead.
pub fn splice(
    base_raw: &[u8],
    layout: &Layout,
    base: &TableMetadata,
    next: &TableMetadata,
    changes: &[TableUpdate],
) -> Option<(Vec<u8>, Layout)> {
    let version = match (base.format_version(), next.format_version()) {
        (FormatVersion::V2, FormatVersion::V2) => FormatVersion::V2,
        (FormatVersion::V3, FormatVersion::V3) => FormatVersion::V3,
        _ => return None,
    };
    let mut small = small_fields(next, version)?;
    let refs = replayed_refs(base_raw, layout, next, changes)?;
    small.insert("refs".into(), Value::Object(refs));
    super::specs::restore(&mut small);
    order::order_lists(&mut small);
    let snapshot_order = snapshot_order(next);

    let mut out = Vec::with_capacity(base_raw.len() + 4096);
    let mut written = Layout::default();
    out.push(b'{');
    for key in JAVA_FIELD_ORDER {
        let present = match *key {
            "snapshots" => !snapshot_order.is_empty(),
            "snapshot-log" => !next.history().is_empty(),
            "metadata-log" => !next.metadata_log().is_empty(),
            "statistics" => next.statistics_iter().len() > 0,
            "partition-statistics" => next.partition_statistics_iter().len() > 0,
            other => small.contains_key(other),
        };
        if !present {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        let start = out.len();
        let base_field = layout.field(key).map(|range| &base_raw[range]);
        match *key {
            "snapshots" => {
                let items = Snapshots {
                    base_raw,
                    base_items: &layout.snapshots,
                    base,
                    next,
                    version,
                };
                let added: Vec<i64> = changes
                    .iter()
                    .filter_map(|change| match change {
                        TableUpdate::AddSnapshot { snapshot } => Some(snapshot.snapshot_id()),
                        _ => None,
                    })
                    .collect();
                written.snapshots = items.write(&mut out, &snapshot_order, &added)?;
            }
            "snapshot-log" => write_log(&mut out, base_field, base.history(), next.history())?,
            "metadata-log" => write_log(
                &mut out,
                base_field,
                base.metadata_log(),
                next.metadata_log(),
            )?,
            "statistics" => {
                let unchanged = same_files(
                    base.statistics_iter().map(|f| (f.snapshot_id, f)),
                    next.statistics_iter().map(|f| (f.snapshot_id, f)),
                    base,
                    next,
                );
                write_files(
                    &mut out,
                    base_field.filter(|_| unchanged),
                    next.statistics_iter(),
                    &snapshot_order,
                )?;
            }
            "partition-statistics" => {
                let unchanged = same_files(
                    base.partition_statistics_iter().map(|f| (f.snapshot_id, f)),
                    next.partition_statistics_iter().map(|f| (f.snapshot_id, f)),
                    base,
                    next,
                );
                write_files(
                    &mut out,
                    base_field.filter(|_| unchanged),
                    next.partition_statistics_iter(),
                    &snapshot_order,
                )?;
            }
            other => serde_json::to_writer(&mut out, small.get(other)?).ok()?,
        }
        written.fields.push((key, start..out.len()));
    }
    out.push(b'}');
    Some((out, written))
}

/// Every top-level field but the lists the splice keeps, as the crate's serialisation gives
/// them (its `TableMetadataV2` / `TableMetadataV3` shapes) with Java's null current snapshot in
/// v3.
fn small_fields(next: &TableMetadata, version: FormatVersion) -> Option<Map<String, Value>> {
    let mut fields = Map::new();
    let number = if version == FormatVersion::V3 { 3 } else { 2 };
    fields.insert("format-version".into(), Value::from(number));
    fields.insert("table-uuid".into(), value(&next.uuid())?);
    fields.insert("location".into(), Value::from(next.location()));
    fields.insert(
        "last-sequence-number".into(),
        Value::from(next.last_sequence_number()),
    );
    fields.insert(
        "last-updated-ms".into(),
        Value::from(next.last_updated_ms()),
    );
    fields.insert("last-column-id".into(), Value::from(next.last_column_id()));
    let schemas: Option<Vec<Value>> = next
        .schemas_iter()
        .map(|s| {
            let mut schema = value(s.as_ref())?;
            super::single_values::java_schema(&mut schema);
            Some(schema)
        })
        .collect();
    fields.insert("schemas".into(), Value::Array(schemas?));
    fields.insert(
        "current-schema-id".into(),
        Value::from(next.current_schema_id()),
    );
    let specs: Option<Vec<Value>> = next
        .partition_specs_iter()
        .map(|s| value(s.as_ref()))
        .collect();
    fields.insert("partition-specs".into(), Value::Array(specs?));
    fields.insert(
        "default-spec-id".into(),
        Value::from(next.default_partition_spec_id()),
    );
    fields.insert(
        "last-partition-id".into(),
        Value::from(next.last_partition_id()),
    );
    if !next.properties().is_empty() {
        fields.insert("properties".into(), value(next.properties())?);
    }
    match next.current_snapshot_id() {
        Some(id) => {
            fields.insert("current-snapshot-id".into(), Value::from(id));
        }
        None if version == FormatVersion::V3 => {
            fields.insert("current-snapshot-id".into(), Value::Null);
        }
        None => {}
    }
    let orders: Option<Vec<Value>> = next.sort_orders_iter().map(|o| value(o.as_ref())).collect();
    fields.insert("sort-orders".into(), Value::Array(orders?));
    fields.insert(
        "default-sort-order-id".into(),
        Value::from(next.default_sort_order_id()),
    );
    if version == FormatVersion::V3 {
        fields.insert("next-row-id".into(), Value::from(next.next_row_id()));
        if next.encryption_keys_iter().len() > 0 {
            let keys: Option<Vec<Value>> = next.encryption_keys_iter().map(value).collect();
            fields.insert("encryption-keys".into(), Value::Array(keys?));
        }
    }
    Some(fields)
}

/// A part as a `Value`, as the full path builds every part (so maps come out with their keys
/// sorted).
fn value<T: Serialize + ?Sized>(part: &T) -> Option<Value> {
    serde_json::to_value(part).ok()
}

/// `next`'s refs: the base file's, with the builder's ref changes replayed in order and every
/// ref whose snapshot is gone dropped (as the builder drops them when snapshots are removed).
/// Checked against what `next` says each ref points at; `None` if anything disagrees.
fn replayed_refs(
    base_raw: &[u8],
    layout: &Layout,
    next: &TableMetadata,
    changes: &[TableUpdate],
) -> Option<Map<String, Value>> {
    let mut refs: Map<String, Value> = match layout.field("refs") {
        Some(range) => serde_json::from_slice(&base_raw[range]).ok()?,
        None => Map::new(),
    };
    for change in changes {
        match change {
            TableUpdate::SetSnapshotRef {
                ref_name,
                reference,
            } => {
                refs.insert(ref_name.clone(), serde_json::to_value(reference).ok()?);
            }
            TableUpdate::RemoveSnapshotRef { ref_name } => {
                refs.remove(ref_name);
            }
            _ => {}
        }
    }
    refs.retain(|_, reference| {
        reference
            .get("snapshot-id")
            .and_then(Value::as_i64)
            .is_some_and(|id| next.snapshot_by_id(id).is_some())
    });
    for (name, reference) in &refs {
        let points_at = reference.get("snapshot-id").and_then(Value::as_i64);
        if next.snapshot_for_ref(name).map(|s| s.snapshot_id()) != points_at {
            return None;
        }
    }
    let main_agrees = match next.current_snapshot_id() {
        Some(current) => {
            next.snapshot_for_ref(iceberg::spec::MAIN_BRANCH)
                .map(|s| s.snapshot_id())
                == Some(current)
        }
        None => !refs.contains_key(iceberg::spec::MAIN_BRANCH),
    };
    main_agrees.then_some(refs)
}

/// Snapshot ids in the full path's order: by sequence number, then timestamp.
fn snapshot_order(next: &TableMetadata) -> Vec<i64> {
    let mut keyed: Vec<(i64, i64, i64)> = next
        .snapshots()
        .map(|s| (s.sequence_number(), s.timestamp_ms(), s.snapshot_id()))
        .collect();
    keyed.sort_by_key(|(sequence, timestamp, _)| (*sequence, *timestamp));
    keyed.into_iter().map(|(_, _, id)| id).collect()
}

/// The `snapshots` array of a spliced document.
struct Snapshots<'a> {
    base_raw: &'a [u8],
    base_items: &'a [(i64, Range<usize>)],
    base: &'a TableMetadata,
    next: &'a TableMetadata,
    version: FormatVersion,
}

impl Snapshots<'_> {
    /// Writes the array in `order`, copying each snapshot the base file holds unchanged and
    /// serialising the others; answers where each item went. Snapshots never change once added,
    /// so a base item is reused unless its id was removed and added again by this commit.
    fn write(
        &self,
        out: &mut Vec<u8>,
        order: &[i64],
        added: &[i64],
    ) -> Option<Vec<(i64, Range<usize>)>> {
        let mut items = Vec::with_capacity(order.len());
        out.push(b'[');
        // The usual commit keeps every base snapshot in place and adds after them: one copy.
        let kept = self.base_items.len();
        let prefix = kept > 0
            && order.len() >= kept
            && self
                .base_items
                .iter()
                .zip(order)
                .all(|((id, _), next)| id == next && !added.contains(id));
        let mut start_at = 0;
        if prefix {
            let first = self.base_items[0].1.start;
            let last = self.base_items[kept - 1].1.end;
            let shift = out.len() as isize - first as isize;
            out.extend_from_slice(&self.base_raw[first..last]);
            items.extend(self.base_items.iter().map(|(id, range)| {
                let moved = |at: usize| (at as isize + shift) as usize;
                (*id, moved(range.start)..moved(range.end))
            }));
            start_at = kept;
        }
        let mut cursor = start_at;
        for (position, id) in order.iter().enumerate().skip(start_at) {
            if position > 0 {
                out.push(b',');
            }
            // Base items the new document no longer has are skipped over.
            while cursor < self.base_items.len()
                && self
                    .next
                    .snapshot_by_id(self.base_items[cursor].0)
                    .is_none()
            {
                cursor += 1;
            }
            let snapshot = self.next.snapshot_by_id(*id)?;
            let start = out.len();
            match self.base_items.get(cursor) {
                Some((base_id, range)) if base_id == id => {
                    cursor += 1;
                    if !added.contains(id) && unchanged(self.base.snapshot_by_id(*id), snapshot) {
                        out.extend_from_slice(&self.base_raw[range.clone()]);
                    } else {
                        write_snapshot(out, snapshot, self.version)?;
                    }
                }
                _ => write_snapshot(out, snapshot, self.version)?,
            }
            items.push((*id, start..out.len()));
        }
        out.push(b']');
        Some(items)
    }
}

fn unchanged(base: Option<&Arc<Snapshot>>, next: &Arc<Snapshot>) -> bool {
    base.is_some_and(|base| Arc::ptr_eq(base, next) || base == next)
}

/// One snapshot as the crate serialises it in a v2 or v3 document (`SnapshotV2`, `SnapshotV3`).
fn write_snapshot(out: &mut Vec<u8>, snapshot: &Snapshot, version: FormatVersion) -> Option<()> {
    let v3 = version == FormatVersion::V3;
    let json = SnapshotJson {
        snapshot_id: snapshot.snapshot_id(),
        parent_snapshot_id: snapshot.parent_snapshot_id(),
        sequence_number: snapshot.sequence_number(),
        timestamp_ms: snapshot.timestamp_ms(),
        manifest_list: snapshot.manifest_list(),
        summary: snapshot.summary(),
        schema_id: snapshot.schema_id(),
        first_row_id: snapshot.first_row_id().filter(|_| v3),
        added_rows: snapshot.added_rows_count().filter(|_| v3),
        key_id: snapshot.encryption_key_id().filter(|_| v3),
    };
    write_value(out, &json)
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct SnapshotJson<'a> {
    snapshot_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_snapshot_id: Option<i64>,
    sequence_number: i64,
    timestamp_ms: i64,
    manifest_list: &'a str,
    summary: &'a Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema_id: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_row_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    added_rows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_id: Option<&'a str>,
}

/// A log that only grew keeps its base bytes and gains the new entries; any other is written
/// whole.
fn write_log<T: Serialize + PartialEq>(
    out: &mut Vec<u8>,
    base_field: Option<&[u8]>,
    base: &[T],
    next: &[T],
) -> Option<()> {
    match base_field {
        Some(raw) if !base.is_empty() && next.starts_with(base) && raw.ends_with(b"]") => {
            out.extend_from_slice(&raw[..raw.len() - 1]);
            for entry in &next[base.len()..] {
                out.push(b',');
                write_value(out, entry)?;
            }
            out.push(b']');
            Some(())
        }
        _ => write_value(out, next),
    }
}

/// Whether a statistics list is the base's, for snapshots both documents hold (so its order,
/// which follows the snapshots', is the same too).
fn same_files<'a, T: PartialEq + 'a>(
    base: impl ExactSizeIterator<Item = (i64, &'a T)>,
    next: impl ExactSizeIterator<Item = (i64, &'a T)>,
    base_metadata: &TableMetadata,
    next_metadata: &TableMetadata,
) -> bool {
    if base.len() != next.len() {
        return false;
    }
    let base: HashMap<i64, &T> = base.collect();
    next.into_iter().all(|(id, file)| {
        base.get(&id) == Some(&file)
            && base_metadata.snapshot_by_id(id).is_some()
            && next_metadata.snapshot_by_id(id).is_some()
    })
}

/// A statistics list: the base's bytes when unchanged, else in the order of its snapshots.
fn write_files<'a, T: Serialize + HasSnapshot + 'a>(
    out: &mut Vec<u8>,
    unchanged: Option<&[u8]>,
    files: impl Iterator<Item = &'a T>,
    snapshot_order: &[i64],
) -> Option<()> {
    if let Some(raw) = unchanged {
        out.extend_from_slice(raw);
        return Some(());
    }
    let position: HashMap<i64, usize> = snapshot_order
        .iter()
        .enumerate()
        .map(|(position, id)| (*id, position))
        .collect();
    let mut files: Vec<&T> = files.collect();
    files.sort_by_key(|f| (position.get(&f.snapshot()).copied(), f.snapshot()));
    let values: Option<Vec<Value>> = files
        .into_iter()
        .map(|f| serde_json::to_value(f).ok())
        .collect();
    serde_json::to_writer(out, &Value::Array(values?)).ok()
}

/// The snapshot a statistics file describes.
trait HasSnapshot {
    fn snapshot(&self) -> i64;
}

impl HasSnapshot for iceberg::spec::StatisticsFile {
    fn snapshot(&self) -> i64 {
        self.snapshot_id
    }
}

impl HasSnapshot for iceberg::spec::PartitionStatisticsFile {
    fn snapshot(&self) -> i64 {
        self.snapshot_id
    }
}

fn write_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, item: &T) -> Option<()> {
    let value = serde_json::to_value(item).ok()?;
    serde_json::to_writer(out, &value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{
        NestedField, PrimitiveType, Schema, SortOrder, TableMetadataBuilder, Type,
        UnboundPartitionSpec,
    };
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::json;

    fn new_table(version: FormatVersion) -> TableMetadata {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        TableMetadataBuilder::new(
            schema,
            UnboundPartitionSpec::builder().build(),
            SortOrder::unsorted_order(),
            "file:///w/ns/t".into(),
            version,
            HashMap::from([("owner".to_owned(), "floe".to_owned())]),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata
    }

    /// A table as a test follows it: its metadata, file and layout, and what a generator needs.
    struct Table {
        metadata: TableMetadata,
        raw: Vec<u8>,
        layout: Layout,
        version: u64,
        next_id: i64,
        branches: Vec<String>,
        tags: Vec<String>,
        columns: i32,
    }

    impl Table {
        fn new(version: FormatVersion) -> Self {
            let metadata = new_table(version);
            let raw = order::to_java_json(&metadata, None).unwrap();
            let layout = Layout::scan(&raw).expect("a v2/v3 document lays out");
            Table {
                metadata,
                raw,
                layout,
                version: 0,
                next_id: 1,
                branches: vec!["main".into()],
                tags: Vec::new(),
                columns: 2,
            }
        }

        fn snapshot_ids(&self) -> Vec<i64> {
            let mut ids: Vec<i64> = self.metadata.snapshots().map(|s| s.snapshot_id()).collect();
            ids.sort();
            ids
        }

        fn append(&mut self, branch: &str, rng: &mut StdRng) -> Vec<Value> {
            let id = self.next_id * 1_000 + rng.random_range(0..1_000);
            self.next_id += 1;
            let parent = self
                .metadata
                .snapshot_for_ref(branch)
                .map(|s| s.snapshot_id());
            let mut snapshot = json!({
                "snapshot-id": id,
                "sequence-number": self.metadata.next_sequence_number(),
                "timestamp-ms": self.metadata.last_updated_ms() + 1,
                "manifest-list": format!("file:///w/ns/t/metadata/snap-{id}.avro"),
                "summary": {"operation": "append", "added-data-files": "1",
                    "arraylake.author-name": "Ada", "z-key": "é \"quoted\" \\ \u{1}"},
                "schema-id": self.metadata.current_schema_id(),
            });
            if let Some(parent) = parent {
                snapshot["parent-snapshot-id"] = json!(parent);
            }
            if self.metadata.format_version() == FormatVersion::V3 {
                snapshot["first-row-id"] = json!(self.metadata.next_row_id());
                snapshot["added-rows"] = json!(rng.random_range(1..100));
            }
            vec![
                json!({"action": "add-snapshot", "snapshot": snapshot}),
                json!({"action": "set-snapshot-ref", "ref-name": branch, "type": "branch",
                    "snapshot-id": id, "max-snapshot-age-ms": 86_400_000}),
            ]
        }

        /// Commits `count` appends to main, each of which must land.
        fn append_to_main(&mut self, count: usize, rng: &mut StdRng) {
            for _ in 0..count {
                let updates = self.append("main", rng);
                assert!(self.commit(updates));
            }
        }

        /// One random commit's updates, chosen from what the table holds.
        fn random_updates(&mut self, rng: &mut StdRng) -> Vec<Value> {
            let ids = self.snapshot_ids();
            let any_snapshot = |rng: &mut StdRng| ids[rng.random_range(0..ids.len())];
            match rng.random_range(0..14) {
                0..=3 => self.append("main", rng),
                4 => {
                    let branch = format!("b{}", rng.random_range(0..3));
                    if !self.branches.contains(&branch) {
                        self.branches.push(branch.clone());
                    }
                    self.append(&branch, rng)
                }
                5 if !ids.is_empty() => {
                    let tag = format!("t{}", self.next_id);
                    self.next_id += 1;
                    self.tags.push(tag.clone());
                    vec![
                        json!({"action": "set-snapshot-ref", "ref-name": tag, "type": "tag",
                        "snapshot-id": any_snapshot(rng), "max-ref-age-ms": 3_600_000}),
                    ]
                }
                6 if self.tags.len() + self.branches.len() > 1 => {
                    let mut names: Vec<String> =
                        self.tags.iter().chain(&self.branches).cloned().collect();
                    names.retain(|n| n != "main");
                    let name = names[rng.random_range(0..names.len())].clone();
                    self.tags.retain(|t| *t != name);
                    self.branches.retain(|b| *b != name);
                    vec![json!({"action": "remove-snapshot-ref", "ref-name": name})]
                }
                7 => vec![json!({"action": "set-properties", "updates": {
                    format!("k{}", rng.random_range(0..5)): format!("v{}", rng.random::<u32>())}})],
                8 => vec![json!({"action": "remove-properties",
                    "removals": [format!("k{}", rng.random_range(0..5)), "owner"]})],
                9 => {
                    self.columns += 1;
                    let fields: Vec<Value> = (1..=self.columns)
                        .map(|id| json!({"id": id, "name": format!("c{id}"), "required": false, "type": "long"}))
                        .collect();
                    vec![
                        json!({"action": "add-schema", "schema": {"type": "struct", "fields": fields}}),
                        json!({"action": "set-current-schema", "schema-id": -1}),
                    ]
                }
                10 if !ids.is_empty() => {
                    let id = any_snapshot(rng);
                    vec![
                        json!({"action": "set-statistics", "snapshot-id": id, "statistics": {
                        "snapshot-id": id, "statistics-path": format!("file:///w/ns/t/metadata/{id}.stats"),
                        "file-size-in-bytes": 100, "file-footer-size-in-bytes": 10,
                        "blob-metadata": [{"type": "apache-datasketches-theta-v1", "snapshot-id": id,
                            "sequence-number": 1, "fields": [1], "properties": {"ndv": "3"}}]}}),
                    ]
                }
                11 if !ids.is_empty() => {
                    let id = any_snapshot(rng);
                    if rng.random_bool(0.5) {
                        vec![json!({"action": "remove-statistics", "snapshot-id": id})]
                    } else {
                        vec![
                            json!({"action": "set-partition-statistics", "partition-statistics": {
                            "snapshot-id": id, "statistics-path": format!("file:///w/ns/t/metadata/p{id}.parquet"),
                            "file-size-in-bytes": 42}}),
                        ]
                    }
                }
                12 if ids.len() > 3 => {
                    // Expiry: a few snapshots no ref points at.
                    let referenced: Vec<i64> = self
                        .tags
                        .iter()
                        .chain(&self.branches)
                        .filter_map(|r| self.metadata.snapshot_for_ref(r).map(|s| s.snapshot_id()))
                        .collect();
                    let doomed: Vec<i64> = ids
                        .iter()
                        .copied()
                        .filter(|id| !referenced.contains(id) && rng.random_bool(0.5))
                        .collect();
                    vec![json!({"action": "remove-snapshots", "snapshot-ids": doomed})]
                }
                13 => vec![
                    json!({"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
                        {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "nulls-first"}]}}),
                    json!({"action": "set-default-sort-order", "sort-order-id": -1}),
                ],
                _ => self.append("main", rng),
            }
        }

        /// Applies `updates` as the commit path does, and checks that the splice writes what
        /// the full path writes, laid out as a scan of it says.
        fn commit(&mut self, updates: Vec<Value>) -> bool {
            let updates: Vec<TableUpdate> = updates
                .into_iter()
                .map(|u| serde_json::from_value(u).unwrap())
                .collect();
            let previous = format!("file:///w/ns/t/metadata/{:05}.metadata.json", self.version);
            let mut builder = self.metadata.clone().into_builder(Some(previous));
            for update in updates {
                builder = match update.apply(builder) {
                    Ok(builder) => builder,
                    Err(_) => return false,
                };
            }
            let Ok(built) = builder.build() else {
                return false;
            };
            let full = order::to_java_json(&built.metadata, None).unwrap();
            let (spliced, layout) = splice(
                &self.raw,
                &self.layout,
                &self.metadata,
                &built.metadata,
                &built.changes,
            )
            .expect("a v2/v3 commit splices");
            assert_eq!(
                String::from_utf8(spliced.clone()).unwrap(),
                String::from_utf8(full.clone()).unwrap()
            );
            assert_eq!(Some(&layout), Layout::scan(&full).as_ref());
            self.metadata = built.metadata;
            self.raw = spliced;
            self.layout = layout;
            self.version += 1;
            true
        }
    }

    #[test]
    fn random_commit_sequences_splice_to_the_full_documents_bytes() {
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for seed in 0..40 {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut table = Table::new(version);
                let mut landed = 0;
                for _ in 0..60 {
                    let updates = table.random_updates(&mut rng);
                    landed += usize::from(table.commit(updates));
                }
                assert!(
                    landed > 30,
                    "seed {seed}: only {landed} of 60 commits applied"
                );
            }
        }
    }

    #[test]
    fn an_append_to_a_big_table_copies_every_old_snapshot() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut table = Table::new(FormatVersion::V2);
        table.append_to_main(300, &mut rng);
        let before = table.raw.clone();
        table.append_to_main(1, &mut rng);
        let snapshots =
            |raw: &[u8], layout: &Layout| raw[layout.field("snapshots").unwrap()].to_vec();
        let old = Layout::scan(&before).unwrap();
        let old_array = snapshots(&before, &old);
        let new_array = snapshots(&table.raw, &table.layout);
        assert_eq!(
            &new_array[..old_array.len() - 1],
            &old_array[..old_array.len() - 1],
            "the old snapshots are the base file's bytes"
        );
    }

    #[test]
    fn a_snapshot_removed_and_added_again_under_its_id_is_written_afresh() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut table = Table::new(FormatVersion::V2);
        table.append_to_main(3, &mut rng);
        let branch = table.append("side", &mut rng);
        assert!(table.commit(branch.clone()));
        let mut again = branch[0]["snapshot"].clone();
        let id = again["snapshot-id"].clone();
        again["manifest-list"] = json!("file:///w/ns/t/metadata/rewritten.avro");
        again["sequence-number"] = json!(table.metadata.next_sequence_number());
        assert!(table.commit(vec![
            json!({"action": "remove-snapshot-ref", "ref-name": "side"}),
            json!({"action": "remove-snapshots", "snapshot-ids": [id]}),
            json!({"action": "add-snapshot", "snapshot": again}),
            json!({"action": "set-snapshot-ref", "ref-name": "side", "type": "branch", "snapshot-id": id}),
        ]));
        let text = String::from_utf8(table.raw.clone()).unwrap();
        assert!(
            text.contains("rewritten.avro"),
            "the new snapshot's bytes are written"
        );
    }

    #[test]
    fn what_the_splice_cannot_follow_takes_the_full_path() {
        let mut table = Table::new(FormatVersion::V2);
        let upgrade: TableUpdate = serde_json::from_value(
            json!({"action": "upgrade-format-version", "format-version": 3}),
        )
        .unwrap();
        let built = upgrade
            .apply(table.metadata.clone().into_builder(None))
            .unwrap()
            .build()
            .unwrap();
        assert!(
            splice(
                &table.raw,
                &table.layout,
                &table.metadata,
                &built.metadata,
                &built.changes
            )
            .is_none()
        );
        let v1 = new_table(FormatVersion::V1);
        let raw = order::to_java_json(&v1, None).unwrap();
        assert!(splice(&raw, &Layout::default(), &v1, &v1, &[]).is_none());
        // A ref change the splice is not told of is caught by its check, never written.
        let mut rng = StdRng::seed_from_u64(1);
        table.append_to_main(1, &mut rng);
        let updates = table.append("main", &mut rng);
        let updates: Vec<TableUpdate> = updates
            .into_iter()
            .map(|u| serde_json::from_value(u).unwrap())
            .collect();
        let mut builder = table.metadata.clone().into_builder(None);
        for update in updates {
            builder = update.apply(builder).unwrap();
        }
        let built = builder.build().unwrap();
        assert!(
            splice(
                &table.raw,
                &table.layout,
                &table.metadata,
                &built.metadata,
                &[]
            )
            .is_none()
        );
    }
}
