//! Numbering waiting events in their org's gap-free sequence, off the changes' write path.
//!
//! A change leaves its events waiting ([`super::pending`]); the sequencer moves them into the
//! org's sequence in batches: one atomic write moves the org's counter from `n` to `n + k`,
//! deletes the `k` waiting items and writes the `k` numbered events. So every event is numbered
//! exactly once (a waiting item is deleted by the write that numbers it), the numbers have no
//! gaps (the counter's condition), and a change's events take consecutive numbers (they go in
//! one write).
//!
//! Each entity's events are numbered in the entity's own order: an event goes only after the
//! event before it in its entity, and the write checks that this one is no longer waiting.
//! That check is what makes a read that raced a landing change harmless: an event whose
//! predecessor landed after the read passed its key is refused and numbered in a later round.
//!
//! Anyone may run it, any number at once (they contend on the counter only, and a loser reads
//! again): `floe serve`'s publisher after every change, the events feed before it answers, and
//! on AWS the events function on the stream's new waiting items.

use std::collections::{HashMap, HashSet};

use super::outbox::{self, Counter, CounterRow};
use super::pending::PendingEvent;
use crate::store::rows::{self, keys};
use crate::store::{Condition, Item, Key, MAX_WRITES, MetaStore, StoreError, Write};

/// At most this many waiting events are read per shard and round.
const MAX_READ: usize = 1000;
/// Rounds per call: each reads the waiting events again, after a batch lost the counter to
/// another sequencer or new events arrived.
const MAX_ROUNDS: usize = 32;

/// One waiting event as read.
#[derive(Debug, Clone)]
struct Waiting {
    key: Key,
    event: PendingEvent,
}

impl Waiting {
    fn place(&self) -> (&str, u64) {
        (&self.event.entity, self.event.entity_sequence())
    }
}

/// Numbers the org's waiting events that may go now; how many it numbered. It reads again
/// only when a batch lost to another sequencer or the read stopped short: events that land
/// while it writes are the next call's (the stream's next record, the next change, the next
/// feed read), so a sequencer never chases a busy org's writers.
pub async fn sequence_org(store: &dyn MetaStore, org: &str) -> Result<u64, StoreError> {
    let every_shard: Vec<String> = (0..keys::PENDING_EVENT_SHARDS)
        .map(|shard| keys::pending_events_partition(org, shard))
        .collect();
    sequence_partitions(store, org, &every_shard).await
}

/// [`sequence_org`] reading only the waiting events in `partitions`.
async fn sequence_partitions(
    store: &dyn MetaStore,
    org: &str,
    partitions: &[String],
) -> Result<u64, StoreError> {
    let mut numbered = 0;
    for _ in 0..MAX_ROUNDS {
        let (waiting, short) = read_waiting(store, partitions).await?;
        if waiting.is_empty() {
            break;
        }
        let plan = order(waiting);
        if plan.is_empty() {
            // Only events whose change or predecessor is still landing: a later call numbers them.
            break;
        }
        let counter = outbox::read_counter(store, org).await?;
        let (done, finished) = write_plan(store, org, counter, plan).await?;
        numbered += done;
        if finished && !short {
            break;
        }
    }
    Ok(numbered)
}

/// Numbers the waiting events of every org that has some; how many it numbered. It reads only
/// the shards the sparse index lists waiting events in, so a pass with nothing waiting reads
/// nothing more. The index may lag (DynamoDB's does): a shard it does not list yet waits for
/// the next pass, and the checks keep every entity's order meanwhile.
pub async fn sequence_all(store: &dyn MetaStore) -> Result<u64, StoreError> {
    let entries = store
        .query_index(keys::PENDING_EVENT_ORGS, "\u{7f}", 10_000)
        .await?;
    let mut shards: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for key in entries {
        if let Some(org) = keys::org_of_pending_events(&key.pk) {
            let listed = shards.entry(org.to_owned()).or_default();
            if !listed.contains(&key.pk) {
                listed.push(key.pk);
            }
        }
    }
    let mut numbered = 0;
    for (org, partitions) in shards {
        numbered += sequence_partitions(store, &org, &partitions).await?;
    }
    Ok(numbered)
}

/// The waiting events in `partitions`, read at once, and whether the read stopped short of
/// some (at most [`MAX_READ`] a shard).
async fn read_waiting(
    store: &dyn MetaStore,
    partitions: &[String],
) -> Result<(Vec<Waiting>, bool), StoreError> {
    let shards = partitions
        .iter()
        .map(|partition| read_shard(store, partition.clone()));
    let mut out = Vec::new();
    let mut short = false;
    for shard in futures::future::try_join_all(shards).await? {
        short |= shard.len() >= MAX_READ;
        out.extend(shard);
    }
    Ok((out, short))
}

async fn read_shard(store: &dyn MetaStore, partition: String) -> Result<Vec<Waiting>, StoreError> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    while out.len() < MAX_READ {
        let items: Vec<Item> = store
            .query(&partition, "", after.as_deref(), MAX_READ - out.len())
            .await?;
        let Some(last) = items.last() else { break };
        after = Some(last.key.sk.clone());
        let exhausted = items.len() < MAX_READ - out.len();
        for item in items {
            out.push(Waiting {
                event: rows::decode(&item)?,
                key: item.key,
            });
        }
        if exhausted {
            break;
        }
    }
    Ok(out)
}

/// The changes that may be numbered now, in the order they get their numbers: by the time
/// they were written, each only after the earlier events of its entities. A change all of whose
/// events were not read (it landed while the read went by) waits, and so does everything after
/// it in its entities.
fn order(waiting: Vec<Waiting>) -> Vec<Vec<Waiting>> {
    let read: HashSet<(String, u64)> = waiting
        .iter()
        .map(|w| (w.event.entity.clone(), w.event.entity_sequence()))
        .collect();
    let mut changes: HashMap<String, Vec<Waiting>> = HashMap::new();
    for w in waiting {
        changes.entry(w.event.change.clone()).or_default().push(w);
    }
    let mut remaining: Vec<Vec<Waiting>> = changes
        .into_values()
        .filter(|events| events.len() == events[0].event.events_in_change as usize)
        .map(|mut events| {
            events.sort_by_key(|w| w.event.position);
            events
        })
        .collect();
    remaining.sort_by(|a, b| {
        (a[0].event.time_ms, &a[0].event.change).cmp(&(b[0].event.time_ms, &b[0].event.change))
    });
    let mut planned: HashSet<(String, u64)> = HashSet::new();
    let mut plan = Vec::new();
    loop {
        let before = plan.len();
        let mut deferred = Vec::new();
        for change in remaining {
            let own: HashSet<(&str, u64)> = change.iter().map(Waiting::place).collect();
            let ready = change.iter().all(|w| {
                let (entity, sequence) = w.place();
                let previous = (entity.to_owned(), sequence.saturating_sub(1));
                sequence <= 1
                    || !read.contains(&previous)
                    || planned.contains(&previous)
                    || own.contains(&(entity, sequence - 1))
            });
            if ready {
                planned.extend(
                    change
                        .iter()
                        .map(|w| (w.event.entity.clone(), w.event.entity_sequence())),
                );
                plan.push(change);
            } else {
                deferred.push(change);
            }
        }
        remaining = deferred;
        if plan.len() == before || remaining.is_empty() {
            return plan;
        }
    }
}

/// The writes one change's numbering takes in a batch: its events numbered from `first`, each
/// waiting item deleted, and a check that each entity's previous event is numbered already
/// where it is not in the batch.
fn change_writes(org: &str, change: &[Waiting], first: u64, in_batch: &HashSet<Key>) -> Vec<Write> {
    let mut writes = Vec::with_capacity(change.len() * 3);
    for (sequence, w) in (first..).zip(change) {
        let (entity, entity_sequence) = w.place();
        writes.push(Write::Delete {
            key: w.key.clone(),
            condition: Condition::Exists,
        });
        writes.push(rows::put_expiring(
            keys::event(org, sequence),
            &w.event.numbered(sequence),
            Condition::NotExists,
            w.event.expires_at,
        ));
        if entity_sequence > 1 {
            let previous = keys::pending_event(org, entity, entity_sequence - 1);
            if !in_batch.contains(&previous) {
                writes.push(Write::Check {
                    key: previous,
                    condition: Condition::NotExists,
                });
            }
        }
    }
    writes
}

/// Writes the plan in batches of at most [`MAX_WRITES`]; how many events it numbered, and
/// whether every batch landed (`false`: one lost to another sequencer or to a still-landing
/// predecessor, and the caller reads again).
async fn write_plan(
    store: &dyn MetaStore,
    org: &str,
    mut counter: Counter,
    plan: Vec<Vec<Waiting>>,
) -> Result<(u64, bool), StoreError> {
    let mut numbered = 0;
    let mut changes = plan.into_iter().peekable();
    while changes.peek().is_some() {
        let mut batch: Vec<Vec<Waiting>> = Vec::new();
        let mut size = 1;
        while let Some(change) = changes.peek() {
            // At most three writes an event: its delete, its put and one check.
            let needs = change.len() * 3;
            if !batch.is_empty() && size + needs > MAX_WRITES {
                break;
            }
            size += needs;
            batch.push(changes.next().expect("peeked"));
        }
        let in_batch: HashSet<Key> = batch.iter().flatten().map(|w| w.key.clone()).collect();
        let mut writes = Vec::with_capacity(size);
        let mut next = counter.last + 1;
        for change in &batch {
            writes.extend(change_writes(org, change, next, &in_batch));
            next += change.len() as u64;
        }
        let last = next - 1;
        let condition = counter
            .version
            .map_or(Condition::NotExists, Condition::VersionIs);
        let counter_write = rows::put_indexed(
            keys::event_counter(org),
            &CounterRow { last },
            condition,
            Some(keys::event_org_entry(org)),
        );
        let version = match &counter_write {
            Write::Put { item, .. } => Some(item.version),
            _ => None,
        };
        writes.insert(0, counter_write);
        match store.write(writes).await {
            Ok(()) => {
                numbered += last - counter.last;
                counter = Counter { last, version };
            }
            Err(StoreError::ConditionFailed { .. } | StoreError::Conflict(_)) => {
                return Ok((numbered, false));
            }
            Err(e) => return Err(e),
        }
    }
    Ok((numbered, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Draft;
    use crate::events::pending::{self, tests::commit};
    use crate::store::embedded::EmbeddedStore;

    /// Writes one change of `drafts` at `time_ms`, as the change writer does, reading the
    /// entities' counters first.
    async fn change(store: &dyn MetaStore, drafts: &[Draft], time_ms: u64) -> Vec<Write> {
        let mut counters = Vec::new();
        for entity in pending::entities(drafts) {
            let counter = pending::read_entity_counter(store, "acme", &entity)
                .await
                .unwrap();
            counters.push((entity, counter));
        }
        let (writes, _) =
            pending::pending_writes("acme", &counters, drafts, time_ms, 4_000_000_000);
        writes
    }

    async fn events(store: &dyn MetaStore) -> Vec<crate::events::ChangeEvent> {
        outbox::events_after(store, "acme", 0, 1000)
            .await
            .unwrap()
            .iter()
            .map(|item| outbox::decode(item).unwrap())
            .collect()
    }

    fn every_shard(org: &str) -> Vec<String> {
        (0..keys::PENDING_EVENT_SHARDS)
            .map(|shard| keys::pending_events_partition(org, shard))
            .collect()
    }

    fn store() -> (tempfile::TempDir, EmbeddedStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn waiting_events_take_consecutive_numbers_each_once_in_each_entitys_order() {
        let (_dir, store) = store();
        // Written with clocks that disagree: t-1's second change carries an earlier time.
        for (drafts, time) in [
            (vec![commit("t-1")], 500),
            (vec![commit("t-2")], 100),
            (vec![commit("t-1")], 50),
            (vec![commit("t-2"), commit("t-3")], 300),
        ] {
            let writes = change(&store, &drafts, time).await;
            store.write(writes).await.unwrap();
        }
        assert_eq!(sequence_org(&store, "acme").await.unwrap(), 5);
        assert_eq!(sequence_org(&store, "acme").await.unwrap(), 0, "each once");
        let events = events(&store).await;
        let numbers: Vec<u64> = events.iter().map(|e| e.data.sequence).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5]);
        let order: Vec<(&str, u64)> = events
            .iter()
            .map(|e| {
                (
                    e.data.table_uuid.as_deref().unwrap(),
                    e.data.entity_sequence.unwrap(),
                )
            })
            .collect();
        // By time, except that t-1's second waits for its first.
        assert_eq!(
            order,
            [("t-2", 1), ("t-2", 2), ("t-3", 1), ("t-1", 1), ("t-1", 2)]
        );
        assert!(
            read_waiting(&store, &every_shard("acme"))
                .await
                .unwrap()
                .0
                .is_empty()
        );
        let counter = outbox::read_counter(&store, "acme").await.unwrap();
        assert_eq!(counter.last, 5);
        // The org is listed for publishers once it has a counter.
        let orgs = store
            .query_index(keys::EVENT_ORGS, "\u{7f}", 10)
            .await
            .unwrap();
        assert_eq!(orgs, [keys::event_counter("acme")]);
    }

    #[tokio::test]
    async fn an_event_whose_predecessor_was_not_read_is_refused_and_numbered_after_it() {
        let (_dir, store) = store();
        let first = change(&store, &[commit("t-1")], 100).await;
        store.write(first.clone()).await.unwrap();
        let second = change(&store, &[commit("t-1")], 200).await;
        store.write(second).await.unwrap();
        // A read that went past t-1's first event before it landed saw only the second.
        let (mut waiting, _) = read_waiting(&store, &every_shard("acme")).await.unwrap();
        waiting.retain(|w| w.event.entity_sequence() == 2);
        let plan = order(waiting);
        assert_eq!(
            plan.len(),
            1,
            "its predecessor was not read: it may go, checked"
        );
        let counter = outbox::read_counter(&store, "acme").await.unwrap();
        let (numbered, finished) = write_plan(&store, "acme", counter, plan).await.unwrap();
        assert_eq!((numbered, finished), (0, false), "the check refuses it");
        assert!(events(&store).await.is_empty());
        // A full read numbers both, in order.
        assert_eq!(sequence_org(&store, "acme").await.unwrap(), 2);
        let numbers: Vec<u64> = events(&store)
            .await
            .iter()
            .map(|e| e.data.entity_sequence.unwrap())
            .collect();
        assert_eq!(numbers, [1, 2]);
    }

    #[tokio::test]
    async fn a_change_read_in_part_waits_with_its_entities_successors() {
        let (_dir, store) = store();
        let writes = change(&store, &[commit("t-1"), commit("t-2")], 100).await;
        store.write(writes).await.unwrap();
        let writes = change(&store, &[commit("t-2")], 200).await;
        store.write(writes).await.unwrap();
        let writes = change(&store, &[commit("t-3")], 300).await;
        store.write(writes).await.unwrap();
        let (mut waiting, _) = read_waiting(&store, &every_shard("acme")).await.unwrap();
        // The read missed the transaction's t-1 event.
        waiting.retain(|w| w.event.entity != "t-1");
        let plan = order(waiting);
        let planned: Vec<Vec<&str>> = plan
            .iter()
            .map(|c| c.iter().map(|w| w.event.entity.as_str()).collect())
            .collect();
        assert_eq!(planned, [["t-3"]], "t-2's second waits for the transaction");
    }

    #[tokio::test]
    async fn concurrent_sequencers_number_every_event_once() {
        let (_dir, store) = store();
        let store: std::sync::Arc<dyn MetaStore> = std::sync::Arc::new(store);
        for i in 0..60u64 {
            let table = format!("t-{}", i % 7);
            let writes = change(&*store, &[commit(&table)], i).await;
            store.write(writes).await.unwrap();
        }
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { sequence_org(&*store, "acme").await.unwrap() })
            })
            .collect();
        let mut total = 0;
        for run in runs {
            total += run.await.unwrap();
        }
        total += sequence_org(&*store, "acme").await.unwrap();
        assert_eq!(total, 60);
        let events = events(&*store).await;
        let numbers: Vec<u64> = events.iter().map(|e| e.data.sequence).collect();
        assert_eq!(numbers, (1..=60).collect::<Vec<_>>());
        let mut per_table: HashMap<String, Vec<u64>> = HashMap::new();
        for e in &events {
            per_table
                .entry(e.data.table_uuid.clone().unwrap())
                .or_default()
                .push(e.data.entity_sequence.unwrap());
        }
        for numbers in per_table.values() {
            assert_eq!(*numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
        }
    }
}
