//! A table's maintenance policy (see `tables::maintenance`): Java's table properties where Java has one, Floe's own keys
//! for the rest. A table's property wins; the same key set on its namespace is the default for
//! the namespace's tables; Java's defaults come last.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// Snapshots older than this are expired (unless they are among the newest kept).
pub const MAX_SNAPSHOT_AGE_MS: &str = "history.expire.max-snapshot-age-ms";
/// Ancestors of each branch always kept, however old.
pub const MIN_SNAPSHOTS_TO_KEEP: &str = "history.expire.min-snapshots-to-keep";
/// Branches and tags (never `main`) whose snapshot is older than this are removed.
pub const MAX_REF_AGE_MS: &str = "history.expire.max-ref-age-ms";
/// How many earlier metadata files the metadata log keeps (applied by every commit).
pub const PREVIOUS_VERSIONS_MAX: &str = "write.metadata.previous-versions-max";
/// Whether metadata files that left the metadata log are deleted.
pub const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";
/// Java's switch for every file deletion of a table: `false` stops expiry and deletion.
pub const GC_ENABLED: &str = "gc.enabled";
/// Floe: whether the scheduled maintenance run handles the table at all.
pub const MAINTENANCE_ENABLED: &str = "floe.maintenance.enabled";
/// Floe: files under the table's directory that nothing ever referenced are removed once
/// older than this; `0` turns that removal off.
pub const UNREFERENCED_FILE_AGE_MS: &str = "floe.maintenance.unreferenced-file-age-ms";

/// Floe: whether maintenance bin-packs the table's small data files (off unless set).
pub const COMPACTION_ENABLED: &str = "floe.compaction.enabled";
/// Java's target size of the data files a write produces; compaction packs files towards it
/// and takes files under three quarters of it, as Java's bin-pack does.
pub const TARGET_FILE_SIZE_BYTES: &str = "write.target-file-size-bytes";
/// Floe: the fewest small files of one partition worth a rewrite.
pub const COMPACTION_MIN_INPUT_FILES: &str = "floe.compaction.min-input-files";
/// Floe: files younger than this are left to their writer (a streaming sink is not fought).
pub const COMPACTION_MIN_FILE_AGE_MS: &str = "floe.compaction.min-file-age-ms";
/// Floe: the most input bytes one run rewrites; the rest waits for the next run.
pub const COMPACTION_MAX_BYTES_PER_RUN: &str = "floe.compaction.max-bytes-per-run";

/// Every key of the policy, in the order reports show them.
pub const KEYS: [&str; 13] = [
    MAINTENANCE_ENABLED,
    GC_ENABLED,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    MAX_REF_AGE_MS,
    PREVIOUS_VERSIONS_MAX,
    DELETE_AFTER_COMMIT,
    UNREFERENCED_FILE_AGE_MS,
    COMPACTION_ENABLED,
    TARGET_FILE_SIZE_BYTES,
    COMPACTION_MIN_INPUT_FILES,
    COMPACTION_MIN_FILE_AGE_MS,
    COMPACTION_MAX_BYTES_PER_RUN,
];

/// The threshold Floe recommends for unreferenced-file removal, Java's `DeleteOrphanFiles`
/// default: longer than any write job runs, so that no file of a write in flight is taken.
pub const RECOMMENDED_UNREFERENCED_FILE_AGE_MS: u64 = 3 * 24 * 60 * 60 * 1000;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The resolved policy of one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Policy {
    pub enabled: bool,
    pub gc_enabled: bool,
    pub max_snapshot_age_ms: i64,
    pub min_snapshots_to_keep: usize,
    pub max_ref_age_ms: i64,
    pub previous_versions_max: usize,
    pub delete_after_commit: bool,
    /// `None`: unreferenced-file removal is off.
    pub unreferenced_file_age_ms: Option<u64>,
    pub compaction: Compaction,
}

/// How a table's small files are bin-packed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Compaction {
    pub enabled: bool,
    pub target_file_size_bytes: u64,
    pub min_input_files: usize,
    pub min_file_age_ms: u64,
    pub max_bytes_per_run: u64,
}

impl Default for Compaction {
    fn default() -> Self {
        Self {
            enabled: false,
            // Java's `write.target-file-size-bytes` default.
            target_file_size_bytes: 512 * 1024 * 1024,
            min_input_files: 5,
            // Three hours: past any micro-batch's retries (what Altinity's `ice` uses).
            min_file_age_ms: 3 * 60 * 60 * 1000,
            // What one worker invocation rewrites within Lambda's 15 minutes at a few
            // tens of MB/s, with room to spare.
            max_bytes_per_run: 4 * 1024 * 1024 * 1024,
        }
    }
}

impl Compaction {
    /// Files under this size are compaction's input (Java's `min-file-size-bytes` default,
    /// 75% of the target).
    pub fn small_file_bytes(&self) -> u64 {
        self.target_file_size_bytes / 4 * 3
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            enabled: true,
            gc_enabled: true,
            max_snapshot_age_ms: 5 * DAY_MS,
            min_snapshots_to_keep: 1,
            max_ref_age_ms: i64::MAX,
            previous_versions_max: 100,
            delete_after_commit: false,
            unreferenced_file_age_ms: None,
            compaction: Compaction::default(),
        }
    }
}

/// Where a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    Table,
    Namespace,
    Default,
}

/// A policy value that cannot be read: the key, what it holds, what it should hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid maintenance setting {key}={value:?}: expected {expected}")]
pub struct InvalidSetting {
    pub key: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl Policy {
    /// The policy of a table with `table` properties in a namespace with `namespace` ones.
    pub fn resolve(
        table: &HashMap<String, String>,
        namespace: &BTreeMap<String, String>,
    ) -> Result<Policy, InvalidSetting> {
        let look = |key: &'static str| lookup(key, table, namespace).map(|(v, _)| (key, v));
        let defaults = Policy::default();
        Ok(Policy {
            enabled: look(MAINTENANCE_ENABLED).map_or(Ok(defaults.enabled), boolean)?,
            gc_enabled: look(GC_ENABLED).map_or(Ok(defaults.gc_enabled), boolean)?,
            max_snapshot_age_ms: look(MAX_SNAPSHOT_AGE_MS)
                .map_or(Ok(defaults.max_snapshot_age_ms), positive_ms)?,
            min_snapshots_to_keep: look(MIN_SNAPSHOTS_TO_KEEP)
                .map_or(Ok(defaults.min_snapshots_to_keep), at_least_one)?,
            max_ref_age_ms: look(MAX_REF_AGE_MS)
                .map_or(Ok(defaults.max_ref_age_ms), positive_ms)?,
            previous_versions_max: look(PREVIOUS_VERSIONS_MAX)
                .map_or(Ok(defaults.previous_versions_max), at_least_one)?,
            delete_after_commit: look(DELETE_AFTER_COMMIT)
                .map_or(Ok(defaults.delete_after_commit), boolean)?,
            // Off unless the table carries it: a namespace's value reaches the tables created
            // after it was set (see `stamp_new_table`), never the ones already there.
            unreferenced_file_age_ms: table
                .get(UNREFERENCED_FILE_AGE_MS)
                .map(|v| unreferenced_age((UNREFERENCED_FILE_AGE_MS, v)))
                .transpose()?
                .flatten(),
            compaction: Compaction {
                enabled: look(COMPACTION_ENABLED)
                    .map_or(Ok(defaults.compaction.enabled), boolean)?,
                target_file_size_bytes: look(TARGET_FILE_SIZE_BYTES)
                    .map_or(Ok(defaults.compaction.target_file_size_bytes), file_size)?,
                min_input_files: look(COMPACTION_MIN_INPUT_FILES)
                    .map_or(Ok(defaults.compaction.min_input_files), at_least_two)?,
                min_file_age_ms: look(COMPACTION_MIN_FILE_AGE_MS)
                    .map_or(Ok(defaults.compaction.min_file_age_ms), whole_ms)?,
                max_bytes_per_run: look(COMPACTION_MAX_BYTES_PER_RUN)
                    .map_or(Ok(defaults.compaction.max_bytes_per_run), file_size)?,
            },
        })
    }

    /// Each key with the value in force and where it came from.
    pub fn explain(
        table: &HashMap<String, String>,
        namespace: &BTreeMap<String, String>,
    ) -> Vec<(&'static str, Option<String>, Source)> {
        KEYS.iter()
            .map(|&key| {
                let found = if key == UNREFERENCED_FILE_AGE_MS {
                    table.get(key).map(|v| (v, Source::Table))
                } else {
                    lookup(key, table, namespace)
                };
                match found {
                    Some((value, source)) => (key, Some(value.clone()), source),
                    None => (key, None, Source::Default),
                }
            })
            .collect()
    }
}

/// Checks the maintenance keys among `properties` (a table's or a namespace's), so that a bad
/// value is refused where it is set rather than found by the next run.
pub fn check(properties: impl IntoIterator<Item = (String, String)>) -> Result<(), InvalidSetting> {
    let (table, namespace): (HashMap<String, String>, BTreeMap<String, String>) = (
        properties
            .into_iter()
            .filter(|(k, _)| KEYS.contains(&k.as_str()))
            .collect(),
        BTreeMap::new(),
    );
    Policy::resolve(&table, &namespace).map(|_| ())
}

/// The properties a new table takes from its namespace at creation: unreferenced-file removal
/// when the namespace turns it on (the table's own value wins).
pub fn stamp_new_table(table: &mut HashMap<String, String>, namespace: &BTreeMap<String, String>) {
    if let Some(value) = namespace.get(UNREFERENCED_FILE_AGE_MS) {
        table
            .entry(UNREFERENCED_FILE_AGE_MS.to_owned())
            .or_insert_with(|| value.clone());
    }
}

fn lookup<'a>(
    key: &str,
    table: &'a HashMap<String, String>,
    namespace: &'a BTreeMap<String, String>,
) -> Option<(&'a String, Source)> {
    table
        .get(key)
        .map(|v| (v, Source::Table))
        .or_else(|| namespace.get(key).map(|v| (v, Source::Namespace)))
}

fn invalid(key: &'static str, value: &str, expected: &'static str) -> InvalidSetting {
    InvalidSetting {
        key,
        value: value.to_owned(),
        expected,
    }
}

fn boolean((key, value): (&'static str, &String)) -> Result<bool, InvalidSetting> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "true or false")),
    }
}

fn positive_ms((key, value): (&'static str, &String)) -> Result<i64, InvalidSetting> {
    match value.trim().parse::<i64>() {
        Ok(ms) if ms > 0 => Ok(ms),
        _ => Err(invalid(key, value, "a positive number of milliseconds")),
    }
}

fn at_least_one((key, value): (&'static str, &String)) -> Result<usize, InvalidSetting> {
    match value.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(invalid(key, value, "a whole number of at least 1")),
    }
}

fn at_least_two((key, value): (&'static str, &String)) -> Result<usize, InvalidSetting> {
    match value.trim().parse::<usize>() {
        Ok(n) if n >= 2 => Ok(n),
        _ => Err(invalid(key, value, "a whole number of at least 2")),
    }
}

fn whole_ms((key, value): (&'static str, &String)) -> Result<u64, InvalidSetting> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| invalid(key, value, "a number of milliseconds"))
}

/// A size in bytes: at least 1 MiB, so that a typo cannot make every file "small".
fn file_size((key, value): (&'static str, &String)) -> Result<u64, InvalidSetting> {
    match value.trim().parse::<u64>() {
        Ok(n) if n >= 1024 * 1024 => Ok(n),
        _ => Err(invalid(key, value, "a number of bytes of at least 1048576")),
    }
}

fn unreferenced_age((key, value): (&'static str, &String)) -> Result<Option<u64>, InvalidSetting> {
    match value.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(ms)),
        Err(_) => Err(invalid(
            key,
            value,
            "a number of milliseconds (0 turns the removal off)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn java_defaults_apply_when_nothing_is_set() {
        let policy = Policy::resolve(&HashMap::new(), &BTreeMap::new()).unwrap();
        assert_eq!(policy, Policy::default());
        assert_eq!(policy.max_snapshot_age_ms, 432_000_000);
        assert_eq!(policy.unreferenced_file_age_ms, None);
    }

    #[test]
    fn the_table_wins_over_its_namespace() {
        let namespace: BTreeMap<_, _> =
            props(&[(MAX_SNAPSHOT_AGE_MS, "1000"), (MIN_SNAPSHOTS_TO_KEEP, "3")])
                .into_iter()
                .collect();
        let table = props(&[(MAX_SNAPSHOT_AGE_MS, "2000")]);
        let policy = Policy::resolve(&table, &namespace).unwrap();
        assert_eq!(policy.max_snapshot_age_ms, 2000);
        assert_eq!(policy.min_snapshots_to_keep, 3);
        let explained = Policy::explain(&table, &namespace);
        assert!(explained.contains(&(MAX_SNAPSHOT_AGE_MS, Some("2000".into()), Source::Table)));
        assert!(explained.contains(&(MIN_SNAPSHOTS_TO_KEEP, Some("3".into()), Source::Namespace)));
        assert!(explained.contains(&(MAX_REF_AGE_MS, None, Source::Default)));
    }

    #[test]
    fn unreferenced_file_removal_reaches_only_new_tables() {
        let namespace: BTreeMap<_, _> = props(&[(UNREFERENCED_FILE_AGE_MS, "5000")])
            .into_iter()
            .collect();
        let existing = Policy::resolve(&HashMap::new(), &namespace).unwrap();
        assert_eq!(existing.unreferenced_file_age_ms, None);
        let mut created = HashMap::new();
        stamp_new_table(&mut created, &namespace);
        let new = Policy::resolve(&created, &namespace).unwrap();
        assert_eq!(new.unreferenced_file_age_ms, Some(5000));
        let mut own = props(&[(UNREFERENCED_FILE_AGE_MS, "0")]);
        stamp_new_table(&mut own, &namespace);
        assert_eq!(
            Policy::resolve(&own, &namespace)
                .unwrap()
                .unreferenced_file_age_ms,
            None
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        for (key, value) in [
            (MAX_SNAPSHOT_AGE_MS, "-1"),
            (MAX_SNAPSHOT_AGE_MS, "soon"),
            (MIN_SNAPSHOTS_TO_KEEP, "0"),
            (DELETE_AFTER_COMMIT, "yes"),
            (UNREFERENCED_FILE_AGE_MS, "3d"),
        ] {
            let err = check([(key.to_owned(), value.to_owned())]).unwrap_err();
            assert_eq!(err.key, key);
        }
        check([("unrelated".to_owned(), "x".to_owned())]).unwrap();
    }
}
