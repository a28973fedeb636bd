//! Bounded, concurrent memory of what is expensive to fetch again: rows that change rarely
//! (tokens, orgs, memberships, namespaces, bucket configurations) for a TTL, immutable metadata
//! files and what is derived from them, and vended credentials until shortly before they
//! expire. Concurrent misses of one key share a single load.
//!
//! Built on quick_cache: a sharded map with S3-FIFO eviction, a weigher and load guards, and
//! nothing running beside it. Expiry is one deadline per entry, checked when it is read (a
//! stale entry is a miss and is replaced), measured on tokio's clock so that tests can move it.

use std::hash::{Hash, RandomState};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use quick_cache::Equivalent;
use quick_cache::sync::{EntryAction, EntryResult};
use tokio::time::Instant;

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

/// What a weighted cache expects to hold, for sizing its record of recently evicted keys.
const WEIGHTED_ENTRIES_ESTIMATE: usize = 1024;

/// Shards of a cache bounded by its number of entries: four per core, read once per process.
static SHARDS: LazyLock<usize> =
    LazyLock::new(|| std::thread::available_parallelism().map_or(1, |cores| cores.get()) * 4);

/// A value and the instant it stops being served (`None`: until evicted or removed).
#[derive(Clone)]
struct Held<V> {
    value: V,
    until: Option<Instant>,
}

impl<V> Held<V> {
    fn is_fresh(&self) -> bool {
        self.until.is_none_or(|until| Instant::now() < until)
    }
}

type Weigh<K, V> = Arc<dyn Fn(&K, &V) -> u64 + Send + Sync>;

/// An entry's weight: what `weigh` says, or 1 each for a cache bounded by its number of entries.
struct Weigher<K, V>(Option<Weigh<K, V>>);

impl<K, V> Clone for Weigher<K, V> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K, V> quick_cache::Weighter<K, Held<V>> for Weigher<K, V> {
    fn weight(&self, key: &K, held: &Held<V>) -> u64 {
        // quick_cache never evicts an entry of weight 0: every entry weighs at least 1.
        self.0
            .as_ref()
            .map_or(1, |weigh| weigh(key, &held.value).max(1))
    }
}

type Entries<K, V> = quick_cache::sync::Cache<K, Held<V>, Weigher<K, V>, RandomState>;

/// A bounded cache whose entries may expire. Keys are hashed with the standard library's
/// keyed SipHash: they carry names and tokens that clients choose.
pub struct Cache<K, V> {
    /// `None` once given a zero lifetime: nothing is remembered, every read loads.
    entries: Option<OnFirstUse<Entries<K, V>>>,
    /// How long an entry is served after it is stored (`None`: until evicted).
    lifetime: Option<Duration>,
}

impl<K, V> Cache<K, V>
where
    K: Eq + Hash + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// Up to `entries` entries.
    pub fn bounded(entries: u64) -> Self {
        Self::build(
            move || {
                let estimate = usize::try_from(entries).unwrap_or(usize::MAX);
                options(*SHARDS, estimate, entries)
            },
            None,
        )
    }

    /// Entries whose weights (`weigh`, in bytes say) add up to at most `max_weight`: for values
    /// whose sizes differ by orders of magnitude. One shard, so that a single entry may take up
    /// to nearly the whole bound (a big table's metadata file), as with one cache-wide bound.
    pub fn weighted(
        max_weight: u64,
        weigh: impl Fn(&K, &V) -> u64 + Send + Sync + 'static,
    ) -> Self {
        let weigh: Weigh<K, V> = Arc::new(weigh);
        Self::build(
            move || options(1, WEIGHTED_ENTRIES_ESTIMATE, max_weight),
            Some(weigh),
        )
    }

    fn build(
        options: impl FnOnce() -> quick_cache::Options + Send + 'static,
        weigh: Option<Weigh<K, V>>,
    ) -> Self {
        Self {
            entries: Some(on_first_use(move || {
                Entries::with_options(
                    options(),
                    Weigher(weigh),
                    RandomState::new(),
                    Default::default(),
                )
            })),
            lifetime: None,
        }
    }

    /// Every entry is served for `lifetime` after it is stored, then read again. A zero
    /// lifetime (a TTL setting of 0) remembers nothing: every read goes to the source.
    pub fn expiring_after(mut self, lifetime: Duration) -> Self {
        if lifetime.is_zero() {
            self.entries = None;
        }
        self.lifetime = Some(lifetime);
        self
    }

    fn entries(&self) -> Option<&Entries<K, V>> {
        self.entries.as_deref()
    }

    fn held(&self, value: V, lifetime: Option<Duration>) -> Held<V> {
        let lifetime = match (self.lifetime, lifetime) {
            (Some(own), Some(asked)) => Some(own.min(asked)),
            (own, asked) => own.or(asked),
        };
        Held {
            value,
            // A lifetime past the clock's range (a TTL set absurdly long) is no deadline.
            until: lifetime.and_then(|lifetime| Instant::now().checked_add(lifetime)),
        }
    }

    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        let entries = self.entries()?;
        let held = entries.get(key)?;
        if held.is_fresh() {
            return Some(held.value);
        }
        entries.remove_if(key, |held| !held.is_fresh());
        None
    }

    pub fn insert(&self, key: K, value: V) {
        if let Some(entries) = self.entries() {
            entries.insert(key, self.held(value, None));
        }
    }

    /// Stores `value` for at most `lifetime` (and at most the cache's own lifetime).
    pub fn insert_for(&self, key: K, value: V, lifetime: Duration) {
        if let Some(entries) = self.entries() {
            entries.insert(key, self.held(value, Some(lifetime)));
        }
    }

    /// The stored value, or the result of `load` (stored when it succeeds). Concurrent callers
    /// for one key wait for the first one's load; if it fails or is abandoned, the next one
    /// loads.
    pub async fn get_or_load<Q, E>(
        &self,
        key: &Q,
        load: impl Future<Output = Result<V, E>>,
    ) -> Result<V, E>
    where
        Q: Hash + Equivalent<K> + ToOwned<Owned = K> + ?Sized,
    {
        let Some(entries) = self.entries() else {
            return load.await;
        };
        if let Some(value) = self.get(key) {
            return Ok(value);
        }
        let stale_or_fresh = |_: &K, held: &mut Held<V>| {
            if held.is_fresh() {
                EntryAction::Retain(held.value.clone())
            } else {
                EntryAction::ReplaceWithGuard
            }
        };
        let guard = match entries.entry_async(key, stale_or_fresh).await {
            EntryResult::Retained(value) => return Ok(value),
            EntryResult::Vacant(guard) | EntryResult::Replaced(guard, _) => guard,
            // Neither is asked for (no removal, no timeout): load without storing.
            EntryResult::Removed(..) | EntryResult::Timeout => return load.await,
        };
        let value = load.await?;
        // Fails when the key was removed (a change made what was loaded stale) or inserted
        // meanwhile: then what is stored, if anything, is not this load's.
        let _ = guard.insert(self.held(value.clone(), None));
        Ok(value)
    }

    pub fn remove<Q>(&self, key: &Q)
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        if let Some(entries) = self.entries() {
            entries.remove(key);
        }
    }

    /// Forgets every entry `stale` picks: what one change can have made stale, no more.
    pub fn remove_if(&self, stale: impl Fn(&K, &V) -> bool) {
        if let Some(entries) = self.entries() {
            entries.retain(|key, held| !stale(key, &held.value));
        }
    }

    pub fn clear(&self) {
        if let Some(entries) = self.entries() {
            entries.clear();
        }
    }
}

fn options(shards: usize, entries: usize, weight: u64) -> quick_cache::Options {
    quick_cache::OptionsBuilder::new()
        .shards(shards)
        .estimated_items_capacity(entries)
        .weight_capacity(weight)
        .build()
        .expect("every option is set")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn remembers_within_the_ttl_and_zero_disables() {
        let cache = Cache::bounded(10).expiring_after(Duration::from_secs(60));
        cache.insert("a", 1);
        assert_eq!(cache.get(&"a"), Some(1));
        let loaded: Result<i32, ()> = cache.get_or_load(&"b", async { Ok(2) }).await;
        assert_eq!(loaded, Ok(2));
        let again: Result<i32, ()> = cache.get_or_load(&"b", async { Ok(3) }).await;
        assert_eq!(again, Ok(2), "the first load is remembered");
        let failed: Result<i32, &str> = cache.get_or_load(&"c", async { Err("no") }).await;
        assert_eq!(failed, Err("no"));
        assert_eq!(cache.get(&"c"), None, "failures are not remembered");
        cache.insert("d", 4);
        cache.remove_if(|key, _| *key == "a");
        assert_eq!(cache.get(&"a"), None, "picked entries are forgotten");
        assert_eq!(cache.get(&"d"), Some(4), "the others stay");
        cache.remove(&"d");
        assert_eq!(cache.get(&"d"), None);
        cache.insert("a", 1);
        cache.clear();
        assert_eq!(cache.get(&"a"), None);

        let off = Cache::bounded(10).expiring_after(Duration::ZERO);
        off.insert("a", 1);
        assert_eq!(off.get(&"a"), None);
        let loaded: Result<i32, ()> = off.get_or_load(&"a", async { Ok(2) }).await;
        assert_eq!(loaded, Ok(2), "a cache that remembers nothing still loads");
    }

    #[tokio::test(start_paused = true)]
    async fn entries_expire_with_their_lifetime_and_are_loaded_again() {
        let cache = Cache::bounded(10).expiring_after(Duration::from_secs(10));
        let loads = AtomicUsize::new(0);
        let load = || async { Ok::<_, ()>(loads.fetch_add(1, Ordering::SeqCst) + 1) };
        assert_eq!(cache.get_or_load("k", load()).await, Ok(1));
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert_eq!(cache.get_or_load("k", load()).await, Ok(1), "still fresh");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get("k"), None, "expired at its deadline");
        assert_eq!(cache.get_or_load("k", load()).await, Ok(2), "loaded again");

        // A shorter lifetime of its own wins over the cache's; a longer one does not.
        cache.insert_for("short".to_owned(), 7, Duration::from_secs(2));
        cache.insert_for("long".to_owned(), 8, Duration::from_secs(3600));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(cache.get("short"), None);
        assert_eq!(cache.get("long"), Some(8));
        tokio::time::advance(Duration::from_secs(8)).await;
        assert_eq!(cache.get("long"), None);
    }

    #[tokio::test]
    async fn concurrent_misses_share_one_load_and_a_failed_one_is_retried() {
        let cache = Arc::new(Cache::<String, usize>::bounded(10));
        let loads = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let (cache, loads, mut released) = (cache.clone(), loads.clone(), released.clone());
                tokio::spawn(async move {
                    let load = async {
                        let n = loads.fetch_add(1, Ordering::SeqCst) + 1;
                        released.wait_for(|go| *go).await.unwrap();
                        Ok::<_, ()>(n)
                    };
                    cache.get_or_load("k", load).await
                })
            })
            .collect();
        // One thread: each yield runs every spawned caller until it waits, so all eight have
        // asked for the key before the first load is let go; no clock is involved.
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        assert!(callers.iter().all(|caller| !caller.is_finished()));
        assert_eq!(
            loads.load(Ordering::SeqCst),
            1,
            "the seven others wait for the first load instead of loading"
        );
        release.send(true).unwrap();
        for caller in callers {
            assert_eq!(caller.await.unwrap(), Ok(1));
        }
        assert_eq!(
            loads.load(Ordering::SeqCst),
            1,
            "one load for eight callers"
        );

        let failed: Result<usize, &str> = cache.get_or_load("bad", async { Err("no") }).await;
        assert_eq!(failed, Err("no"));
        let retried: Result<usize, &str> = cache.get_or_load("bad", async { Ok(5) }).await;
        assert_eq!(retried, Ok(5), "a failed load leaves nothing behind");
    }

    #[test]
    fn a_lifetime_past_the_clock_s_range_never_expires() {
        let cache = Cache::bounded(10).expiring_after(Duration::MAX);
        cache.insert("k", 1);
        assert_eq!(cache.get("k"), Some(1));
    }

    #[tokio::test]
    async fn a_removal_during_a_load_keeps_the_loaded_value_out() {
        let cache = Arc::new(Cache::<String, u32>::bounded(10));
        let (finish, finished) = tokio::sync::oneshot::channel::<()>();
        let (started, has_started) = tokio::sync::oneshot::channel::<()>();
        let loading = tokio::spawn({
            let cache = cache.clone();
            async move {
                let load = async move {
                    started.send(()).unwrap();
                    finished.await.unwrap();
                    Ok::<_, ()>(1)
                };
                cache.get_or_load("k", load).await
            }
        });
        has_started.await.unwrap();
        // What the load read is stale now: a change says so while it is under way.
        cache.remove("k");
        finish.send(()).unwrap();
        assert_eq!(
            loading.await.unwrap(),
            Ok(1),
            "the caller still gets its answer"
        );
        assert_eq!(cache.get("k"), None, "but it is not remembered");
    }

    #[test]
    fn a_weighted_cache_keeps_one_entry_of_nearly_its_whole_bound_and_evicts_by_weight() {
        let cache = Cache::<&str, Vec<u8>>::weighted(1000, |_, v| v.len() as u64);
        cache.insert("big", vec![0; 900]);
        assert!(
            cache.get("big").is_some(),
            "a single heavy entry is admitted"
        );
        for i in 0..20 {
            cache.insert(["a", "b", "c", "d", "e"][i % 5], vec![0; 100]);
        }
        let held: usize = ["big", "a", "b", "c", "d", "e"]
            .iter()
            .filter_map(|k| cache.get(k))
            .map(|v| v.len())
            .sum();
        assert!(held <= 1000, "held {held} bytes past a bound of 1000");
    }
}
