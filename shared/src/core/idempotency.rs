//! Idempotency keys (spec 1.11, `Idempotency-Key`): a retried mutation is answered as the first
//! was, never applied twice.
//!
//! A key is a row per (key, principal), so nobody can replay another principal's answer. The
//! first request claims it (a lease); a retry that finds the claim waits for it; a claim whose
//! lease ran out (its request died) is taken over. The change itself is written in the same
//! atomic store write as the row's move to `Applied`, through [`super::ChangeWriter::write_answering`]: once a
//! change has landed, no retry can run it again, even when its answer was lost or the server
//! died before recording it. The answer is then recorded (`Done`), except for 5xx answers,
//! whose claim is released so that a retry runs again: unless the change had landed, which the
//! release's version condition detects. DynamoDB's TTL (the embedded store's reaping) removes
//! keys once they expire.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::OrgContext;
use crate::authz::{Action, Resource, authorize};
use crate::clock::Clock;
use crate::error::{CatalogError, Result};
use crate::model::NamespaceRow;
use crate::store::rows::{self, keys};
use crate::store::{Condition, Key, MetaStore, StoreError, Write};

/// How long a client may retry with one key, as `/v1/config` advertises it (the spec's
/// example, and what Java's reference and Lakekeeper use).
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// Keys are kept this long past the lifetime, for clock skew and late retries.
pub const GRACE: Duration = Duration::from_secs(5 * 60);
/// How long a request holds its key before a retry may take it over: longer than any request
/// can run behind API Gateway (29 s).
pub const LEASE: Duration = Duration::from_secs(60);
/// How long a retry waits for the request that holds its key before answering 503.
pub const WAIT: Duration = Duration::from_secs(10);
const FIRST_POLL: Duration = Duration::from_millis(20);
const MAX_POLL: Duration = Duration::from_millis(500);

/// The stored state of one key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KeyRow {
    /// SHA-256 of what the key was first used for (method, path, body): a key reused for
    /// another request is refused.
    pub request: String,
    pub first_seen_ms: u64,
    pub state: KeyState,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum KeyState {
    /// A request is running it; a retry may take it over once the lease has passed.
    Running { lease_until_ms: u64 },
    /// Its change landed (in the same write as this state); the answer was not recorded.
    /// `answer` is the answer when the operation knew it before writing.
    Applied { answer: Option<String> },
    /// Finalised: replayed as it is.
    Done { answer: Recorded },
}

/// A finalised answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Recorded {
    /// Status and JSON body, sent again as they are (no credentials are ever recorded).
    Stored { status: u16, body: String },
    /// A table answer: built again from the table as it is now, with fresh credentials.
    Reload,
}

/// What a request with a key does.
#[derive(Debug)]
pub enum Claim {
    /// Run the operation with the claim in its [`super::OrgContext`], then
    /// [`IdempotencyKeys::finish_key`].
    Run(KeyClaim),
    /// Answer as the first request did.
    Replay(Replay),
}

/// How to answer a retry of a request that already happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Replay {
    Recorded(Recorded),
    /// The change landed but its answer was lost: the route rebuilds it (`answer` when the
    /// operation recorded one with its change).
    Applied {
        answer: Option<String>,
    },
}

/// What a keyed request acted on: its replay is authorized for the action the request needed
/// there, as a fresh request would be.
#[derive(Debug, Clone, Copy)]
pub enum Replayed<'a> {
    /// Creating a namespace: write on the catalog.
    Catalog,
    /// Dropping a namespace, changing its properties, creating or renaming a table in it:
    /// write on the namespace.
    Namespace(&'a str),
    /// Committing to or dropping a table: write on the table.
    Table { namespace: &'a str, table: &'a str },
}

/// A key this request holds, shared with the operation's change write: the middleware puts it
/// in the request's extensions, the handler into the operation's [`super::OrgContext`].
#[derive(Debug, Clone)]
pub struct KeyClaim(Arc<Mutex<ClaimState>>);

#[derive(Debug)]
struct ClaimState {
    key: Key,
    row: KeyRow,
    expires_at: u64,
    /// The row's version as this request claimed it.
    claimed: u64,
    /// The row's version once the change landed with it.
    landed: Option<u64>,
}

impl ClaimState {
    /// The put that moves the key to `state`, conditioned on the key being at `version`.
    fn moved_to(&self, state: KeyState, version: u64) -> Write {
        let row = KeyRow {
            state,
            ..self.row.clone()
        };
        rows::put_expiring(
            self.key.clone(),
            &row,
            Condition::VersionIs(version),
            self.expires_at,
        )
    }
}

impl KeyClaim {
    fn state(&self) -> std::sync::MutexGuard<'_, ClaimState> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn key_of(key: &str, principal_id: &str) -> Key {
    Key::new(format!("IDEM#{key}"), principal_id)
}

/// The version a put writes (random for a new row: a key released and claimed again never
/// repeats a version an older request of it may still condition on).
fn version_of(write: &Write) -> u64 {
    match write {
        Write::Put { item, .. } => item.version,
        _ => unreachable!("only puts carry a version"),
    }
}

/// A key must be a UUID in its 36-character form (the spec asks clients for UUIDv7).
pub fn validate_key(key: &str) -> Result<()> {
    if key.len() == 36 && uuid::Uuid::try_parse(key).is_ok() {
        Ok(())
    } else {
        Err(CatalogError::BadRequest(
            "Invalid Idempotency-Key: expected a UUID in its 36-character form".into(),
        ))
    }
}

/// Claims, finishes and checks idempotency keys.
pub struct IdempotencyKeys {
    store: Arc<dyn MetaStore>,
    clock: Arc<dyn Clock>,
    /// How long clients may retry a mutation with one key; `None`: off.
    lifetime: Option<Duration>,
}

impl IdempotencyKeys {
    pub fn new(
        store: Arc<dyn MetaStore>,
        clock: Arc<dyn Clock>,
        lifetime: Option<Duration>,
    ) -> Self {
        Self {
            store,
            clock,
            lifetime: lifetime.filter(|l| !l.is_zero()),
        }
    }

    /// Refuses the replay of a keyed answer to a caller that may no longer take the action its
    /// request took (a grant removed, a role lowered): a stored answer is never a way around
    /// authorization. A namespace dropped since is judged by its soft-deleted row; one purged
    /// since, by the org role.
    pub async fn authorize_replay(&self, ctx: &OrgContext, about: Replayed<'_>) -> Result<()> {
        let namespace = |name: &str| {
            let key = keys::namespace(&ctx.org.name, name);
            async move { rows::get::<NamespaceRow>(&*self.store, &key).await }
        };
        let access = &ctx.access;
        match about {
            Replayed::Catalog => authorize(access, Resource::Catalog, Action::Write),
            Replayed::Namespace(name) => match namespace(name).await? {
                Some(ns) => authorize(access, Resource::Namespace(&ns.row), Action::Write),
                None => authorize(access, Resource::Catalog, Action::Write),
            },
            Replayed::Table {
                namespace: name,
                table,
            } => match namespace(name).await? {
                Some(ns) => authorize(
                    access,
                    Resource::Table {
                        namespace: &ns.row,
                        table,
                    },
                    Action::Write,
                ),
                None => authorize(access, Resource::Catalog, Action::Write),
            },
        }
    }

    /// How long clients may retry with one key; `None`: keys are not supported (not advertised,
    /// and ignored).
    pub fn lifetime(&self) -> Option<Duration> {
        self.lifetime
    }

    /// Claims `key` for `principal_id`'s request `request` (a digest), waits for a running
    /// first use of it, or finds its answer.
    pub async fn claim_key(&self, key: &str, principal_id: &str, request: &str) -> Result<Claim> {
        validate_key(key)?;
        let lifetime = self
            .lifetime
            .ok_or_else(|| CatalogError::Internal("idempotency keys are off".into()))?;
        let store_key = key_of(key, principal_id);
        let mut poll = FIRST_POLL;
        let give_up = tokio::time::Instant::now() + WAIT;
        loop {
            let now = self.clock.now_ms();
            let current = self.store.get(&store_key).await?;
            let found = match &current {
                Some(item) if item.expires_at.is_some_and(|at| at * 1000 > now) => Some((
                    item.version,
                    rows::decode::<KeyRow>(item).map_err(CatalogError::Store)?,
                )),
                // Expired (DynamoDB deletes late) or absent: the key is new.
                _ => None,
            };
            match found {
                Some((_, row)) if row.request != request => {
                    return Err(CatalogError::Unprocessable(
                        "This Idempotency-Key was already used for a different request; use a new key for a new request".into(),
                    ));
                }
                Some((
                    _,
                    KeyRow {
                        state: KeyState::Done { answer },
                        ..
                    },
                )) => {
                    return Ok(Claim::Replay(Replay::Recorded(answer)));
                }
                Some((
                    _,
                    KeyRow {
                        state: KeyState::Applied { answer },
                        ..
                    },
                )) => {
                    return Ok(Claim::Replay(Replay::Applied { answer }));
                }
                Some((
                    _,
                    KeyRow {
                        state: KeyState::Running { lease_until_ms },
                        ..
                    },
                )) if lease_until_ms > now => {
                    if tokio::time::Instant::now() >= give_up {
                        return Err(CatalogError::Busy(
                            "A request with this Idempotency-Key is still running; retry with the same key".into(),
                        ));
                    }
                    tokio::time::sleep(poll).await;
                    poll = (poll * 2).min(MAX_POLL);
                    continue;
                }
                _ => {}
            }
            // New, expired, or held by a request whose lease ran out: claim it.
            let (first_seen_ms, condition) = match (&current, &found) {
                (Some(item), Some((_, row))) => {
                    (row.first_seen_ms, Condition::VersionIs(item.version))
                }
                (Some(item), None) => (now, Condition::VersionIs(item.version)),
                (None, _) => (now, Condition::NotExists),
            };
            let row = KeyRow {
                request: request.to_owned(),
                first_seen_ms,
                state: KeyState::Running {
                    lease_until_ms: now + LEASE.as_millis() as u64,
                },
            };
            let expires_at = (first_seen_ms + (lifetime + GRACE).as_millis() as u64).div_ceil(1000);
            let write = rows::put_expiring(store_key.clone(), &row, condition, expires_at);
            let version = version_of(&write);
            match self.store.write(vec![write]).await {
                Ok(()) => {
                    return Ok(Claim::Run(KeyClaim(Arc::new(Mutex::new(ClaimState {
                        key: store_key,
                        row,
                        expires_at,
                        claimed: version,
                        landed: None,
                    })))));
                }
                // Another request claimed it first: look again (and wait for it).
                Err(StoreError::ConditionFailed { .. } | StoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Records the answer of a request that held `claim`; `None` (a 5xx) releases the key so
    /// that a retry runs again, unless the change landed. Failures are logged, not returned:
    /// the request's own answer stands, and a retry finds the key claimed (taken over after the
    /// lease) or applied.
    pub async fn finish_key(&self, claim: &KeyClaim, answer: Option<Recorded>) {
        let write = {
            let state = claim.state();
            let next = match answer {
                // Applied without an answer already replays by rebuilding: the same write again
                // would only cost a store request on every keyed commit.
                Some(Recorded::Reload) if state.landed.is_some() => return,
                Some(answer) => KeyState::Done { answer },
                // Its change landed: the key stays applied, and a retry replays the success.
                None if state.landed.is_some() => return,
                // Released: a retry takes it over at once. Conditioned on the claim, so a
                // change that landed unseen (an unknown outcome) keeps the key applied. A put,
                // not a delete: the functions' roles need no more than they already have.
                None => KeyState::Running { lease_until_ms: 0 },
            };
            state.moved_to(next, state.landed.unwrap_or(state.claimed))
        };
        if let Err(e) = self.store.write(vec![write]).await {
            tracing::warn!(error = %e, "idempotency key not finalised");
        }
    }
}

/// The marker that moves the request's key (if it holds one whose change has not landed
/// yet) to `Applied`, to be written atomically with the change; `answer` is the answer when
/// the operation knows it before writing. One change per request carries the key; later
/// writes are its own follow-ups.
pub(super) fn applied_marker(claim: &KeyClaim, answer: Option<String>) -> Option<AppliedMarker> {
    let claim = claim.clone();
    let write = {
        let state = claim.state();
        if state.landed.is_some() {
            return None;
        }
        state.moved_to(KeyState::Applied { answer }, state.claimed)
    };
    Some(AppliedMarker { claim, write })
}

/// The write that marks a request's key as applied, with the claim it belongs to.
pub(super) struct AppliedMarker {
    claim: KeyClaim,
    pub(super) write: Write,
}

impl AppliedMarker {
    /// Records that the change landed with this marker.
    pub(super) fn landed(&self) {
        self.claim.state().landed = Some(version_of(&self.write));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_uuids_in_their_long_form() {
        assert!(validate_key("017f22e2-79b0-7cc3-98c4-dc0c0c07398f").is_ok());
        assert!(validate_key("017F22E2-79B0-7CC3-98C4-DC0C0C07398F").is_ok());
        for bad in [
            "",
            "017f22e279b07cc398c4dc0c0c07398f",
            "{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}",
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398g",
            "not-a-key",
        ] {
            assert!(
                matches!(validate_key(bad), Err(CatalogError::BadRequest(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn key_rows_keep_their_shape() {
        let row = KeyRow {
            request: "abc".into(),
            first_seen_ms: 5,
            state: KeyState::Done {
                answer: Recorded::Stored {
                    status: 204,
                    body: String::new(),
                },
            },
        };
        let text = serde_json::to_string(&row).unwrap();
        assert_eq!(
            text,
            r#"{"request":"abc","first_seen_ms":5,"state":{"state":"done","answer":{"kind":"stored","status":204,"body":""}}}"#
        );
        assert_eq!(serde_json::from_str::<KeyRow>(&text).unwrap(), row);
    }
}
