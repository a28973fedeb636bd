//! The outbox: a change's event is written by the same atomic store write as the change.
//!
//! The write also moves the org's event counter from `n` to `n + 1`, conditioned on it still
//! being at `n`, and inserts the event under number `n + 1` (conditioned on it not existing).
//! Two changes of one org can therefore never take the same number, and a number is only ever
//! taken by a change that landed: the sequence has no gaps and no invented events. A write that
//! loses the counter to a concurrent change of the same org is applied again with the next
//! number (nothing of it was written).

use serde::{Deserialize, Serialize};

use super::{ChangeEvent, Draft};
use crate::store::rows::{self, keys};
use crate::store::{Condition, Item, MetaStore, StoreError, Write};

/// The counter row: the last sequence number taken in the org.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct CounterRow {
    pub last: u64,
}

/// The counter as read: its row and the version to condition on (`None`: no event yet).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counter {
    pub last: u64,
    pub version: Option<u64>,
}

/// Reads an org's counter.
pub async fn read_counter(store: &dyn MetaStore, org: &str) -> Result<Counter, StoreError> {
    Ok(
        match rows::get::<CounterRow>(store, &keys::event_counter(org)).await? {
            Some(v) => Counter {
                last: v.row.last,
                version: Some(v.version),
            },
            None => Counter::default(),
        },
    )
}

/// The writes that record `drafts` as the org's next events after `counter`, numbered
/// consecutively in their order: the counter's move (first, by as many numbers as there are
/// events) and each event. Events expire (the store deletes them by itself) after the retention.
/// Also the events, and the counter as it is once the writes land.
pub fn event_writes(
    counter: Counter,
    drafts: Vec<Draft>,
    now_ms: u64,
    expires_at: u64,
) -> (Vec<Write>, Vec<ChangeEvent>, Counter) {
    let Some(org) = drafts.first().map(|d| d.data.org.clone()) else {
        return (vec![], vec![], counter);
    };
    let last = counter.last + drafts.len() as u64;
    let condition = counter
        .version
        .map_or(Condition::NotExists, Condition::VersionIs);
    let counter_write = rows::put_indexed(
        keys::event_counter(&org),
        &CounterRow { last },
        condition,
        Some(keys::event_org_entry(&org)),
    );
    let landed = Counter {
        last,
        version: match &counter_write {
            Write::Put { item, .. } => Some(item.version),
            _ => None,
        },
    };
    let mut writes = vec![counter_write];
    let mut events = Vec::with_capacity(drafts.len());
    for (sequence, draft) in (counter.last + 1..).zip(drafts) {
        let event = draft.into_event(sequence, now_ms);
        writes.push(rows::put_expiring(
            keys::event(&org, sequence),
            &event,
            Condition::NotExists,
            expires_at,
        ));
        events.push(event);
    }
    (writes, events, landed)
}

/// The org's stored events numbered after `after`, in sequence order, at most `limit`.
pub async fn events_after(
    store: &dyn MetaStore,
    org: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<Item>, StoreError> {
    let start = keys::event_sort_key(after);
    store
        .query(&keys::events_partition(org), "", Some(&start), limit)
        .await
}

/// Every org with events, numbered or still waiting, each once: from the sparse index's
/// entries of the orgs' counters and of waiting events (an org's first events wait before its
/// counter exists). At most `limit` entries of each are read.
pub async fn orgs_with_events(
    store: &dyn MetaStore,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let mut orgs: Vec<String> = Vec::new();
    let counters = store.query_index(keys::EVENT_ORGS, "\u{7f}", limit).await?;
    let counted = counters
        .iter()
        .filter_map(|key| key.pk.strip_prefix("ORG#"));
    let waiting = store
        .query_index(keys::PENDING_EVENT_ORGS, "\u{7f}", limit)
        .await?;
    let waiting = waiting
        .iter()
        .filter_map(|key| keys::org_of_pending_events(&key.pk));
    for org in counted.chain(waiting) {
        if !orgs.iter().any(|o| o == org) {
            orgs.push(org.to_owned());
        }
    }
    Ok(orgs)
}

/// Decodes a stored event.
pub fn decode(item: &Item) -> Result<ChangeEvent, StoreError> {
    rows::decode(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Kind;
    use crate::model::{Principal, PrincipalKind};

    #[test]
    fn the_first_event_creates_the_counter_and_later_ones_move_it() {
        let by = Principal {
            id: "client:1".into(),
            kind: PrincipalKind::ApiClient,
            name: "etl".into(),
            email: None,
        };
        let draft = || Draft::new(Kind::NamespaceCreated, "acme", "sales", "ns-1", &by);
        let (writes, events, landed) = event_writes(Counter::default(), vec![draft()], 1000, 99);
        assert_eq!(events[0].data.sequence, 1);
        assert_eq!(landed.last, 1);
        assert_eq!(writes[0].condition(), Condition::NotExists);
        assert_eq!(writes[1].key(), &keys::event("acme", 1));
        let Write::Put { item, .. } = &writes[1] else {
            panic!("the event is a put")
        };
        assert_eq!(item.expires_at, Some(99));
        let (writes, events, landed) = event_writes(
            Counter {
                last: 7,
                version: Some(70),
            },
            vec![draft(), draft(), draft()],
            1000,
            99,
        );
        let sequences: Vec<u64> = events.iter().map(|e| e.data.sequence).collect();
        assert_eq!(sequences, [8, 9, 10], "consecutive, in the drafts' order");
        assert_eq!(landed.last, 10);
        assert_eq!(landed.version, Some(71));
        assert_eq!(writes[0].condition(), Condition::VersionIs(70));
        assert_eq!(writes.len(), 4);
        assert_eq!(writes[3].key(), &keys::event("acme", 10));
    }
}
