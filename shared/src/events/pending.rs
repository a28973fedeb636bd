//! Events as a change writes them: numbered per entity, waiting for the org's sequence.
//!
//! A change writes, in its own atomic store write, each of its events as a pending item and
//! moves the counter of each entity the events are about (its table, view or namespace) from
//! `n` to `n + 1`, conditioned on it still being at `n`. Changes of different entities write
//! different items, so an org's changes never queue on one item; changes of one entity were
//! already serialised by the entity's own row. The [`super::sequencer`] later gives waiting
//! events the org's gap-free numbers, in each entity's order.

use serde::{Deserialize, Serialize};

use super::{Draft, EventData, Kind};
use crate::store::rows::{self, keys};
use crate::store::{Condition, MetaStore, StoreError, Write};

/// An entity's counter row: the last number given to one of its events.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct EntityCounterRow {
    pub last: u64,
}

/// An entity's counter as read: its last number and the version to condition on (`None`: the
/// entity has no event yet).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EntityCounter {
    pub last: u64,
    pub version: Option<u64>,
}

/// Reads an entity's counter.
pub async fn read_entity_counter(
    store: &dyn MetaStore,
    org: &str,
    entity: &str,
) -> Result<EntityCounter, StoreError> {
    let key = keys::entity_event_counter(org, entity);
    Ok(match rows::get::<EntityCounterRow>(store, &key).await? {
        Some(v) => EntityCounter {
            last: v.row.last,
            version: Some(v.version),
        },
        None => EntityCounter::default(),
    })
}

/// One waiting event, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PendingEvent {
    pub kind: Kind,
    /// The event's data, its `entity-sequence` set and its org `sequence` still 0.
    pub data: EventData,
    pub entity: String,
    /// When the change was written, which the event keeps as its `time`.
    pub time_ms: u64,
    /// When the numbered event expires (Unix seconds): the change's time plus the retention.
    pub expires_at: u64,
    /// The change's id, shared by its events: a change's events take consecutive numbers.
    pub change: String,
    /// How many events the change has, and this one's place among them.
    pub events_in_change: u32,
    pub position: u32,
}

impl PendingEvent {
    pub fn entity_sequence(&self) -> u64 {
        self.data.entity_sequence.unwrap_or(0)
    }

    /// The event as the org's `sequence`-th.
    pub fn numbered(&self, sequence: u64) -> super::ChangeEvent {
        Draft {
            kind: self.kind,
            data: self.data.clone(),
        }
        .into_event(sequence, self.time_ms)
    }
}

/// The writes that record `drafts` as one change's waiting events: each entity's counter moved
/// past them (in the order the entities first appear), then each event. Also the counters as
/// they are once the writes land.
///
/// `counters` holds the counter read for every entity the drafts name.
pub fn pending_writes(
    org: &str,
    counters: &[(String, EntityCounter)],
    drafts: &[Draft],
    now_ms: u64,
    expires_at: u64,
) -> (Vec<Write>, Vec<(String, EntityCounter)>) {
    let change = uuid::Uuid::new_v4().to_string();
    let mut next: Vec<(String, u64)> = counters
        .iter()
        .map(|(entity, counter)| (entity.clone(), counter.last))
        .collect();
    let mut events = Vec::with_capacity(drafts.len());
    for (position, draft) in drafts.iter().enumerate() {
        let entity = draft.entity();
        let slot = next
            .iter_mut()
            .find(|(e, _)| e == entity)
            .expect("a counter is read for every entity the drafts name");
        slot.1 += 1;
        let mut data = draft.data.clone();
        data.entity_sequence = Some(slot.1);
        events.push(PendingEvent {
            kind: draft.kind,
            data,
            entity: entity.to_owned(),
            time_ms: now_ms,
            expires_at,
            change: change.clone(),
            events_in_change: drafts.len() as u32,
            position: position as u32,
        });
    }
    let mut writes = Vec::with_capacity(counters.len() + events.len());
    let mut landed = Vec::with_capacity(counters.len());
    for ((entity, counter), (_, last)) in counters.iter().zip(&next) {
        let condition = counter
            .version
            .map_or(Condition::NotExists, Condition::VersionIs);
        let write = rows::put(
            keys::entity_event_counter(org, entity),
            &EntityCounterRow { last: *last },
            condition,
        );
        let version = match &write {
            Write::Put { item, .. } => Some(item.version),
            _ => None,
        };
        landed.push((
            entity.clone(),
            EntityCounter {
                last: *last,
                version,
            },
        ));
        writes.push(write);
    }
    for event in &events {
        writes.push(rows::put_indexed(
            keys::pending_event(org, &event.entity, event.entity_sequence()),
            event,
            Condition::NotExists,
            Some(keys::pending_event_org_entry(org)),
        ));
    }
    (writes, landed)
}

/// The entities `drafts` are about, each once, in the order they first appear.
pub fn entities(drafts: &[Draft]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for draft in drafts {
        if !out.iter().any(|e| e == draft.entity()) {
            out.push(draft.entity().to_owned());
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::model::{Principal, PrincipalKind};

    fn by() -> Principal {
        Principal {
            id: "client:1".into(),
            kind: PrincipalKind::ApiClient,
            name: "etl".into(),
            email: None,
        }
    }

    /// A commit's event in org `acme` about table `table` (its uuid too).
    pub(in crate::events) fn commit(table: &str) -> Draft {
        Draft::new(Kind::TableCommitted, "acme", "sales", "ns-1", &by()).table(table, table)
    }

    #[test]
    fn each_entity_numbers_its_own_events_and_a_change_shares_one_id() {
        let drafts = [commit("t-1"), commit("t-2"), commit("t-1")];
        let entities = entities(&drafts);
        assert_eq!(entities, ["t-1", "t-2"]);
        let counters = vec![
            (
                "t-1".to_owned(),
                EntityCounter {
                    last: 4,
                    version: Some(9),
                },
            ),
            ("t-2".to_owned(), EntityCounter::default()),
        ];
        let (writes, landed) = pending_writes("acme", &counters, &drafts, 1000, 99);
        assert_eq!(writes.len(), 5, "two counters and three events");
        assert_eq!(writes[0].condition(), Condition::VersionIs(9));
        assert_eq!(writes[1].condition(), Condition::NotExists);
        assert_eq!(landed[0].1.last, 6);
        assert_eq!(landed[0].1.version, Some(10));
        assert_eq!(landed[1].1.last, 1);
        let pending: Vec<PendingEvent> = writes[2..]
            .iter()
            .map(|w| match w {
                Write::Put { item, .. } => {
                    assert_eq!(item.index, Some(keys::pending_event_org_entry("acme")));
                    rows::decode(item).unwrap()
                }
                _ => panic!("events are puts"),
            })
            .collect();
        let numbers: Vec<(&str, u64)> = pending
            .iter()
            .map(|p| (p.entity.as_str(), p.entity_sequence()))
            .collect();
        assert_eq!(numbers, [("t-1", 5), ("t-2", 1), ("t-1", 6)]);
        assert!(pending.iter().all(|p| p.change == pending[0].change));
        assert_eq!(pending[2].position, 2);
        assert_eq!(pending[2].events_in_change, 3);
        assert_eq!(writes[4].key(), &keys::pending_event("acme", "t-1", 6));
    }
}
