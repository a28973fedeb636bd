//! The embedded, persistent `MetaStore`: one redb file, one write transaction per batch.
//!
//! A process holds an exclusive lock file beside the database for its lifetime, so a second
//! server on the same data directory refuses to start instead of racing the first.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use redb::{
    Database, ReadOnlyTable, ReadableDatabase, ReadableTable, TableDefinition, TableHandle,
};

use super::{Item, Key, MetaStore, StoreError, Token, Write, condition_holds, validate_batch};
use crate::clock::Clock;

const ITEMS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("items");
/// Write tokens of the items that carry one, beside (not inside) the item values so that stores
/// written before tokens existed read unchanged.
const TOKENS: TableDefinition<(&str, &str), u128> = TableDefinition::new("tokens");
/// The sparse index: (index pk, index sk, item pk, item sk).
const INDEX: TableDefinition<(&str, &str, &str, &str), ()> = TableDefinition::new("index");
/// Items that expire, by expiry (Unix seconds): what writes reap.
const EXPIRING: TableDefinition<(u64, &str, &str), ()> = TableDefinition::new("expiring");
/// Expired items one write batch deletes after its own writes, at most: reaping keeps up with
/// any write rate that creates expiring items, and never makes one write slow.
const REAP_PER_WRITE: usize = 16;
/// Set in a value's index length when an expiry follows it (values written before expiries
/// existed never have it: their index lengths are small).
const EXPIRY_FLAG: u32 = 1 << 31;

/// Creates the tables `db` lacks. A store that has them all opens without a write: each write
/// transaction is a disk sync, and every function's cold start opens the store.
fn ensure_tables(db: &Database) -> Result<(), redb::Error> {
    if has_every_table(db)? {
        return Ok(());
    }
    // The same tables `has_every_table` looks for.
    let txn = db.begin_write()?;
    txn.open_table(ITEMS)?;
    txn.open_table(INDEX)?;
    txn.open_table(TOKENS)?;
    txn.open_table(EXPIRING)?;
    txn.commit()?;
    Ok(())
}

/// Whether `db` has every table the store reads and writes.
fn has_every_table(db: &Database) -> Result<bool, redb::Error> {
    let names: Vec<String> = db
        .begin_read()?
        .list_tables()?
        .map(|table| table.name().to_owned())
        .collect();
    Ok([ITEMS.name(), TOKENS.name(), INDEX.name(), EXPIRING.name()]
        .iter()
        .all(|needed| names.iter().any(|name| name == needed)))
}

/// Why the embedded store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("data directory {0} is in use by another Floe process")]
    Locked(PathBuf),
    #[error("cannot open data directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open catalog database {path}: {reason}")]
    Database { path: PathBuf, reason: String },
}

/// redb-backed store; cheap to clone.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    _lock: Arc<File>,
    snapshots: Arc<Snapshots>,
}

/// The tables item reads use, opened in one read transaction.
struct Snapshot {
    items: ReadOnlyTable<(&'static str, &'static str), &'static [u8]>,
    tokens: ReadOnlyTable<(&'static str, &'static str), u128>,
}

/// The latest read snapshot, shared by reads until a write commits. This process is the
/// file's only writer (it holds the directory's lock) and every write goes through
/// [`EmbeddedStore::write`], which counts its commits: a snapshot opened after the last commit
/// sees everything a fresh read transaction would, and opening the transaction and its tables
/// was most of a warm read's cost.
#[derive(Default)]
struct Snapshots {
    /// Commits so far.
    commits: AtomicU64,
    /// A snapshot and the commit count it was opened at.
    latest: RwLock<Option<(u64, Arc<Snapshot>)>>,
}

impl Snapshots {
    /// A snapshot that sees every write committed before this call.
    fn current(&self, db: &Database) -> Result<Arc<Snapshot>, StoreError> {
        let commits = self.commits.load(Ordering::Acquire);
        if let Some((at, snapshot)) = &*self.latest.read().unwrap_or_else(|p| p.into_inner())
            && *at == commits
        {
            return Ok(snapshot.clone());
        }
        let txn = db.begin_read().map_err(unavailable)?;
        let snapshot = Arc::new(Snapshot {
            items: txn.open_table(ITEMS).map_err(unavailable)?,
            tokens: txn.open_table(TOKENS).map_err(unavailable)?,
        });
        let mut latest = self.latest.write().unwrap_or_else(|p| p.into_inner());
        // Kept only if no write committed meanwhile (it would be stale for later reads).
        if self.commits.load(Ordering::Acquire) == commits {
            *latest = Some((commits, snapshot.clone()));
        }
        Ok(snapshot)
    }

    /// A write committed (or may have): later reads open a new snapshot, and the old one stops
    /// pinning the pages the write freed.
    fn committed(&self) {
        self.commits.fetch_add(1, Ordering::AcqRel);
        *self.latest.write().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

impl EmbeddedStore {
    /// Opens (creating if needed) the store in `dir`, taking the directory's lock.
    pub fn open(dir: &Path) -> Result<Self, OpenError> {
        let io = |source| OpenError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let lock_path = dir.join("floe.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(OpenError::Locked(dir.into())),
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        let path = dir.join("catalog.redb");
        let warned = std::sync::atomic::AtomicBool::new(false);
        let db = Database::builder()
            .set_repair_callback(move |_| {
                if !warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the catalog file was not closed cleanly (its process was killed?): \
                         repairing it before the first request"
                    );
                }
            })
            .create(&path)
            .map_err(|e| OpenError::Database {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        ensure_tables(&db).map_err(|e| OpenError::Database {
            path,
            reason: e.to_string(),
        })?;
        Ok(Self {
            db: Arc::new(db),
            _lock: Arc::new(lock),
            snapshots: Arc::default(),
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError::Unavailable(format!("store task failed: {e}")))?
    }
}

fn decode(key: Key, raw: &[u8]) -> Result<Item, StoreError> {
    if raw.len() < 8 {
        return Err(StoreError::Corrupt {
            key,
            reason: "value shorter than its header".into(),
        });
    }
    let corrupt = |reason: &str| StoreError::Corrupt {
        key: key.clone(),
        reason: reason.into(),
    };
    let (version, rest) = raw.split_at(8);
    let version = u64::from_le_bytes(version.try_into().expect("8 bytes"));
    if rest.len() < 4 {
        return Err(corrupt("value shorter than its header"));
    }
    let (index_len, rest) = rest.split_at(4);
    let index_len = u32::from_le_bytes(index_len.try_into().expect("4 bytes"));
    let (expires_at, rest) = if index_len & EXPIRY_FLAG != 0 {
        if rest.len() < 8 {
            return Err(corrupt("value shorter than its expiry"));
        }
        let (expiry, rest) = rest.split_at(8);
        (
            Some(u64::from_le_bytes(expiry.try_into().expect("8 bytes"))),
            rest,
        )
    } else {
        (None, rest)
    };
    let index_len = (index_len & !EXPIRY_FLAG) as usize;
    if rest.len() < index_len {
        return Err(corrupt("index longer than the value"));
    }
    let (index, body) = rest.split_at(index_len);
    let index = if index.is_empty() {
        None
    } else {
        let (pk, sk): (String, String) =
            serde_json::from_slice(index).map_err(|_| corrupt("malformed index key"))?;
        Some(Key::new(pk, sk))
    };
    Ok(Item {
        key,
        version,
        token: None,
        body: body.to_vec(),
        index,
        expires_at,
    })
}

/// Layout: version (8 bytes), index length (4 bytes, [`EXPIRY_FLAG`] set when an expiry
/// follows), the expiry (8 bytes, only when flagged), index key as JSON, body.
fn encode(item: &Item) -> Vec<u8> {
    let index = item
        .index
        .as_ref()
        .map(|k| serde_json::to_vec(&(&k.pk, &k.sk)).expect("index key serializes"))
        .unwrap_or_default();
    let mut raw = Vec::with_capacity(20 + index.len() + item.body.len());
    raw.extend_from_slice(&item.version.to_le_bytes());
    let flag = if item.expires_at.is_some() {
        EXPIRY_FLAG
    } else {
        0
    };
    raw.extend_from_slice(&(index.len() as u32 | flag).to_le_bytes());
    if let Some(expires_at) = item.expires_at {
        raw.extend_from_slice(&expires_at.to_le_bytes());
    }
    raw.extend_from_slice(&index);
    raw.extend_from_slice(&item.body);
    raw
}

/// An item and its write token, which lives in a table of its own.
fn read_item(
    tokens: &impl ReadableTable<(&'static str, &'static str), u128>,
    key: Key,
    raw: &[u8],
) -> Result<Item, StoreError> {
    let mut item = decode(key, raw)?;
    item.token = token_of(tokens, &item.key)?;
    Ok(item)
}

fn token_of(
    tokens: &impl ReadableTable<(&'static str, &'static str), u128>,
    key: &Key,
) -> Result<Option<Token>, StoreError> {
    Ok(tokens
        .get((key.pk.as_str(), key.sk.as_str()))
        .map_err(unavailable)?
        .map(|t| Token(t.value())))
}

/// Deletes up to [`REAP_PER_WRITE`] items whose expiry has passed, with their index entries
/// and tokens, inside the caller's write transaction.
fn reap_expired(
    items: &mut redb::Table<(&'static str, &'static str), &'static [u8]>,
    index: &mut redb::Table<(&'static str, &'static str, &'static str, &'static str), ()>,
    tokens: &mut redb::Table<(&'static str, &'static str), u128>,
    expiring: &mut redb::Table<(u64, &'static str, &'static str), ()>,
) -> Result<(), StoreError> {
    let now = crate::clock::SystemClock.now_ms() / 1000;
    let mut expired = Vec::new();
    for entry in expiring.range(..(now, "", "")).map_err(unavailable)? {
        if expired.len() >= REAP_PER_WRITE {
            break;
        }
        let (k, _) = entry.map_err(unavailable)?;
        let (expiry, pk, sk) = k.value();
        expired.push((expiry, Key::new(pk, sk)));
    }
    for (expiry, key) in expired {
        let old_index = items
            .get((key.pk.as_str(), key.sk.as_str()))
            .map_err(unavailable)?
            .map(|raw| decode(key.clone(), raw.value()))
            .transpose()?
            .and_then(|item| item.index);
        remove_row(items, tokens, &key)?;
        unlink(index, expiring, &key, old_index.as_ref(), Some(expiry))?;
    }
    Ok(())
}

/// Removes an item's entries in the index and the expiry queue (before it is rewritten or
/// deleted).
fn unlink(
    index: &mut redb::Table<(&'static str, &'static str, &'static str, &'static str), ()>,
    expiring: &mut redb::Table<(u64, &'static str, &'static str), ()>,
    key: &Key,
    old_index: Option<&Key>,
    old_expiry: Option<u64>,
) -> Result<(), StoreError> {
    if let Some(expiry) = old_expiry {
        expiring
            .remove((expiry, key.pk.as_str(), key.sk.as_str()))
            .map_err(unavailable)?;
    }
    if let Some(old) = old_index {
        index
            .remove((
                old.pk.as_str(),
                old.sk.as_str(),
                key.pk.as_str(),
                key.sk.as_str(),
            ))
            .map_err(unavailable)?;
    }
    Ok(())
}

/// Removes an item and its write token.
fn remove_row(
    items: &mut redb::Table<(&'static str, &'static str), &'static [u8]>,
    tokens: &mut redb::Table<(&'static str, &'static str), u128>,
    key: &Key,
) -> Result<(), StoreError> {
    items
        .remove((key.pk.as_str(), key.sk.as_str()))
        .map_err(unavailable)?;
    tokens
        .remove((key.pk.as_str(), key.sk.as_str()))
        .map_err(unavailable)?;
    Ok(())
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

#[async_trait]
impl MetaStore for EmbeddedStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        // Inline, not on the blocking pool: a read is a few page lookups in a memory-mapped
        // file, far cheaper than the two thread hand-offs a blocking task costs (the warm
        // loadTable's only store request). Writes, which sync to disk, stay on the pool.
        let snapshot = self.snapshots.current(&self.db)?;
        let found = snapshot
            .items
            .get((key.pk.as_str(), key.sk.as_str()))
            .map_err(unavailable)?;
        match found {
            Some(raw) => read_item(&snapshot.tokens, key.clone(), raw.value()).map(Some),
            None => Ok(None),
        }
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let snapshot = self.snapshots.current(&self.db)?;
        let start = match start_after {
            Some(after) if after >= sk_prefix => after,
            _ => sk_prefix,
        };
        let mut out = Vec::new();
        for entry in snapshot.items.range((pk, start)..).map_err(unavailable)? {
            if out.len() >= limit {
                break;
            }
            let (k, v) = entry.map_err(unavailable)?;
            let (item_pk, item_sk) = k.value();
            if item_pk != pk || !item_sk.starts_with(sk_prefix) {
                break;
            }
            if start_after.is_some_and(|after| item_sk <= after) {
                continue;
            }
            out.push(read_item(
                &snapshot.tokens,
                Key::new(item_pk, item_sk),
                v.value(),
            )?);
        }
        Ok(out)
    }

    async fn query_index(
        &self,
        index_pk: &str,
        upto_sk: &str,
        limit: usize,
    ) -> Result<Vec<Key>, StoreError> {
        let (index_pk, upto_sk) = (index_pk.to_owned(), upto_sk.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(unavailable)?;
            let table = txn.open_table(INDEX).map_err(unavailable)?;
            let mut out = Vec::new();
            for entry in table
                .range((index_pk.as_str(), "", "", "")..)
                .map_err(unavailable)?
            {
                let (k, _) = entry.map_err(unavailable)?;
                let (ipk, isk, pk, sk) = k.value();
                if ipk != index_pk || isk > upto_sk.as_str() || out.len() >= limit {
                    break;
                }
                out.push(Key::new(pk, sk));
            }
            Ok(out)
        })
        .await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        validate_batch(&writes)?;
        let snapshots = self.snapshots.clone();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(unavailable)?;
            {
                let mut table = txn.open_table(ITEMS).map_err(unavailable)?;
                let mut index_table = txn.open_table(INDEX).map_err(unavailable)?;
                let mut tokens = txn.open_table(TOKENS).map_err(unavailable)?;
                let mut expiring = txn.open_table(EXPIRING).map_err(unavailable)?;
                let mut previous = Vec::with_capacity(writes.len());
                for (index, write) in writes.iter().enumerate() {
                    let key = write.key();
                    let current = table
                        .get((key.pk.as_str(), key.sk.as_str()))
                        .map_err(unavailable)?
                        .map(|raw| read_item(&tokens, key.clone(), raw.value()))
                        .transpose()?;
                    let state = current.as_ref().map(|item| (item.version, item.token));
                    if !condition_holds(write.condition(), state) {
                        // Dropping the transaction without commit discards every earlier write.
                        return Err(StoreError::ConditionFailed {
                            index,
                            key: key.clone(),
                        });
                    }
                    previous.push(current.map(|item| (item.index, item.expires_at)));
                }
                for (write, old) in writes.iter().zip(previous) {
                    let key = write.key();
                    if matches!(write, Write::Check { .. }) {
                        continue;
                    }
                    let (old_index, old_expiry) = old.unwrap_or_default();
                    unlink(
                        &mut index_table,
                        &mut expiring,
                        key,
                        old_index.as_ref(),
                        old_expiry,
                    )?;
                    match write {
                        Write::Put { item, .. } => {
                            let token_key = (item.key.pk.as_str(), item.key.sk.as_str());
                            match item.token {
                                Some(Token(t)) => tokens.insert(token_key, t).map(drop),
                                None => tokens.remove(token_key).map(drop),
                            }
                            .map_err(unavailable)?;
                            let raw = encode(item);
                            table
                                .insert(
                                    (item.key.pk.as_str(), item.key.sk.as_str()),
                                    raw.as_slice(),
                                )
                                .map_err(unavailable)?;
                            if let Some(expiry) = item.expires_at {
                                expiring
                                    .insert((expiry, key.pk.as_str(), key.sk.as_str()), ())
                                    .map_err(unavailable)?;
                            }
                            if let Some(new) = &item.index {
                                index_table
                                    .insert(
                                        (
                                            new.pk.as_str(),
                                            new.sk.as_str(),
                                            key.pk.as_str(),
                                            key.sk.as_str(),
                                        ),
                                        (),
                                    )
                                    .map_err(unavailable)?;
                            }
                        }
                        Write::Delete { key, .. } => remove_row(&mut table, &mut tokens, key)?,
                        Write::Check { .. } => {}
                    }
                }
                reap_expired(&mut table, &mut index_table, &mut tokens, &mut expiring)?;
            }
            // redb commits atomically, but a failed commit (an fsync error, say) may still have
            // reached the disk: the caller must treat it as an unknown outcome.
            let committed = txn.commit().map_err(|e| StoreError::Unknown(e.to_string()));
            snapshots.committed();
            committed
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Condition;

    #[test]
    fn a_store_missing_tables_gets_them_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        {
            // A store file with only the items table (as a store might be left before a table
            // was added).
            let db = Database::create(dir.path().join("catalog.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(ITEMS).unwrap();
            txn.commit().unwrap();
            assert!(!has_every_table(&db).unwrap());
        }
        let store = EmbeddedStore::open(dir.path()).unwrap();
        assert!(has_every_table(&store.db).unwrap());
        drop(store);
        let reopened = EmbeddedStore::open(dir.path()).unwrap();
        assert!(has_every_table(&reopened.db).unwrap());
    }

    fn put(key: &Key, body: &str, token: Option<Token>) -> Write {
        Write::Put {
            item: Item {
                key: key.clone(),
                version: 1,
                token,
                body: body.as_bytes().to_vec(),
                index: None,
                expires_at: None,
            },
            condition: Condition::Always,
        }
    }

    #[tokio::test]
    async fn reads_share_a_snapshot_until_a_write_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let key = Key::new("p", "s");
        store.write(vec![put(&key, "one", None)]).await.unwrap();
        let opened = store.snapshots.current(&store.db).unwrap();
        assert!(Arc::ptr_eq(
            &opened,
            &store.snapshots.current(&store.db).unwrap()
        ));

        // A snapshot opened before a write is never handed to a read after it.
        store
            .write(vec![put(&key, "two", Some(Token(7)))])
            .await
            .unwrap();
        let read = store.get(&key).await.unwrap().unwrap();
        assert_eq!(
            (read.body.as_slice(), read.token),
            (&b"two"[..], Some(Token(7)))
        );
        let listed = store.query("p", "", None, 10).await.unwrap();
        assert_eq!(listed[0].body, b"two");
        assert!(!Arc::ptr_eq(
            &opened,
            &store.snapshots.current(&store.db).unwrap()
        ));
        // The old snapshot still reads what it was opened on.
        let old = opened.items.get(("p", "s")).unwrap().unwrap();
        assert!(old.value().ends_with(b"one"));

        // A write whose condition fails commits nothing and keeps the snapshot.
        let kept = store.snapshots.current(&store.db).unwrap();
        let refused = Write::Put {
            item: Item {
                key: key.clone(),
                version: 2,
                token: None,
                body: b"three".to_vec(),
                index: None,
                expires_at: None,
            },
            condition: Condition::NotExists,
        };
        assert!(store.write(vec![refused]).await.is_err());
        assert!(Arc::ptr_eq(
            &kept,
            &store.snapshots.current(&store.db).unwrap()
        ));
        store
            .write(vec![Write::Delete {
                key: key.clone(),
                condition: Condition::Always,
            }])
            .await
            .unwrap();
        assert_eq!(store.get(&key).await.unwrap(), None);
    }
}
