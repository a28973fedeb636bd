//! A `MetaStore` wrapper that tells an observer what each request uses, then forwards it
//! unchanged: `floe-bench` counts store requests per operation with it, and the IAM test
//! attributes every use to the function that made it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::{Item, Key, MetaStore, StoreError, StoreUse, Write};

/// Called once per store request with its uses: one for a read, one per item of a write batch.
pub type Observer = Arc<dyn Fn(&[StoreUse]) + Send + Sync>;

/// Called with each write batch as it is sent: for observers that need its keys, not only its
/// uses.
pub type BatchObserver = Arc<dyn Fn(&[Write]) + Send + Sync>;

pub struct ObservedStore {
    inner: Arc<dyn MetaStore>,
    observer: Observer,
    batches: Option<BatchObserver>,
}

impl ObservedStore {
    pub fn new(inner: Arc<dyn MetaStore>, observer: Observer) -> Self {
        Self {
            inner,
            observer,
            batches: None,
        }
    }

    /// Only the write batches observed, each as it is sent.
    pub fn batches(inner: Arc<dyn MetaStore>, batches: BatchObserver) -> Self {
        Self {
            inner,
            observer: Arc::new(|_| {}),
            batches: Some(batches),
        }
    }
}

#[async_trait]
impl MetaStore for ObservedStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        (self.observer)(&[StoreUse::Get]);
        self.inner.get(key).await
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        (self.observer)(&[StoreUse::Query]);
        self.inner.query(pk, sk_prefix, start_after, limit).await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        let uses: Vec<StoreUse> = writes.iter().map(StoreUse::of_write).collect();
        (self.observer)(&uses);
        if let Some(batches) = &self.batches {
            batches(&writes);
        }
        self.inner.write(writes).await
    }

    async fn query_index(
        &self,
        index_pk: &str,
        upto_sk: &str,
        limit: usize,
    ) -> Result<Vec<Key>, StoreError> {
        (self.observer)(&[StoreUse::QueryIndex]);
        self.inner.query_index(index_pk, upto_sk, limit).await
    }
}

/// Store requests made so far, by kind.
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

/// Counts store requests; `observer` plugs it into an `ObservedStore`.
#[derive(Default)]
pub struct StoreCounter {
    gets: AtomicU64,
    queries: AtomicU64,
    index_queries: AtomicU64,
    writes: AtomicU64,
    items_written: AtomicU64,
}

impl StoreCounter {
    pub fn observer(self: &Arc<Self>) -> Observer {
        let counter = self.clone();
        Arc::new(move |uses: &[StoreUse]| {
            let add = |n: &AtomicU64, by: u64| n.fetch_add(by, Ordering::Relaxed);
            match uses {
                [StoreUse::Get] => add(&counter.gets, 1),
                [StoreUse::Query] => add(&counter.queries, 1),
                [StoreUse::QueryIndex] => add(&counter.index_queries, 1),
                items => {
                    add(&counter.items_written, items.len() as u64);
                    add(&counter.writes, 1)
                }
            };
        })
    }

    pub fn counts(&self) -> StoreCounts {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        StoreCounts {
            gets: get(&self.gets),
            queries: get(&self.queries),
            index_queries: get(&self.index_queries),
            writes: get(&self.writes),
            items_written: get(&self.items_written),
        }
    }
}
