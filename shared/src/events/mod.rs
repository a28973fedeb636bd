//! Change events: what happened in the catalog, as CloudEvents 1.0 JSON.
//!
//! Every change (a table created, committed, renamed or dropped; a namespace created, changed,
//! dropped, restored or purged; a grant or a visibility changed) is recorded as one event in the
//! same atomic store write as the change itself (the outbox, see [`outbox`]): an event exists
//! exactly when its change landed. Events carry a gap-free sequence per org, so a reader knows
//! it missed nothing. They are published afterwards, at least once and in order (DynamoDB's
//! stream and the `floe-events` function on AWS, [`publish`] beside `floe serve`), and read back
//! through `GET /api/v1/orgs/{org}/events`.

pub mod commit;
pub mod outbox;
pub mod pending;
pub mod publish;
pub mod sequencer;

use serde::{Deserialize, Serialize};

use crate::model::{Action, Principal, Visibility};

/// CloudEvents' `specversion`.
pub const SPEC_VERSION: &str = "1.0";
/// `datacontenttype` of every event: `data` is a JSON object.
pub const CONTENT_TYPE: &str = "application/json";
/// At most this many added snapshots are described one by one in a commit's event (the rest
/// are counted), so an event stays far below DynamoDB's and EventBridge's item limits.
pub const MAX_DESCRIBED_SNAPSHOTS: usize = 100;
/// The most an event's JSON may take. It rides in the change's own store write (DynamoDB: 400 KB
/// an item) and goes on EventBridge (256 KB an entry): summaries are client-written and may be
/// large (a serialized query plan), so a bigger event sheds them, then snapshots and property
/// names from the end (the counts stay), rather than fail the change it describes.
pub const MAX_EVENT_BYTES: usize = 64 * 1024;

/// What changed; each is one CloudEvents `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    #[serde(rename = "io.floe.table.created")]
    TableCreated,
    #[serde(rename = "io.floe.table.committed")]
    TableCommitted,
    #[serde(rename = "io.floe.table.renamed")]
    TableRenamed,
    #[serde(rename = "io.floe.table.dropped")]
    TableDropped,
    #[serde(rename = "io.floe.table.registered")]
    TableRegistered,
    #[serde(rename = "io.floe.table.unregistered")]
    TableUnregistered,
    #[serde(rename = "io.floe.table.restored")]
    TableRestored,
    #[serde(rename = "io.floe.table.purged")]
    TablePurged,
    #[serde(rename = "io.floe.table.maintained")]
    TableMaintained,
    #[serde(rename = "io.floe.view.created")]
    ViewCreated,
    #[serde(rename = "io.floe.view.replaced")]
    ViewReplaced,
    #[serde(rename = "io.floe.view.renamed")]
    ViewRenamed,
    #[serde(rename = "io.floe.view.dropped")]
    ViewDropped,
    #[serde(rename = "io.floe.view.registered")]
    ViewRegistered,
    #[serde(rename = "io.floe.namespace.created")]
    NamespaceCreated,
    #[serde(rename = "io.floe.namespace.properties-updated")]
    NamespacePropertiesUpdated,
    #[serde(rename = "io.floe.namespace.dropped")]
    NamespaceDropped,
    #[serde(rename = "io.floe.namespace.restored")]
    NamespaceRestored,
    #[serde(rename = "io.floe.namespace.purged")]
    NamespacePurged,
    #[serde(rename = "io.floe.grant.changed")]
    GrantChanged,
    #[serde(rename = "io.floe.namespace.visibility-changed")]
    VisibilityChanged,
}

impl Kind {
    /// The CloudEvents `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::TableCreated => "io.floe.table.created",
            Kind::TableCommitted => "io.floe.table.committed",
            Kind::TableRenamed => "io.floe.table.renamed",
            Kind::TableDropped => "io.floe.table.dropped",
            Kind::TableRegistered => "io.floe.table.registered",
            Kind::TableUnregistered => "io.floe.table.unregistered",
            Kind::TableRestored => "io.floe.table.restored",
            Kind::TablePurged => "io.floe.table.purged",
            Kind::TableMaintained => "io.floe.table.maintained",
            Kind::ViewCreated => "io.floe.view.created",
            Kind::ViewReplaced => "io.floe.view.replaced",
            Kind::ViewRenamed => "io.floe.view.renamed",
            Kind::ViewDropped => "io.floe.view.dropped",
            Kind::ViewRegistered => "io.floe.view.registered",
            Kind::NamespaceCreated => "io.floe.namespace.created",
            Kind::NamespacePropertiesUpdated => "io.floe.namespace.properties-updated",
            Kind::NamespaceDropped => "io.floe.namespace.dropped",
            Kind::NamespaceRestored => "io.floe.namespace.restored",
            Kind::NamespacePurged => "io.floe.namespace.purged",
            Kind::GrantChanged => "io.floe.grant.changed",
            Kind::VisibilityChanged => "io.floe.namespace.visibility-changed",
        }
    }
}

/// One change event, as stored, published and read back: a CloudEvents 1.0 structured-mode
/// JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeEvent {
    pub specversion: String,
    /// The org's sequence number in decimal: unique within `source`, so (source, id) names one
    /// event and a consumer that receives one twice (delivery is at least once) can tell.
    pub id: String,
    /// `/orgs/<org>`.
    pub source: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    /// `namespaces/<ns>` or `namespaces/<ns>/tables/<table>`.
    pub subject: String,
    /// When the change was written (RFC 3339, UTC).
    pub time: String,
    pub datacontenttype: String,
    /// CloudEvents' sequence extension: the org's sequence, zero-padded to 20 digits so that
    /// string order is sequence order, as the extension asks.
    pub sequence: String,
    pub data: EventData,
}

/// The body of an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct EventData {
    pub org: String,
    /// The org's sequence number: 1, 2, 3, ... with no gaps.
    pub sequence: u64,
    /// The event's number among the events of the entity it is about, by id: its table, its
    /// view, or its namespace (for the namespace's own events, its grants and visibility).
    /// 1, 2, 3, ... with no gaps, in the order the entity's changes landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_sequence: Option<u64>,
    pub namespace: String,
    /// The namespace's id (a name can be dropped and used again).
    pub namespace_uuid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_uuid: Option<String>,
    /// The view a `io.floe.view.*` event is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_metadata_location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_location: Option<String>,
    pub principal: EventPrincipal,
    /// A commit's added snapshots, in the order they were added (at most
    /// [`MAX_DESCRIBED_SNAPSHOTS`]; `added-snapshot-count` counts them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_snapshots: Vec<AddedSnapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_snapshot_count: Option<u64>,
    /// A commit's branch and tag moves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ref_changes: Vec<RefChange>,
    /// A rename's destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_to: Option<TableName>,
    /// Namespace properties set (`properties-updated`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updated_properties: Vec<String>,
    /// Namespace properties removed (`properties-updated`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_properties: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<Visibility>,
    /// What a maintenance run deleted (`io.floe.table.maintained`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<MaintenanceCounts>,
}

/// A maintenance run's deletions, as its event tells them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MaintenanceCounts {
    pub snapshots_expired: u64,
    pub files_deleted: u64,
    pub bytes_deleted: u64,
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventPrincipal {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

impl From<&Principal> for EventPrincipal {
    fn from(principal: &Principal) -> Self {
        Self {
            id: principal.id.clone(),
            name: principal.name.clone(),
            email: principal.email.clone(),
        }
    }
}

/// A snapshot a commit added, with its summary as written (author stamped by the catalog).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AddedSnapshot {
    pub snapshot_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_snapshot_id: Option<i64>,
    pub timestamp_ms: i64,
    pub operation: String,
    #[serde(default)]
    pub summary: std::collections::BTreeMap<String, String>,
}

/// A branch or tag moved, created (`previous-snapshot-id` absent) or removed (`snapshot-id`
/// absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RefChange {
    #[serde(rename = "ref")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_snapshot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableName {
    pub namespace: String,
    pub table: String,
}

/// A grant set (`action` present) or removed (`action` absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantChange {
    pub principal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
}

/// An event before the outbox numbers and dates it.
#[derive(Debug, Clone)]
pub struct Draft {
    pub kind: Kind,
    pub data: EventData,
}

impl Draft {
    /// A draft about a namespace (and, with [`Self::table`], one of its tables).
    pub fn new(kind: Kind, org: &str, namespace: &str, namespace_id: &str, by: &Principal) -> Self {
        Self {
            kind,
            data: EventData {
                org: org.to_owned(),
                sequence: 0,
                entity_sequence: None,
                namespace: namespace.to_owned(),
                namespace_uuid: namespace_id.to_owned(),
                table: None,
                table_uuid: None,
                view: None,
                view_uuid: None,
                previous_metadata_location: None,
                metadata_location: None,
                principal: by.into(),
                added_snapshots: Vec::new(),
                added_snapshot_count: None,
                ref_changes: Vec::new(),
                renamed_to: None,
                updated_properties: Vec::new(),
                removed_properties: Vec::new(),
                grant: None,
                visibility: None,
                maintenance: None,
            },
        }
    }

    /// Names the table the event is about.
    pub fn table(mut self, name: &str, uuid: &str) -> Self {
        self.data.table = Some(name.to_owned());
        self.data.table_uuid = Some(uuid.to_owned());
        self
    }

    /// Names the view the event is about.
    pub fn view(mut self, name: &str, uuid: &str) -> Self {
        self.data.view = Some(name.to_owned());
        self.data.view_uuid = Some(uuid.to_owned());
        self
    }

    /// The metadata pointer's move.
    pub fn metadata(mut self, previous: Option<&str>, current: Option<&str>) -> Self {
        self.data.previous_metadata_location = previous.map(str::to_owned);
        self.data.metadata_location = current.map(str::to_owned);
        self
    }

    /// The id of the entity the event is about, which numbers it in
    /// [`EventData::entity_sequence`]: the table, else the view, else the namespace.
    pub fn entity(&self) -> &str {
        let data = &self.data;
        data.table_uuid
            .as_deref()
            .or(data.view_uuid.as_deref())
            .unwrap_or(&data.namespace_uuid)
    }

    /// The event, numbered `sequence` and dated `time_ms`.
    pub fn into_event(self, sequence: u64, time_ms: u64) -> ChangeEvent {
        let mut data = self.data;
        data.sequence = sequence;
        fit(&mut data, MAX_EVENT_BYTES);
        let subject = match (&data.table, &data.view) {
            (Some(table), _) => format!("namespaces/{}/tables/{table}", data.namespace),
            (None, Some(view)) => format!("namespaces/{}/views/{view}", data.namespace),
            (None, None) => format!("namespaces/{}", data.namespace),
        };
        ChangeEvent {
            specversion: SPEC_VERSION.to_owned(),
            id: sequence.to_string(),
            source: format!("/orgs/{}", data.org),
            kind: self.kind,
            subject,
            time: rfc3339(time_ms),
            datacontenttype: CONTENT_TYPE.to_owned(),
            sequence: sequence_text(sequence),
            data,
        }
    }
}

/// Sheds what may be shed until the data's JSON takes at most `limit` bytes: first every
/// snapshot summary, then described snapshots and property names from the end. Counts stay:
/// `added-snapshot-count` says how many snapshots the commit added.
fn fit(data: &mut EventData, limit: usize) {
    let size = |data: &EventData| serde_json::to_vec(data).map_or(0, |v| v.len());
    if size(data) <= limit {
        return;
    }
    for snapshot in &mut data.added_snapshots {
        snapshot.summary.clear();
    }
    while size(data) > limit {
        let shed = data.added_snapshots.pop().is_some()
            || data.updated_properties.pop().is_some()
            || data.removed_properties.pop().is_some();
        if !shed {
            return;
        }
    }
}

/// The sequence extension's text: fixed width, so that string order is number order.
pub fn sequence_text(sequence: u64) -> String {
    format!("{sequence:020}")
}

/// A time in milliseconds as RFC 3339 (UTC, milliseconds), as events and the management API
/// show times.
pub fn rfc3339(time_ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(time_ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PrincipalKind;

    fn alice() -> Principal {
        Principal {
            id: "user:alice".into(),
            kind: PrincipalKind::User,
            name: "Alice".into(),
            email: Some("alice@example.com".into()),
        }
    }

    #[test]
    fn events_are_cloudevents_with_the_sequence_extension() {
        let event = Draft::new(Kind::TableCommitted, "acme", "sales", "ns-1", &alice())
            .table("orders", "t-1")
            .metadata(Some("s3://b/1.json"), Some("s3://b/2.json"))
            .into_event(42, 1_767_225_600_123);
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["specversion"], "1.0");
        assert_eq!(json["type"], "io.floe.table.committed");
        assert_eq!(json["source"], "/orgs/acme");
        assert_eq!(json["id"], "42");
        assert_eq!(json["sequence"], "00000000000000000042");
        assert_eq!(json["subject"], "namespaces/sales/tables/orders");
        assert_eq!(json["time"], "2026-01-01T00:00:00.123Z");
        assert_eq!(json["datacontenttype"], "application/json");
        assert_eq!(json["data"]["sequence"], 42);
        assert_eq!(json["data"]["table-uuid"], "t-1");
        assert_eq!(json["data"]["previous-metadata-location"], "s3://b/1.json");
        assert_eq!(json["data"]["principal"]["email"], "alice@example.com");
        assert!(json["data"].get("grant").is_none());
        let back: ChangeEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn a_large_event_sheds_summaries_then_snapshots_but_keeps_its_counts() {
        let mut draft = Draft::new(Kind::TableCommitted, "acme", "sales", "ns-1", &alice())
            .table("orders", "t-1");
        let plan = "x".repeat(4096);
        for id in 0..100 {
            draft.data.added_snapshots.push(AddedSnapshot {
                snapshot_id: id,
                parent_snapshot_id: None,
                timestamp_ms: 0,
                operation: "append".into(),
                summary: [("arraylake.source.query".to_owned(), plan.clone())].into(),
            });
        }
        draft.data.added_snapshot_count = Some(100);
        let event = draft.clone().into_event(1, 0);
        assert!(serde_json::to_vec(&event).unwrap().len() < MAX_EVENT_BYTES + 1024);
        assert_eq!(event.data.added_snapshots.len(), 100);
        assert!(
            event
                .data
                .added_snapshots
                .iter()
                .all(|s| s.summary.is_empty())
        );
        assert_eq!(event.data.added_snapshot_count, Some(100));

        let mut tight = draft.data.clone();
        fit(&mut tight, 2048);
        assert!(serde_json::to_vec(&tight).unwrap().len() <= 2048);
        assert!(tight.added_snapshots.len() < 100);
        assert_eq!(tight.added_snapshot_count, Some(100));

        // Small events are left alone.
        let small = Draft::new(Kind::TableCommitted, "acme", "sales", "ns-1", &alice());
        let mut data = small.data.clone();
        data.updated_properties.push("k".into());
        fit(&mut data, MAX_EVENT_BYTES);
        assert_eq!(data.updated_properties, ["k"]);
    }

    #[test]
    fn every_kind_names_its_type() {
        for kind in [
            Kind::TableCreated,
            Kind::TableCommitted,
            Kind::TableRenamed,
            Kind::TableDropped,
            Kind::TableRegistered,
            Kind::TableUnregistered,
            Kind::ViewCreated,
            Kind::ViewReplaced,
            Kind::ViewRenamed,
            Kind::ViewDropped,
            Kind::ViewRegistered,
            Kind::NamespaceCreated,
            Kind::NamespacePropertiesUpdated,
            Kind::NamespaceDropped,
            Kind::NamespaceRestored,
            Kind::NamespacePurged,
            Kind::GrantChanged,
            Kind::VisibilityChanged,
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }
}
