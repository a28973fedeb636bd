//! Time-bounded memory of rows that change rarely (tokens, orgs, memberships, namespaces, bucket
//! configurations), so a warm request costs only the reads of what it is about. A change is seen
//! within the TTL. Built on moka: bounded, concurrent, and concurrent misses of one key share a
//! single load.

use std::hash::Hash;
use std::sync::LazyLock;
use std::time::Duration;

use moka::future::Cache;

/// A value built the first time it is used. A cache costs its allocations and their page faults
/// when built, and a function that never reads what one caches (config never loads a table) should
/// not pay them at its cold start.
pub type OnFirstUse<T> = LazyLock<T, Box<dyn FnOnce() -> T + Send>>;

/// `build`, deferred to the first use of its value.
pub fn on_first_use<T>(build: impl FnOnce() -> T + Send + 'static) -> OnFirstUse<T> {
    LazyLock::new(Box::new(build))
}

/// Default TTL of remembered tokens, orgs, memberships, namespaces and bucket configurations:
/// how long a revoked token or a changed grant may still be honoured by another instance.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

pub struct TtlCache<K, V> {
    /// `None` when the TTL is zero: nothing is remembered.
    inner: Option<OnFirstUse<Cache<K, V>>>,
}

impl<K, V> TtlCache<K, V>
where
    K: Eq + Hash + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache keeping up to `capacity` entries for `ttl` each; a zero TTL disables it.
    pub fn new(ttl: Duration, capacity: u64) -> Self {
        Self::build(ttl, move || Cache::builder().max_capacity(capacity))
    }

    /// A cache keeping entries for `ttl` each while their weights (`weigh`, in bytes say) add
    /// up to at most `max_weight`: for values whose sizes differ by orders of magnitude.
    pub fn weighted(
        ttl: Duration,
        max_weight: u64,
        weigh: impl Fn(&K, &V) -> u32 + Send + Sync + 'static,
    ) -> Self {
        Self::build(ttl, move || {
            Cache::builder().max_capacity(max_weight).weigher(weigh)
        })
    }

    fn build(
        ttl: Duration,
        builder: impl FnOnce() -> moka::future::CacheBuilder<K, V, Cache<K, V>> + Send + 'static,
    ) -> Self {
        let inner = (!ttl.is_zero()).then(|| {
            on_first_use(move || {
                builder()
                    .time_to_live(ttl)
                    .support_invalidation_closures()
                    .build()
            })
        });
        Self { inner }
    }

    pub async fn get(&self, key: &K) -> Option<V> {
        match &self.inner {
            Some(cache) => cache.get(key).await,
            None => None,
        }
    }

    pub async fn insert(&self, key: K, value: V) {
        if let Some(cache) = &self.inner {
            cache.insert(key, value).await;
        }
    }

    /// The remembered value, or the result of `load` (remembered when it succeeds; concurrent
    /// callers for one key wait for the same load).
    pub async fn get_or_load<E>(
        &self,
        key: K,
        load: impl Future<Output = Result<V, E>>,
    ) -> Result<V, E>
    where
        E: Clone + Send + Sync + 'static,
    {
        match &self.inner {
            Some(cache) => cache.try_get_with(key, load).await.map_err(|shared| {
                std::sync::Arc::try_unwrap(shared).unwrap_or_else(|shared| (*shared).clone())
            }),
            None => load.await,
        }
    }

    /// Forgets one entry.
    pub async fn remove(&self, key: &K) {
        if let Some(cache) = &self.inner {
            cache.invalidate(key).await;
        }
    }

    /// Forgets every entry `stale` picks: what one change can have made stale, no more.
    pub fn remove_if(&self, stale: impl Fn(&K, &V) -> bool + Send + Sync + 'static) {
        if let Some(cache) = &self.inner {
            // Fails only when the cache was built without closure support, which `new` asks for.
            let _ = cache.invalidate_entries_if(stale);
        }
    }

    pub fn clear(&self) {
        if let Some(cache) = &self.inner {
            cache.invalidate_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn remembers_within_the_ttl_and_zero_disables() {
        let cache = TtlCache::new(Duration::from_secs(60), 10);
        cache.insert("a", 1).await;
        assert_eq!(cache.get(&"a").await, Some(1));
        let loaded: Result<i32, ()> = cache.get_or_load("b", async { Ok(2) }).await;
        assert_eq!(loaded, Ok(2));
        let again: Result<i32, ()> = cache.get_or_load("b", async { Ok(3) }).await;
        assert_eq!(again, Ok(2), "the first load is remembered");
        let failed: Result<i32, &str> = cache.get_or_load("c", async { Err("no") }).await;
        assert_eq!(failed, Err("no"));
        assert_eq!(cache.get(&"c").await, None, "failures are not remembered");
        cache.insert("d", 4).await;
        cache.remove_if(|key, _| *key == "a");
        assert_eq!(cache.get(&"a").await, None, "picked entries are forgotten");
        assert_eq!(cache.get(&"d").await, Some(4), "the others stay");
        cache.remove(&"d").await;
        assert_eq!(cache.get(&"d").await, None);
        cache.insert("a", 1).await;
        cache.clear();
        assert_eq!(cache.get(&"a").await, None);

        let off = TtlCache::new(Duration::ZERO, 10);
        off.insert("a", 1).await;
        assert_eq!(off.get(&"a").await, None);
    }
}
