//! How every catalog change is written: the change's own rows, its event (the outbox) and, for
//! a request holding an idempotency key, the key's move to `Applied`, all in one atomic store
//! write. Whatever lands, lands together; whatever does not, leaves no trace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::sync::Notify;

use super::idempotency::{KeyClaim, applied_marker};
use crate::clock::Clock;
use crate::events::{Draft, outbox, pending};
use crate::store::{MetaStore, StoreError, Write};

/// How long a change may wait in all while it keeps losing an event counter to concurrent
/// changes before it gives up: a burst of n writers on one counter costs the last of them n
/// tries, so the bound is time (well inside API Gateway's 29 s), not a count.
const SEQUENCE_BUDGET: Duration = Duration::from_secs(10);
const FIRST_SEQUENCE_WAIT: Duration = Duration::from_millis(2);
const MAX_SEQUENCE_WAIT: Duration = Duration::from_millis(100);
/// Event counters an instance remembers (forgotten all at once past this).
const KNOWN_COUNTERS: usize = 10_000;

fn taken_over() -> StoreError {
    // A retry took the key over after this request's lease ran out: it runs the change, so
    // this one must not.
    StoreError::Unavailable("the request's Idempotency-Key was taken over by a retry".into())
}

/// The waits between a change's tries while its events' bookkeeping keeps losing: doubling
/// from [`FIRST_SEQUENCE_WAIT`] to [`MAX_SEQUENCE_WAIT`], jittered, [`SEQUENCE_BUDGET`] in all.
fn sequence_waits() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::new()
        .with_min_delay(FIRST_SEQUENCE_WAIT)
        .with_max_delay(MAX_SEQUENCE_WAIT)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .with_total_delay(Some(SEQUENCE_BUDGET))
        .build()
}

/// How one way of numbering events takes part in a change's write
/// ([`ChangeWriter::write_with_events`]).
struct EventAttempt<B, W, R> {
    /// Whether a failed condition at this index of the event writes is the numbering's own
    /// (retried), not the caller's.
    bookkeeping: B,
    /// The event writes from the numbering's state, at a time and an expiry; and the state
    /// they leave once landed.
    writes: W,
    /// The numbering's state, read again after a lost try.
    read_again: R,
    /// The failure once the budget is spent.
    contended: &'static str,
}

/// A change's store writes, each labelled with what its condition guards, so that a refusal
/// names the part that failed instead of its position in the batch.
#[derive(Debug, Clone)]
pub struct Change<L> {
    parts: Vec<(L, Write)>,
}

impl<L: Copy> Default for Change<L> {
    fn default() -> Self {
        Self { parts: Vec::new() }
    }
}

impl<L: Copy> Change<L> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a write whose condition `label` names.
    pub fn with(mut self, label: L, write: Write) -> Self {
        self.parts.push((label, write));
        self
    }

    /// Adds a write whose condition `label` names.
    pub fn push(&mut self, label: L, write: Write) {
        self.parts.push((label, write));
    }
}

/// The label of a change whose conditions all hold what the operation read: whichever fails,
/// what was read has changed, and the operation reads again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsRead;

impl Change<AsRead> {
    /// A change of `writes` whose conditions all hold what was read.
    pub fn as_read(writes: Vec<Write>) -> Self {
        Self {
            parts: writes.into_iter().map(|write| (AsRead, write)).collect(),
        }
    }
}

/// Why a labelled change was not written. Every case but [`ChangeFailure::Unknown`] wrote
/// nothing of it.
#[derive(Debug)]
pub enum ChangeFailure<L> {
    /// The condition of the part with this label failed.
    Refused(L),
    /// A concurrent transaction touched one of its items (which one is not said): reading
    /// again and retrying finds out.
    Contended,
    /// The store did not apply it (unavailable, or it refused the request as invalid).
    NotWritten(StoreError),
    /// It may or may not have landed (a timeout, a lost answer): the caller must not retry it
    /// blindly.
    Unknown(StoreError),
}

impl<L: std::fmt::Debug> std::fmt::Display for ChangeFailure<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChangeFailure::Refused(label) => {
                write!(f, "a condition of the change failed: {label:?}")
            }
            ChangeFailure::Contended => f.write_str("a concurrent change touched the same items"),
            ChangeFailure::NotWritten(e) | ChangeFailure::Unknown(e) => e.fmt(f),
        }
    }
}

/// A store write's result told by the labels of its parts: the one place a failure's position
/// in the batch is decoded.
fn outcome<L: Copy>(labels: &[L], written: Result<(), StoreError>) -> Result<(), ChangeFailure<L>> {
    match written {
        Ok(()) => Ok(()),
        Err(StoreError::ConditionFailed { index, .. }) if index < labels.len() => {
            Err(ChangeFailure::Refused(labels[index]))
        }
        Err(StoreError::Conflict(_)) => Err(ChangeFailure::Contended),
        Err(
            e @ (StoreError::Unavailable(_) | StoreError::Throttled(_) | StoreError::Invalid(_)),
        ) => Err(ChangeFailure::NotWritten(e)),
        Err(e) => Err(ChangeFailure::Unknown(e)),
    }
}

impl<L: std::fmt::Debug> From<ChangeFailure<L>> for StoreError {
    /// For bookkeeping that reports any failure as the store's.
    fn from(failure: ChangeFailure<L>) -> Self {
        match failure {
            ChangeFailure::NotWritten(e) | ChangeFailure::Unknown(e) => e,
            refused_or_contended => StoreError::Conflict(refused_or_contended.to_string()),
        }
    }
}

impl<L: std::fmt::Debug> From<ChangeFailure<L>> for crate::error::CatalogError {
    /// For an operation that retries no further: a lost race is the 503 that asks for the
    /// request again, a store failure is the store's (the edge logs which).
    fn from(failure: ChangeFailure<L>) -> Self {
        match failure {
            ChangeFailure::Refused(label) => {
                tracing::debug!(part = ?label, "a condition of the change failed");
                crate::error::CatalogError::contended("What the request changes")
            }
            ChangeFailure::Contended => {
                crate::error::CatalogError::contended("What the request changes")
            }
            ChangeFailure::NotWritten(e) | ChangeFailure::Unknown(e) => e.into(),
        }
    }
}

/// The one writer of catalog changes: each with its events (waiting for the org's sequence,
/// numbered by their entities) and the request's idempotency key, in one atomic store write.
pub struct ChangeWriter {
    store: Arc<dyn MetaStore>,
    clock: Arc<dyn Clock>,
    /// How long change events are kept and readable.
    event_retention: Duration,
    /// Signalled when this process wrote a change event.
    events_written: Arc<Notify>,
    /// Each org's event counter as this instance last wrote it (numbering on write).
    counters: Mutex<HashMap<String, outbox::Counter>>,
    /// Each entity's event counter as this instance last wrote it, by (org, entity).
    entity_counters: Mutex<HashMap<(String, String), pending::EntityCounter>>,
    /// Whether changes number their events in their own write (the path `floe-bench` compares).
    baselines: Arc<super::baselines::Baselines>,
}

impl ChangeWriter {
    pub fn new(
        store: Arc<dyn MetaStore>,
        clock: Arc<dyn Clock>,
        event_retention: Duration,
        baselines: Arc<super::baselines::Baselines>,
    ) -> Self {
        Self {
            store,
            clock,
            event_retention,
            baselines,
            events_written: Arc::default(),
            counters: Mutex::default(),
            entity_counters: Mutex::default(),
        }
    }

    /// Writes an operation's change with the event that describes it; a failed condition comes
    /// back as its part's label ([`Change::as_read`] where every part holds what was read).
    /// `key` is the request's idempotency key claim ([`super::OrgContext::key`]); `None`
    /// outside requests (the purge).
    pub async fn write<L: Copy>(
        &self,
        key: Option<&KeyClaim>,
        change: Change<L>,
        event: Draft,
    ) -> Result<(), ChangeFailure<L>> {
        self.write_answering(key, change, event, None).await
    }

    /// [`Self::write`] for an operation that knows its answer before writing it: a retry after
    /// a lost answer gets exactly this one.
    pub async fn write_answering<L: Copy>(
        &self,
        key: Option<&KeyClaim>,
        change: Change<L>,
        event: Draft,
        answer: Option<String>,
    ) -> Result<(), ChangeFailure<L>> {
        let (labels, writes): (Vec<L>, Vec<Write>) = change.parts.into_iter().unzip();
        let written = self
            .write_change_answering(key, writes, vec![event], answer)
            .await;
        outcome(&labels, written)
    }

    /// [`Self::write`] for a change that several events describe (a transaction's tables, one
    /// event each): they wait in the same atomic write and take consecutive numbers of the
    /// org's sequence, in their order.
    pub async fn write_described<L: Copy>(
        &self,
        key: Option<&KeyClaim>,
        change: Change<L>,
        events: Vec<Draft>,
    ) -> Result<(), ChangeFailure<L>> {
        let (labels, writes): (Vec<L>, Vec<Write>) = change.parts.into_iter().unzip();
        if events.is_empty() {
            return outcome(&labels, self.store.write(writes).await);
        }
        let written = self.write_change_answering(key, writes, events, None).await;
        outcome(&labels, written)
    }

    /// Writes a change no event describes: the bookkeeping of sessions, memberships, api
    /// clients, teams, org settings, bucket configurations and the purge's own progress. Its
    /// outcome is told as any change's.
    pub async fn write_unrecorded<L: Copy>(
        &self,
        change: Change<L>,
    ) -> Result<(), ChangeFailure<L>> {
        let (labels, writes): (Vec<L>, Vec<Write>) = change.parts.into_iter().unzip();
        outcome(&labels, self.store.write(writes).await)
    }

    /// The store write of a change: the caller's writes come first in the batch, so the index
    /// of a failed condition means what the caller expects. Its events wait in the same write,
    /// numbered by their entities ([`pending`]); the org's sequence numbers them afterwards
    /// ([`crate::events::sequencer`]). A failure on an entity's counter (another change of it
    /// took the number without touching the caller's rows) is retried here with the next
    /// number, never returned.
    async fn write_change_answering(
        &self,
        key: Option<&KeyClaim>,
        writes: Vec<Write>,
        events: Vec<Draft>,
        answer: Option<String>,
    ) -> Result<(), StoreError> {
        if self.baselines.number_on_write() {
            return self.write_numbered(key, writes, events, answer).await;
        }
        let org = events[0].data.org.clone();
        let entities = pending::entities(&events);
        let mut counters = Vec::new();
        for entity in &entities {
            let counter = match self.known_entity_counter(&org, entity) {
                Some(counter) => counter,
                None => pending::read_entity_counter(&*self.store, &org, entity).await?,
            };
            counters.push((entity.clone(), counter));
        }
        let attempt = EventAttempt {
            // Any of the event writes: a counter's condition, or a waiting item's.
            bookkeeping: |_| true,
            writes: |counters: &Vec<(String, pending::EntityCounter)>, now_ms, expires_at| {
                pending::pending_writes(&org, counters, &events, now_ms, expires_at)
            },
            read_again: || async {
                let mut counters = Vec::with_capacity(entities.len());
                for entity in &entities {
                    let counter = pending::read_entity_counter(&*self.store, &org, entity).await?;
                    counters.push((entity.clone(), counter));
                }
                Ok(counters)
            },
            contended: "an entity's event counter is contended; nothing was written",
        };
        let landed = self
            .write_with_events(key, answer, writes, counters, attempt)
            .await?;
        for (entity, counter) in landed {
            tracing::debug!(org = %org, entity = %entity, entity_sequence = counter.last, "change recorded");
            self.remember_entity_counter(&org, entity, counter);
        }
        Ok(())
    }

    /// The write as it was before events waited for the sequencer: numbered on the org's
    /// counter inside the change's own write, so all of an org's changes queue on that one
    /// item. Kept for `floe-bench writes` (see `core::baselines`), which compares both in one run.
    async fn write_numbered(
        &self,
        key: Option<&KeyClaim>,
        writes: Vec<Write>,
        events: Vec<Draft>,
        answer: Option<String>,
    ) -> Result<(), StoreError> {
        let org = events[0].data.org.clone();
        let counter = match self.known_counter(&org) {
            Some(counter) => counter,
            None => outbox::read_counter(&*self.store, &org).await?,
        };
        let attempt = EventAttempt {
            // The org's counter, the first of the event writes.
            bookkeeping: |index| index == 0,
            writes: |counter: &outbox::Counter, now_ms, expires_at| {
                let (writes, _, landed) =
                    outbox::event_writes(*counter, events.clone(), now_ms, expires_at);
                (writes, landed)
            },
            read_again: || outbox::read_counter(&*self.store, &org),
            contended: "the org's event sequence is contended; nothing was written",
        };
        let landed = self
            .write_with_events(key, answer, writes, counter, attempt)
            .await?;
        self.remember_counter(&org, landed);
        Ok(())
    }

    /// Writes the caller's `writes` with the event writes `attempt` builds from `state`, and
    /// the idempotency key's move to applied; while only the events' bookkeeping lost (or a
    /// concurrent transaction touched the same items), waits, reads the state again and tries
    /// once more, within [`SEQUENCE_BUDGET`]. What it returns is what the landed attempt says
    /// its state became.
    async fn write_with_events<S, T, F>(
        &self,
        key: Option<&KeyClaim>,
        answer: Option<String>,
        writes: Vec<Write>,
        mut state: S,
        attempt: EventAttempt<
            impl Fn(usize) -> bool,
            impl Fn(&S, u64, u64) -> (Vec<Write>, T),
            impl Fn() -> F,
        >,
    ) -> Result<T, StoreError>
    where
        F: std::future::Future<Output = Result<S, StoreError>>,
    {
        let marker = key.and_then(|claim| applied_marker(claim, answer));
        let mut waits = sequence_waits();
        loop {
            let now_ms = self.clock.now_ms();
            let expires_at = (now_ms / 1000).saturating_add(self.event_retention.as_secs());
            let (event_writes, landed) = (attempt.writes)(&state, now_ms, expires_at);
            let events_from = writes.len();
            let mut batch = writes.clone();
            batch.extend(event_writes);
            let marker_index = batch.len();
            batch.extend(marker.as_ref().map(|m| m.write.clone()));
            match self.store.write(batch).await {
                Ok(()) => {
                    if let Some(marker) = &marker {
                        marker.landed();
                    }
                    self.events_written.notify_waiters();
                    return Ok(landed);
                }
                Err(StoreError::ConditionFailed { index, .. }) if index == marker_index => {
                    return Err(taken_over());
                }
                // Nothing was written: another change took the number (a counter's condition
                // failed), or a transaction touching one of the same items ran at the same
                // time (which one is not said; trying again finds out).
                Err(StoreError::ConditionFailed { index, .. })
                    if index >= events_from && (attempt.bookkeeping)(index - events_from) => {}
                Err(StoreError::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
            let Some(wait) = waits.next() else {
                return Err(StoreError::Conflict(attempt.contended.into()));
            };
            tokio::time::sleep(wait).await;
            state = (attempt.read_again)().await?;
        }
    }

    fn known_entity_counter(&self, org: &str, entity: &str) -> Option<pending::EntityCounter> {
        let known = self
            .entity_counters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        known.get(&(org.to_owned(), entity.to_owned())).copied()
    }

    fn remember_entity_counter(&self, org: &str, entity: String, counter: pending::EntityCounter) {
        let mut known = self
            .entity_counters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let key = (org.to_owned(), entity);
        if known.len() >= KNOWN_COUNTERS && !known.contains_key(&key) {
            known.clear();
        }
        known.insert(key, counter);
    }

    fn known_counter(&self, org: &str) -> Option<outbox::Counter> {
        let known = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        known.get(org).copied()
    }

    fn remember_counter(&self, org: &str, counter: outbox::Counter) {
        let mut known = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= KNOWN_COUNTERS && !known.contains_key(org) {
            known.clear();
        }
        known.insert(org.to_owned(), counter);
    }

    /// Wakes when a change (and its event) was written by this process: a publisher beside
    /// the server (`floe serve`) delivers it without waiting for its next poll.
    pub fn events_written(&self) -> Arc<Notify> {
        self.events_written.clone()
    }

    /// How long events are kept (and readable).
    pub fn event_retention(&self) -> Duration {
        self.event_retention
    }
}

/// The default event retention: the soft-delete recovery window, so a reader that looks once a
/// week misses nothing.
pub const DEFAULT_EVENT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
