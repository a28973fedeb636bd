//! Typed catalog rows and where each lives in the single-table key space.
//!
//! Every row is stored as JSON in an item's body; the item's version counts its writes and is
//! what conditional writes compare. Keys follow the design's DynamoDB sketch.

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::{Condition, Item, Key, MetaStore, StoreError, Token, Write};
use crate::model::{OrgRole, Principal};

/// Who holds a name in an org: namespaces and repos share one case-insensitive set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NameClaimRow {
    pub name: String,
    pub holder: NameHolder,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NameHolder {
    Namespace { id: String },
    Repo,
}

/// A storage prefix claimed by a namespace or a table override (the collision guard).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PrefixClaimRow {
    pub bucket_root: String,
    pub prefix: String,
    pub owner: String,
}

/// A table directory claimed inside a namespace, so that no two tables (live or dropped, whose
/// files stay) ever share one. Kept until the namespace is purged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DirectoryClaimRow {
    pub directory: String,
    pub table_id: String,
}

/// An api-client token, stored by the SHA-256 of its secret only.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenRow {
    pub principal: Principal,
    pub created_ms: u64,
}

/// Membership of a principal in an org.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemberRow {
    pub principal_id: String,
    pub role: OrgRole,
}

/// A live AUTHENTICATED_PUBLIC namespace, indexed by org.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PublicNamespaceRow {
    pub namespace_id: String,
    pub name: String,
}

/// An api client of an org, as the management API lists it; its token is stored only as the
/// token row's key (a hash) and named here so that deleting the client revokes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApiClientRow {
    pub id: String,
    pub name: String,
    pub email: Option<String>,
    /// `None`: a grant-only client, member of no org.
    #[serde(default)]
    pub role: Option<OrgRole>,
    pub token_hash: String,
    pub created_ms: u64,
}

/// The other side of a membership: which orgs a principal belongs to (for `GET /api/v1/me`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MembershipRow {
    pub org: String,
    pub role: OrgRole,
}

/// A service administrator: full access in every org.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServiceAdminRow {
    pub principal_id: String,
    pub created_ms: u64,
}

/// How far the purge of a namespace has got: written after every deleted batch so that an
/// admin waiting on an immediate delete sees objects go; removed with the namespace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PurgeProgressRow {
    pub objects_deleted: u64,
    pub updated_ms: u64,
}

/// A signed-in web view session, stored under the SHA-256 of its random id (the cookie's value
/// never reaches the store). An api-client session names its token's hash, so deleting the api
/// client ends the session too; `expires_at` lets the store's TTL reap it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionRow {
    pub principal: Principal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_hash: Option<String>,
    pub created_ms: u64,
    /// Unix seconds after which the session is refused (and the row may be reaped).
    pub expires_at: u64,
}

/// Key builders: the one place that knows the key layout.
///
/// A key joins its components with `#`. Every component but one goes through
/// [`part`](keys::part), which never yields `#`, so the one kept verbatim is whatever the
/// others leave: no two values give the same key, and a query on a component's prefix ending
/// in `#` (such as [`grants_on`](keys::grants_on)) finds that value's rows only, never those of
/// a value that merely starts the same. The verbatim one is a key's last component (it runs to
/// the key's end), except in [`prefix_claim`](keys::prefix_claim). A part of a value without
/// `#` or control characters (all names, ids and generated prefixes) is the value itself, so the
/// keys of rows written before stay what they were.
///
/// The one exception is a grant's listing row ([`grant`](keys::grant)), whose table name and
/// principal (both may hold `#`) were once joined verbatim; see there.
pub mod keys {
    use super::Key;

    /// Marks an escaped component. Table names and principals never hold control characters,
    /// so no key written before holds one.
    const ESCAPED: char = '\u{1}';

    /// A key component that other components follow: the value itself when it holds no `#` and
    /// no control character, otherwise `ESCAPED` followed by the value with `%` and `#`
    /// percent-encoded. Never holds `#`; two values never give the same part.
    pub fn part(value: &str) -> std::borrow::Cow<'_, str> {
        if !value.contains(|c: char| c == '#' || c.is_control()) {
            return value.into();
        }
        let mut out = String::with_capacity(value.len() + 8);
        out.push(ESCAPED);
        for c in value.chars() {
            match c {
                '%' => out.push_str("%25"),
                '#' => out.push_str("%23"),
                c => out.push(c),
            }
        }
        out.into()
    }

    pub fn org(org: &str) -> Key {
        Key::new(format!("ORG#{org}"), "ORG")
    }
    pub fn bucket(org: &str, nickname: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("BUCKET#{nickname}"))
    }
    pub fn name_claim(org: &str, name: &str) -> Key {
        Key::new(
            format!("ORG#{org}"),
            format!("NAME#{}", name.to_lowercase()),
        )
    }
    pub fn namespace(org: &str, name: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("NS#{name}"))
    }
    pub const NAMESPACE_PREFIX: &str = "NS#";
    pub fn org_partition(org: &str) -> String {
        format!("ORG#{org}")
    }
    /// The bucket root (an admin's, which may hold `#`) is the verbatim component and the
    /// generated prefix the part, which holds no `#`: the root is all before the key's last
    /// `#`, and claims keep the keys they were written under.
    pub fn prefix_claim(bucket_root: &str, prefix: &str) -> Key {
        Key::new(format!("PREFIX#{bucket_root}#{}", part(prefix)), "PREFIX")
    }
    pub fn table(namespace_id: &str, name: &str) -> Key {
        Key::new(format!("NS#{namespace_id}"), format!("TABLE#{name}"))
    }
    pub const TABLE_PREFIX: &str = "TABLE#";
    /// A view, beside the tables of its namespace: a name is a table's or a view's, never both.
    pub fn view(namespace_id: &str, name: &str) -> Key {
        Key::new(format!("NS#{namespace_id}"), format!("{VIEW_PREFIX}{name}"))
    }
    pub const VIEW_PREFIX: &str = "VIEW#";
    /// A dropped table, recoverable until its purge, by its uuid.
    pub fn dropped_table(namespace_id: &str, table_uuid: &str) -> Key {
        Key::new(
            namespace_partition(namespace_id),
            format!("{DROPPED_TABLE_PREFIX}{table_uuid}"),
        )
    }
    pub const DROPPED_TABLE_PREFIX: &str = "DROPPED#";
    /// A table's maintenance state (last run, failures), by the table's uuid.
    pub fn maintenance_state(namespace_id: &str, table_uuid: &str) -> Key {
        Key::new(
            namespace_partition(namespace_id),
            format!("{MAINTENANCE_STATE_PREFIX}{table_uuid}"),
        )
    }
    pub const MAINTENANCE_STATE_PREFIX: &str = "MAINT#";
    /// Partition of the sparse index of tables by when their maintenance is due.
    pub const MAINTENANCE_DUE: &str = "MAINT_DUE";
    /// Index entry of a table's maintenance state, ordered by when it is due.
    pub fn maintenance_due(due_ms: u64, namespace_id: &str, table_uuid: &str) -> Key {
        Key::new(
            MAINTENANCE_DUE,
            format!("{}#{namespace_id}#{table_uuid}", deleted_sort_key(due_ms)),
        )
    }
    /// Where the sweep that keeps the due index complete has got to (one row).
    pub fn maintenance_sweep() -> Key {
        Key::new("MAINT_SWEEP", "CURSOR")
    }
    /// Partition of the sparse index entry of every dropped table.
    pub const DROPPED_TABLES: &str = "DROPPED_TABLES";
    /// Index entry of a dropped table, ordered by when the purge takes it.
    pub fn dropped_table_due(due_ms: u64, namespace_id: &str, table_uuid: &str) -> Key {
        Key::new(
            DROPPED_TABLES,
            format!("{}#{namespace_id}#{table_uuid}", deleted_sort_key(due_ms)),
        )
    }
    /// Claim of a table directory (its last path segment) inside a namespace.
    pub fn directory_claim(namespace_id: &str, segment: &str) -> Key {
        Key::new(format!("NS#{namespace_id}"), format!("DIR#{segment}"))
    }
    pub const DIRECTORY_PREFIX: &str = "DIR#";
    /// The purge's progress on a namespace (one row, in the namespace's partition).
    pub fn purge_progress(namespace_id: &str) -> Key {
        Key::new(namespace_partition(namespace_id), "PURGE_PROGRESS")
    }
    pub fn namespace_partition(namespace_id: &str) -> String {
        format!("NS#{namespace_id}")
    }
    /// Partition of the sparse index entry of every soft-deleted namespace.
    pub const DELETED_NAMESPACES: &str = "DELETED_NS";
    /// Index entry of a soft-deleted namespace, ordered by deletion time.
    pub fn deleted_namespace(deleted_ms: u64, org: &str, name: &str) -> Key {
        Key::new(
            DELETED_NAMESPACES,
            format!("{}#{}#{name}", deleted_sort_key(deleted_ms), part(org)),
        )
    }
    /// The index sort key prefix of a deletion time (zero-padded, so order is time order).
    pub fn deleted_sort_key(deleted_ms: u64) -> String {
        format!("{deleted_ms:020}")
    }
    /// A web view session, by the SHA-256 (hex) of its id.
    pub fn session(hash_hex: &str) -> Key {
        Key::new(format!("SESSION#{hash_hex}"), "SESSION")
    }
    pub fn token(hash_hex: &str) -> Key {
        Key::new(format!("TOKEN#{hash_hex}"), "TOKEN")
    }
    pub fn member(org: &str, principal_id: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("MEMBER#{principal_id}"))
    }
    /// A grant, in its namespace's partition (what the namespace's grant listing reads):
    /// `GRANT#<table part>#<principal part>`, the table part empty for a namespace grant.
    ///
    /// Both are [`part`]s, the principal too: rows written before joined both verbatim, and
    /// there the key of `a`'s grant to `user:x#user:y` was that of `a#user:x`'s grant to
    /// `user:y`. A value with `#` is now escaped and so marked with a control character that no
    /// earlier key holds, so a grant's key is either the one it always had or one no earlier row
    /// has: never an earlier row of another grant. Those earlier rows stay where they are until
    /// their grant is next written ([`legacy_grant`]).
    pub fn grant(namespace_id: &str, table: Option<&str>, principal: &str) -> Key {
        Key::new(
            namespace_partition(namespace_id),
            format!("{}{}", grants_on(table), part(principal)),
        )
    }
    pub const GRANT_PREFIX: &str = "GRANT#";
    /// The key prefix of every grant on one table (`None`: on the namespace itself), in the
    /// namespace's partition. Rows written before under [`legacy_grant`] keys may also lie under
    /// [`legacy_grants_on`]; either query also finds other grants' earlier rows, so rows are
    /// matched by what they say.
    pub fn grants_on(table: Option<&str>) -> String {
        format!("{GRANT_PREFIX}{}#", part(table.unwrap_or("")))
    }
    /// Where a grant's listing row was written before components were escaped.
    pub fn legacy_grant(namespace_id: &str, table: Option<&str>, principal: &str) -> Key {
        Key::new(
            namespace_partition(namespace_id),
            format!("{GRANT_PREFIX}{}#{principal}", table.unwrap_or("")),
        )
    }
    /// The prefix that [`legacy_grant`] keys of grants on `table` start with.
    pub fn legacy_grants_on(table: Option<&str>) -> String {
        format!("{GRANT_PREFIX}{}#", table.unwrap_or(""))
    }
    /// The same grant in its grantee's partition (what resolving a principal's access reads).
    pub fn grantee(org: &str, principal: &str, namespace_id: &str, table: Option<&str>) -> Key {
        Key::new(
            grantee_partition(org, principal),
            format!(
                "{GRANT_PREFIX}{}#{}",
                part(namespace_id),
                table.unwrap_or("")
            ),
        )
    }
    pub fn grantee_partition(org: &str, principal: &str) -> String {
        format!("GRANTEE#{}#{principal}", part(org))
    }
    pub fn team(org: &str, name: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("{TEAM_PREFIX}{name}"))
    }
    pub const TEAM_PREFIX: &str = "TEAM#";
    /// A team's member, in the team's partition (what listing the team reads).
    pub fn team_member(org: &str, team: &str, principal: &str) -> Key {
        Key::new(
            team_members_partition(org, team),
            format!("MEMBER#{principal}"),
        )
    }
    pub fn team_members_partition(org: &str, team: &str) -> String {
        format!("TEAM#{}#{team}", part(org))
    }
    /// The same membership in the principal's partition (what resolving access reads).
    pub fn teams_of(org: &str, principal: &str, team: &str) -> Key {
        Key::new(
            teams_of_partition(org, principal),
            format!("{TEAM_PREFIX}{team}"),
        )
    }
    pub fn teams_of_partition(org: &str, principal: &str) -> String {
        format!("TEAMS#{}#{principal}", part(org))
    }
    pub fn api_client(org: &str, id: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("{API_CLIENT_PREFIX}{id}"))
    }
    pub const API_CLIENT_PREFIX: &str = "CLIENT#";
    pub fn membership(principal_id: &str, org: &str) -> Key {
        Key::new(memberships_partition(principal_id), format!("ORG#{org}"))
    }
    pub fn memberships_partition(principal_id: &str) -> String {
        format!("MEMBERSHIPS#{principal_id}")
    }
    pub fn service_admin(principal_id: &str) -> Key {
        Key::new(format!("ADMIN#{principal_id}"), "SERVICE_ADMIN")
    }
    /// A live AUTHENTICATED_PUBLIC namespace of an org, so that whether an org shows anything
    /// to outsiders is one read.
    pub fn public_namespace(org: &str, name: &str) -> Key {
        Key::new(public_partition(org), format!("NS#{name}"))
    }
    pub fn public_partition(org: &str) -> String {
        format!("PUBLIC#{org}")
    }
    /// The org's event sequence: the last number given to one of its change events.
    pub fn event_counter(org: &str) -> Key {
        Key::new(format!("ORG#{org}"), "EVENTS")
    }
    /// One change event of an org, by sequence number (zero-padded: key order is sequence order).
    pub fn event(org: &str, sequence: u64) -> Key {
        Key::new(events_partition(org), event_sort_key(sequence))
    }
    pub fn events_partition(org: &str) -> String {
        format!("EVENTS#{org}")
    }
    pub fn event_sort_key(sequence: u64) -> String {
        format!("{sequence:020}")
    }
    /// Sparse index partition listing every org that has events (its counter's entry), so a
    /// publisher finds them without a scan.
    pub const EVENT_ORGS: &str = "EVENT_ORGS";
    pub fn event_org_entry(org: &str) -> Key {
        Key::new(EVENT_ORGS, org)
    }
    /// The last number given to an event of one entity (a table, view or namespace, by id):
    /// each entity's events are numbered 1, 2, 3, ... on its own item, so changes of different
    /// entities never write the same one.
    pub fn entity_event_counter(org: &str, entity: &str) -> Key {
        Key::new(format!("EVENTS_OF#{}#{}", part(org), part(entity)), "LAST")
    }
    /// A change's event not yet numbered in its org's sequence, by entity and the entity's
    /// number (zero-padded), so an entity's waiting events are read in their order. An org's
    /// waiting events are spread over [`PENDING_EVENT_SHARDS`] partitions by entity, so that
    /// the org's write rate is not one partition's.
    pub fn pending_event(org: &str, entity: &str, entity_sequence: u64) -> Key {
        Key::new(
            pending_events_partition(org, pending_event_shard(entity)),
            format!("{}#{entity_sequence:020}", part(entity)),
        )
    }
    pub const PENDING_EVENT_SHARDS: u32 = 16;
    const PENDING_EVENTS_PREFIX: &str = "PENDING_EVENTS#";
    /// The shard of an entity's waiting events: a hash that every version of Floe computes
    /// alike (CRC-32 of the id).
    pub fn pending_event_shard(entity: &str) -> u32 {
        crc32fast::hash(entity.as_bytes()) % PENDING_EVENT_SHARDS
    }
    pub fn pending_events_partition(org: &str, shard: u32) -> String {
        format!("{PENDING_EVENTS_PREFIX}{org}#{shard:02}")
    }
    /// The org whose waiting events partition `pk` is, if it is one.
    pub fn org_of_pending_events(pk: &str) -> Option<&str> {
        pk.strip_prefix(PENDING_EVENTS_PREFIX)?
            .rsplit_once('#')
            .map(|(org, _)| org)
    }
    /// Sparse index partition with an entry per waiting event (sort key: its org), so a
    /// sequencer finds the orgs that have some without a scan.
    pub const PENDING_EVENT_ORGS: &str = "PENDING_EVENT_ORGS";
    pub fn pending_event_org_entry(org: &str) -> Key {
        Key::new(PENDING_EVENT_ORGS, org)
    }
    /// How far one publisher (sink) has delivered an org's events.
    pub fn event_cursor(org: &str, sink: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("EVENTS_PUBLISHED#{sink}"))
    }
}

/// A row read with the version (and write token) it was read at.
#[derive(Debug, Clone)]
pub struct Versioned<T> {
    pub row: T,
    pub version: u64,
    pub token: Option<Token>,
}

/// Decodes an item's body into a row.
pub fn decode<T: DeserializeOwned>(item: &Item) -> Result<T, StoreError> {
    serde_json::from_slice(&item.body).map_err(|e| StoreError::Corrupt {
        key: item.key.clone(),
        reason: e.to_string(),
    })
}

/// The rows of partition `pk` under `sk_prefix` (after `after`) that `keep` picks, up to `want`,
/// read in batches.
pub async fn collect<T: DeserializeOwned>(
    store: &dyn MetaStore,
    pk: &str,
    sk_prefix: &str,
    mut after: Option<String>,
    want: usize,
    keep: impl Fn(&T) -> bool,
) -> Result<Vec<T>, StoreError> {
    const BATCH: usize = 256;
    let mut out = Vec::new();
    loop {
        let batch = store.query(pk, sk_prefix, after.as_deref(), BATCH).await?;
        let exhausted = batch.len() < BATCH;
        after = batch.last().map(|item| item.key.sk.clone());
        for item in &batch {
            let row: T = decode(item)?;
            if keep(&row) {
                out.push(row);
                if out.len() >= want {
                    return Ok(out);
                }
            }
        }
        if exhausted {
            return Ok(out);
        }
    }
}

/// Reads and decodes one row.
pub async fn get<T: DeserializeOwned>(
    store: &dyn MetaStore,
    key: &Key,
) -> Result<Option<Versioned<T>>, StoreError> {
    match store.get(key).await? {
        Some(item) => versioned(&item).map(Some),
        None => Ok(None),
    }
}

/// An item decoded into its row, with the version and token a write can be conditioned on.
pub fn versioned<T: DeserializeOwned>(item: &Item) -> Result<Versioned<T>, StoreError> {
    Ok(Versioned {
        row: decode(item)?,
        version: item.version,
        token: item.token,
    })
}

/// The version of a row written without a version condition: random, so that a row deleted and
/// written again under the same key never repeats the versions of its earlier incarnation, and a
/// `VersionIs` read from that one can never hold for the new one. Below 2^53, exact everywhere.
fn first_version() -> u64 {
    rand::random_range(1u64 << 32..1u64 << 53)
}

/// A put of `row` at `key`: a fresh random version when created, `expected + 1` when replacing.
pub fn put<T: Serialize>(key: Key, row: &T, condition: Condition) -> Write {
    put_indexed(key, row, condition, None)
}

/// A put that also places the item in the sparse index under `index`.
pub fn put_indexed<T: Serialize>(
    key: Key,
    row: &T,
    condition: Condition,
    index: Option<Key>,
) -> Write {
    let version = match condition {
        Condition::VersionIs(v) => v + 1,
        _ => first_version(),
    };
    put_item(key, row, condition, version, index, None)
}

/// A put of a row that the store may delete by itself after `expires_at` (Unix seconds).
pub fn put_expiring<T: Serialize>(
    key: Key,
    row: &T,
    condition: Condition,
    expires_at: u64,
) -> Write {
    let mut write = put(key, row, condition);
    if let Write::Put { item, .. } = &mut write {
        item.expires_at = Some(expires_at);
    }
    write
}

/// A put of a row that carries a write token, drawn afresh here for this write.
/// `previous_version` is the version read (`None` for a new row).
pub fn put_tokened<T: Serialize>(
    key: Key,
    row: &T,
    condition: Condition,
    previous_version: Option<u64>,
) -> Write {
    let version = previous_version.map_or_else(first_version, |v| v + 1);
    put_item(key, row, condition, version, None, Some(Token::random()))
}

fn put_item<T: Serialize>(
    key: Key,
    row: &T,
    condition: Condition,
    version: u64,
    index: Option<Key>,
    token: Option<Token>,
) -> Write {
    let body = serde_json::to_vec(row).expect("catalog rows always serialize");
    Write::Put {
        item: Item {
            key,
            version,
            token,
            body,
            index,
            expires_at: None,
        },
        condition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values chosen to collide under a verbatim join: separators, escapes, the marker, and
    /// values that start like others.
    const ADVERSARIAL: [&str; 16] = [
        "",
        "t",
        "t#",
        "#t",
        "t#x",
        "t%23x",
        "t%x",
        "%",
        "%23",
        "#",
        "##",
        "\u{1}t%23x",
        "\u{1}",
        "user:a",
        "user:a#user:b",
        "t#user:a",
    ];

    #[test]
    fn parts_are_injective_prefix_free_and_verbatim_without_separators() {
        let mut seen = std::collections::HashMap::new();
        for value in ADVERSARIAL {
            let part = keys::part(value);
            assert!(!part.contains('#'), "{value:?} -> {part:?}");
            if let Some(other) = seen.insert(part.to_string(), value) {
                panic!("{value:?} and {other:?} both give {part:?}");
            }
            // A prefix query ending in a part's `#` finds that value only.
            let query = format!("{part}#");
            for other in ADVERSARIAL.iter().filter(|o| **o != value) {
                let key = format!("{}#rest", keys::part(other));
                assert!(!key.starts_with(&query), "{query:?} finds {other:?}");
            }
        }
        for plain in ["t", "user:a", "100%", "t%23x", "a.b-c_d", "with space"] {
            assert_eq!(keys::part(plain), plain);
        }
    }

    #[test]
    fn grant_keys_are_one_per_grant_and_never_an_earlier_rows_of_another() {
        let tables = ADVERSARIAL.iter().map(|t| (!t.is_empty()).then_some(*t));
        let grants: Vec<(Option<&str>, &str)> = tables
            .flat_map(|t| ADVERSARIAL.iter().map(move |p| (t, *p)))
            .collect();
        let mut seen = std::collections::HashMap::new();
        for &(table, principal) in &grants {
            let key = keys::grant("ns1", table, principal);
            if let Some(other) = seen.insert(key.clone(), (table, principal)) {
                panic!("{:?} and {other:?} share {key:?}", (table, principal));
            }
            let on = keys::grants_on(table);
            assert!(key.sk.starts_with(&on));
            for &(other_table, other_principal) in &grants {
                if other_table != table {
                    let other = keys::grant("ns1", other_table, other_principal);
                    assert!(!other.sk.starts_with(&on), "{on:?} finds {other:?}");
                }
                // The row an earlier version wrote for another grant is never at this key
                // (table names and principals never held control characters).
                let earlier = !other_table.unwrap_or("").contains(char::is_control)
                    && !other_principal.contains(char::is_control);
                if earlier && (other_table, other_principal) != (table, principal) {
                    let legacy = keys::legacy_grant("ns1", other_table, other_principal);
                    assert_ne!(legacy, key, "{:?}", (table, principal));
                }
            }
        }
        // Without `#` a grant's key is the one it always had.
        assert_eq!(
            keys::grant("ns1", Some("t"), "user:a"),
            keys::legacy_grant("ns1", Some("t"), "user:a")
        );
        assert_eq!(keys::grant("ns1", None, "user:a").sk, "GRANT##user:a");
    }

    #[test]
    fn keys_of_values_without_separators_are_unchanged() {
        assert_eq!(
            keys::grantee("acme", "user:a#b", "ns1", Some("t#x")),
            Key::new("GRANTEE#acme#user:a#b", "GRANT#ns1#t#x")
        );
        assert_eq!(
            keys::team_member("acme", "data", "user:a#b"),
            Key::new("TEAM#acme#data", "MEMBER#user:a#b")
        );
        assert_eq!(
            keys::teams_of("acme", "user:a#b", "data"),
            Key::new("TEAMS#acme#user:a#b", "TEAM#data")
        );
        assert_eq!(
            keys::prefix_claim("s3://b/x#y", "p-1"),
            Key::new("PREFIX#s3://b/x#y#p-1", "PREFIX")
        );
        assert_eq!(
            keys::deleted_namespace(7, "acme", "sales").sk,
            "00000000000000000007#acme#sales"
        );
    }

    #[test]
    fn recreated_rows_never_repeat_versions() {
        let version = |w: Write| match w {
            Write::Put { item, .. } => item.version,
            _ => unreachable!(),
        };
        let key = || Key::new("P", "S");
        let first = version(put(key(), &"a", Condition::NotExists));
        let again = version(put(key(), &"a", Condition::NotExists));
        assert_ne!(first, again);
        assert!(first >= 1 << 32);
        assert_eq!(
            version(put(key(), &"b", Condition::VersionIs(first))),
            first + 1
        );
    }
}
