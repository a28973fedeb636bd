//! An `ObjectStores` wrapper that counts each request of table storage by kind, then forwards
//! it unchanged: `floe-bench` reports object round trips per operation with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use super::{ObjectError, ObjectMeta, ObjectStore, ObjectStores, ObjectStoresError};
use crate::model::BucketRow;

/// Object requests made so far, by kind (S3 bills GETs apart from PUTs and LISTs).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ObjectCounts {
    pub gets: u64,
    pub puts: u64,
    pub lists: u64,
    /// Delete requests (each of up to a batch of objects).
    pub deletes: u64,
}

impl ObjectCounts {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &ObjectCounts) -> ObjectCounts {
        ObjectCounts {
            gets: self.gets - earlier.gets,
            puts: self.puts - earlier.puts,
            lists: self.lists - earlier.lists,
            deletes: self.deletes - earlier.deletes,
        }
    }
}

/// Counts object requests of every store it hands out.
#[derive(Default)]
pub struct ObjectCounter {
    gets: AtomicU64,
    puts: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
}

impl ObjectCounter {
    pub fn counts(&self) -> ObjectCounts {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        ObjectCounts {
            gets: get(&self.gets),
            puts: get(&self.puts),
            lists: get(&self.lists),
            deletes: get(&self.deletes),
        }
    }

    fn add(n: &AtomicU64) {
        n.fetch_add(1, Ordering::Relaxed);
    }
}

/// `ObjectStores` whose stores count their requests in `counter`.
pub struct ObservedObjects {
    pub inner: Arc<dyn ObjectStores>,
    pub counter: Arc<ObjectCounter>,
}

#[async_trait]
impl ObjectStores for ObservedObjects {
    async fn for_bucket(
        &self,
        bucket: &BucketRow,
    ) -> Result<Arc<dyn ObjectStore>, ObjectStoresError> {
        let inner = self.inner.for_bucket(bucket).await?;
        Ok(Arc::new(ObservedObjectStore {
            inner,
            counter: self.counter.clone(),
        }))
    }
}

struct ObservedObjectStore {
    inner: Arc<dyn ObjectStore>,
    counter: Arc<ObjectCounter>,
}

#[async_trait]
impl ObjectStore for ObservedObjectStore {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError> {
        ObjectCounter::add(&self.counter.gets);
        self.inner.get(location).await
    }

    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError> {
        ObjectCounter::add(&self.counter.puts);
        self.inner.put_if_absent(location, bytes).await
    }

    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError> {
        ObjectCounter::add(&self.counter.lists);
        self.inner.list_detailed(prefix, limit).await
    }

    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError> {
        ObjectCounter::add(&self.counter.deletes);
        self.inner.delete(locations).await
    }
}
