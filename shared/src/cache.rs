//! A small time-bounded cache for rows that change rarely (tokens, orgs, memberships), so a warm
//! request costs only the reads of what it is about. A change is seen within the TTL.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use crate::clock::Clock;

pub struct TtlCache<K, V> {
    ttl_ms: u64,
    capacity: usize,
    clock: Arc<dyn Clock>,
    entries: Mutex<HashMap<K, (V, u64)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// A cache keeping up to `capacity` entries for `ttl_ms` each; a TTL of 0 disables it.
    pub fn new(ttl_ms: u64, capacity: usize, clock: Arc<dyn Clock>) -> Self {
        Self {
            ttl_ms,
            capacity,
            clock,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, key: &K) -> Option<V> {
        if self.ttl_ms == 0 {
            return None;
        }
        let now = self.clock.now_ms();
        let entries = self.entries.lock().expect("cache lock");
        entries
            .get(key)
            .filter(|(_, expires)| *expires > now)
            .map(|(v, _)| v.clone())
    }

    pub fn clear(&self) {
        self.entries.lock().expect("cache lock").clear();
    }

    pub fn insert(&self, key: K, value: V) {
        if self.ttl_ms == 0 {
            return;
        }
        let now = self.clock.now_ms();
        let mut entries = self.entries.lock().expect("cache lock");
        if entries.len() >= self.capacity {
            entries.retain(|_, (_, expires)| *expires > now);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + self.ttl_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn entries_expire_and_zero_ttl_disables() {
        let clock = Arc::new(ManualClock::new(1_000));
        let cache = TtlCache::new(100, 2, clock.clone());
        cache.insert("a", 1);
        assert_eq!(cache.get(&"a"), Some(1));
        clock.advance_ms(100);
        assert_eq!(cache.get(&"a"), None);
        cache.insert("b", 2);
        cache.insert("c", 3);
        cache.insert("d", 4);
        assert_eq!(cache.get(&"d"), Some(4));
        let off = TtlCache::new(0, 2, clock);
        off.insert("a", 1);
        assert_eq!(off.get(&"a"), None);
    }
}
