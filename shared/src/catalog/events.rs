//! Reading an org's change events back (`GET /api/v1/orgs/{org}/events`).
//!
//! A reader sees the events about what it may read (a table's events with read on the table, a
//! namespace's with the namespace visible) and the events about access (grants, visibility)
//! where it may administer them, as the management API shows grants. Its position is an opaque
//! token (the last sequence number it was shown or skipped); a token whose next event is past
//! the retention is 410 Gone: events were lost to it, and it must start again.
//!
//! A table is known to events by its uuid: a table grant (on a name) shows the events of the
//! table that holds the name now, never those of a dropped table that held it before.

use crate::core::Core;
use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::OrgContext;
use crate::authz::Action;
use crate::error::{CatalogError, Result};
use crate::events::{ChangeEvent, Kind, outbox, sequencer};
use crate::model::{NamespaceRow, OrgRole, TableRow};
use crate::store::rows::{self, keys};

/// The default and the largest page.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;
/// At most this many events are read for one page (a reader who may see few of them gets a
/// short page and a token past all of them).
const MAX_SCANNED: usize = 5000;
const BATCH: usize = 500;

/// One page of events.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EventsPage {
    pub events: Vec<ChangeEvent>,
    /// Where the next page starts (pass as `after`); also when the page is empty, so a reader
    /// can wait for new events with it.
    pub next_token: String,
}

/// Reading an org's change events back.
pub struct EventService {
    core: Arc<Core>,
}

impl EventService {
    /// A publisher of the org's numbered events to `sink`, from where it last stopped.
    pub fn publisher(
        &self,
        sink: Arc<dyn crate::events::publish::Sink>,
    ) -> crate::events::publish::Publisher {
        crate::events::publish::Publisher::new(self.core.store.clone(), sink)
    }

    /// Signalled whenever this process writes a change event: a publisher beside the server
    /// wakes on it instead of waiting out its poll.
    pub fn written(&self) -> Arc<tokio::sync::Notify> {
        self.core.changes.events_written()
    }

    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}

impl EventService {
    /// The events after `after` (from the oldest kept when `None`) that the caller may see,
    /// at most `limit`.
    pub async fn list_events(
        &self,
        ctx: &OrgContext,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventsPage> {
        if limit == 0 || limit > MAX_LIMIT {
            return Err(CatalogError::BadRequest(format!(
                "limit must be between 1 and {MAX_LIMIT}"
            )));
        }
        let org = ctx.org.name.as_str();
        let after = after.map(parse_token).transpose()?;
        // Events still waiting for their numbers get them first, so a reader sees every
        // change that landed before it asked.
        sequencer::sequence_org(&*self.core.store, org).await?;
        let last = outbox::read_counter(&*self.core.store, org).await?.last;
        if after.is_some_and(|a| a > last) {
            return Err(CatalogError::BadRequest(
                "Invalid events token: it is ahead of the org's events".into(),
            ));
        }
        let now_s = self.core.clock.now_ms() / 1000;
        let mut position = after.unwrap_or(0);
        let mut first = true;
        let mut events = Vec::new();
        let mut scanned = 0;
        let mut namespaces = Namespaces::default();
        let mut holders = Holders::default();
        'pages: while events.len() < limit && scanned < MAX_SCANNED && position < last {
            let items = outbox::events_after(&*self.core.store, org, position, BATCH).await?;
            if items.is_empty() {
                break;
            }
            for item in items {
                let expired = item.expires_at.is_some_and(|at| at <= now_s);
                let event = outbox::decode(&item)?;
                let sequence = event.data.sequence;
                if first {
                    first = false;
                    // Expired events are gone even where the store has not removed them yet.
                    if after.is_some() && (expired || sequence != position + 1) {
                        return Err(gone());
                    }
                }
                position = sequence;
                scanned += 1;
                if !expired
                    && self
                        .may_see(ctx, &event, &mut namespaces, &mut holders)
                        .await?
                {
                    events.push(event);
                }
                if events.len() >= limit || scanned >= MAX_SCANNED {
                    break 'pages;
                }
            }
        }
        if first && after.is_some_and(|a| a < last) {
            // Events after the token existed and none is left.
            return Err(gone());
        }
        Ok(EventsPage {
            events,
            next_token: position.to_string(),
        })
    }

    /// Whether the caller may see `event`, by the rules of the object it describes.
    async fn may_see(
        &self,
        ctx: &OrgContext,
        event: &ChangeEvent,
        namespaces: &mut Namespaces,
        holders: &mut Holders,
    ) -> Result<bool> {
        let data = &event.data;
        if ctx.access.service_admin || ctx.access.org_role == Some(OrgRole::Admin) {
            return Ok(true);
        }
        let public = namespaces
            .is_public(
                &self.core,
                &ctx.org.name,
                &data.namespace,
                &data.namespace_uuid,
            )
            .await?;
        let access = &ctx.access;
        let on = |table: Option<&str>, action: Action| {
            access
                .effective_by_id(&data.namespace_uuid, public, table)
                .is_some_and(|held| held >= action)
        };
        // Read on the table `uuid` that the event names `table`: on every table of the
        // namespace, or through a grant on a name while that table holds it.
        let reads_table = async |table: &str, holders: &mut Holders| -> Result<bool> {
            if access
                .on_every_table_by_id(&data.namespace_uuid, public)
                .is_some_and(|held| held >= Action::Read)
            {
                return Ok(true);
            }
            if access
                .table_grant_by_id(&data.namespace_uuid, table)
                .is_none_or(|held| held < Action::Read)
            {
                return Ok(false);
            }
            let Some(uuid) = data.table_uuid.as_deref() else {
                return Ok(false);
            };
            Ok(holders
                .holder(&self.core, &data.namespace_uuid, table)
                .await?
                .is_some_and(|holder| holder == uuid))
        };
        Ok(match event.kind {
            Kind::GrantChanged => {
                on(None, Action::Manage)
                    || data
                        .grant
                        .as_ref()
                        .and_then(|g| g.table.as_deref())
                        .is_some_and(|table| on(Some(table), Action::Manage))
            }
            Kind::VisibilityChanged => on(None, Action::Manage),
            _ => match data.table.as_deref() {
                None => on(None, Action::Read),
                Some(table) => {
                    reads_table(table, holders).await?
                        || match (&event.kind, &data.renamed_to) {
                            (Kind::TableRenamed, Some(to)) => {
                                reads_table(&to.table, holders).await?
                            }
                            _ => false,
                        }
                }
            },
        })
    }
}

/// Tables looked up for one page: the uuid of the live table holding each name (by namespace
/// id), if any.
#[derive(Default)]
struct Holders(HashMap<(String, String), Option<String>>);

impl Holders {
    async fn holder(
        &mut self,
        core: &Core,
        namespace_id: &str,
        table: &str,
    ) -> Result<Option<&str>> {
        let key = (namespace_id.to_owned(), table.to_owned());
        if !self.0.contains_key(&key) {
            let row =
                rows::get::<TableRow>(&*core.store, &keys::table(namespace_id, table)).await?;
            self.0.insert(key.clone(), row.map(|t| t.row.id));
        }
        Ok(self.0.get(&key).and_then(|id| id.as_deref()))
    }
}

/// Namespaces looked up for one page: whether each (by id) is live and public now.
#[derive(Default)]
struct Namespaces(HashMap<String, bool>);

impl Namespaces {
    async fn is_public(&mut self, core: &Core, org: &str, name: &str, id: &str) -> Result<bool> {
        if let Some(public) = self.0.get(id) {
            return Ok(*public);
        }
        let row = rows::get::<NamespaceRow>(&*core.store, &keys::namespace(org, name)).await?;
        let public = row.is_some_and(|ns| ns.row.id == id && crate::authz::is_public(&ns.row));
        self.0.insert(id.to_owned(), public);
        Ok(public)
    }
}

fn parse_token(token: &str) -> Result<u64> {
    token
        .parse()
        .map_err(|_| CatalogError::BadRequest("Invalid events token".into()))
}

fn gone() -> CatalogError {
    CatalogError::Gone(
        "Events after this token are past the retention and were removed; start again without a token"
            .into(),
    )
}
