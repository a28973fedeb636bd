//! A `MetaStore` wrapper that counts the requests reaching the store, so `floe bench` can report
//! what each operation costs in store reads and writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::{Item, Key, MetaStore, StoreError, Write};

/// Requests made so far, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StoreCounts {
    pub gets: u64,
    pub queries: u64,
    pub index_queries: u64,
    /// Write requests (each one atomic batch).
    pub writes: u64,
    /// Items written, over all batches.
    pub items_written: u64,
}

impl StoreCounts {
    pub fn reads(&self) -> u64 {
        self.gets + self.queries + self.index_queries
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &StoreCounts) -> StoreCounts {
        StoreCounts {
            gets: self.gets - earlier.gets,
            queries: self.queries - earlier.queries,
            index_queries: self.index_queries - earlier.index_queries,
            writes: self.writes - earlier.writes,
            items_written: self.items_written - earlier.items_written,
        }
    }
}

/// Counts every request and forwards it unchanged.
pub struct CountingStore {
    inner: Arc<dyn MetaStore>,
    gets: AtomicU64,
    queries: AtomicU64,
    index_queries: AtomicU64,
    writes: AtomicU64,
    items_written: AtomicU64,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn MetaStore>) -> Self {
        Self {
            inner,
            gets: AtomicU64::new(0),
            queries: AtomicU64::new(0),
            index_queries: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            items_written: AtomicU64::new(0),
        }
    }

    pub fn counts(&self) -> StoreCounts {
        StoreCounts {
            gets: self.gets.load(Ordering::Relaxed),
            queries: self.queries.load(Ordering::Relaxed),
            index_queries: self.index_queries.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            items_written: self.items_written.load(Ordering::Relaxed),
        }
    }
}

#[async_trait]
impl MetaStore for CountingStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key).await
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        self.queries.fetch_add(1, Ordering::Relaxed);
        self.inner.query(pk, sk_prefix, start_after, limit).await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.items_written
            .fetch_add(writes.len() as u64, Ordering::Relaxed);
        self.inner.write(writes).await
    }

    async fn query_index(
        &self,
        index_pk: &str,
        upto_sk: &str,
        limit: usize,
    ) -> Result<Vec<Key>, StoreError> {
        self.index_queries.fetch_add(1, Ordering::Relaxed);
        self.inner.query_index(index_pk, upto_sk, limit).await
    }
}
