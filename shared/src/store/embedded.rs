//! The embedded, persistent `MetaStore`: one redb file, one write transaction per batch.
//!
//! A process holds an exclusive lock file beside the database for its lifetime, so a second
//! server on the same data directory refuses to start instead of racing the first.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Item, Key, MetaStore, StoreError, Write, condition_holds, validate_batch};

const ITEMS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("items");

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
        let db = Database::create(&path).map_err(|e| OpenError::Database {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let init = || -> Result<(), redb::Error> {
            let txn = db.begin_write()?;
            txn.open_table(ITEMS)?;
            txn.commit()?;
            Ok(())
        };
        init().map_err(|e| OpenError::Database {
            path,
            reason: e.to_string(),
        })?;
        Ok(Self {
            db: Arc::new(db),
            _lock: Arc::new(lock),
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
    let (version, body) = raw.split_at(8);
    let version = u64::from_le_bytes(version.try_into().expect("8 bytes"));
    Ok(Item {
        key,
        version,
        body: body.to_vec(),
    })
}

fn encode(item: &Item) -> Vec<u8> {
    let mut raw = Vec::with_capacity(8 + item.body.len());
    raw.extend_from_slice(&item.version.to_le_bytes());
    raw.extend_from_slice(&item.body);
    raw
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

#[async_trait]
impl MetaStore for EmbeddedStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        let key = key.clone();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(unavailable)?;
            let table = txn.open_table(ITEMS).map_err(unavailable)?;
            let found = table
                .get((key.pk.as_str(), key.sk.as_str()))
                .map_err(unavailable)?;
            match found {
                Some(raw) => decode(key, raw.value()).map(Some),
                None => Ok(None),
            }
        })
        .await
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let (pk, sk_prefix) = (pk.to_owned(), sk_prefix.to_owned());
        let start_after = start_after.map(str::to_owned);
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(unavailable)?;
            let table = txn.open_table(ITEMS).map_err(unavailable)?;
            let start = match &start_after {
                Some(after) if after.as_str() >= sk_prefix.as_str() => after.as_str(),
                _ => sk_prefix.as_str(),
            };
            let mut out = Vec::new();
            for entry in table.range((pk.as_str(), start)..).map_err(unavailable)? {
                if out.len() >= limit {
                    break;
                }
                let (k, v) = entry.map_err(unavailable)?;
                let (item_pk, item_sk) = k.value();
                if item_pk != pk || !item_sk.starts_with(sk_prefix.as_str()) {
                    break;
                }
                if start_after.as_deref().is_some_and(|after| item_sk <= after) {
                    continue;
                }
                out.push(decode(Key::new(item_pk, item_sk), v.value())?);
            }
            Ok(out)
        })
        .await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        validate_batch(&writes)?;
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(unavailable)?;
            {
                let mut table = txn.open_table(ITEMS).map_err(unavailable)?;
                for (index, write) in writes.iter().enumerate() {
                    let key = write.key();
                    let current = table
                        .get((key.pk.as_str(), key.sk.as_str()))
                        .map_err(unavailable)?
                        .map(|raw| decode(key.clone(), raw.value()).map(|item| item.version))
                        .transpose()?;
                    if !condition_holds(write.condition(), current) {
                        // Dropping the transaction without commit discards every earlier write.
                        return Err(StoreError::ConditionFailed {
                            index,
                            key: key.clone(),
                        });
                    }
                }
                for write in &writes {
                    match write {
                        Write::Put { item, .. } => {
                            let raw = encode(item);
                            table
                                .insert(
                                    (item.key.pk.as_str(), item.key.sk.as_str()),
                                    raw.as_slice(),
                                )
                                .map_err(unavailable)?;
                        }
                        Write::Delete { key, .. } => {
                            table
                                .remove((key.pk.as_str(), key.sk.as_str()))
                                .map_err(unavailable)?;
                        }
                        Write::Check { .. } => {}
                    }
                }
            }
            // redb commits atomically, but a failed commit (an fsync error, say) may still have
            // reached the disk: the caller must treat it as an unknown outcome.
            txn.commit().map_err(|e| StoreError::Unknown(e.to_string()))
        })
        .await
    }
}
