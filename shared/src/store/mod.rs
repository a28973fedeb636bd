//! The `MetaStore` port: catalog rows and their conditional writes.
//!
//! The model is DynamoDB's single-table design (partition key, sort key, a version counter and an
//! opaque body) so that every adapter offers exactly the same semantics: atomic multi-item writes
//! whose conditions all hold or nothing is written. The metadata-pointer compare-and-swap is one
//! such write with a `TokenIs` condition: items may carry a random write token, which unlike the
//! version never repeats across a drop and re-create of the same key.

pub mod dynamodb;
pub mod embedded;
pub mod observed;
pub mod rows;

use async_trait::async_trait;

/// Primary key of one catalog item.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub pk: String,
    pub sk: String,
}

impl Key {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Self {
            pk: pk.into(),
            sk: sk.into(),
        }
    }
}

/// A random 128-bit write token. A fresh one is drawn for every write of an item that carries
/// one, so a token names one state of one incarnation of an item: a condition on it cannot be
/// satisfied by a later item that reuses the key (a dropped and re-created table, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token(pub u128);

impl Token {
    pub fn random() -> Self {
        Token(uuid::Uuid::new_v4().as_u128())
    }

    /// Fixed-width lowercase hex, as adapters store it.
    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        (text.len() == 32)
            .then(|| u128::from_str_radix(text, 16).ok())
            .flatten()
            .map(Token)
    }
}

/// One stored item: a versioned, opaque JSON body. The version is what most conditions compare;
/// items that need an identity-safe compare-and-swap also carry a write `token`.
/// Items with an `index` key also appear in the store's sparse secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub key: Key,
    pub version: u64,
    pub token: Option<Token>,
    pub body: Vec<u8>,
    pub index: Option<Key>,
    /// Unix seconds after which the store may delete the item by itself (DynamoDB's TTL; the
    /// embedded store reaps expired items as it writes). Deletion may lag, as DynamoDB's does by
    /// up to days: readers that care compare the time themselves.
    pub expires_at: Option<u64>,
}

/// What must hold about an item's current state for a write to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    Always,
    NotExists,
    Exists,
    VersionIs(u64),
    /// The item exists and carries exactly this token (`None`: exists and carries none).
    TokenIs(Option<Token>),
}

/// One part of an atomic write.
#[derive(Debug, Clone)]
pub enum Write {
    Put { item: Item, condition: Condition },
    Delete { key: Key, condition: Condition },
    Check { key: Key, condition: Condition },
}

impl Write {
    pub fn key(&self) -> &Key {
        match self {
            Write::Put { item, .. } => &item.key,
            Write::Delete { key, .. } | Write::Check { key, .. } => key,
        }
    }

    pub fn condition(&self) -> Condition {
        match self {
            Write::Put { condition, .. }
            | Write::Delete { condition, .. }
            | Write::Check { condition, .. } => *condition,
        }
    }
}

/// Store failures. `Unknown` means the write may or may not have landed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("condition failed on write {index} ({key:?})")]
    ConditionFailed { index: usize, key: Key },
    #[error("store outcome unknown: {0}")]
    Unknown(String),
    /// A concurrent write held an item: nothing was applied, as with a failed condition.
    #[error("write lost to a concurrent one: {0}")]
    Conflict(String),
    /// The store declined the request for now (throttling): nothing was applied, and the same
    /// request may be sent again later.
    #[error("store throttled: {0}")]
    Throttled(String),
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("store holds a malformed item {key:?}: {reason}")]
    Corrupt { key: Key, reason: String },
    #[error("invalid write: {0}")]
    Invalid(String),
}

/// Catalog state storage with conditional, atomic multi-item writes.
#[async_trait]
pub trait MetaStore: Send + Sync + 'static {
    /// Reads one item with strong consistency.
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError>;

    /// Items of one partition whose sort key starts with `sk_prefix`, ascending, strictly after
    /// `start_after` when given, at most `limit`.
    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError>;

    /// Applies every write, or none when any condition fails.
    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError>;

    /// Keys of items whose index key has partition `index_pk` and sort key at most `upto_sk`,
    /// ascending by index sort key. The index may lag writes slightly (as DynamoDB's does):
    /// callers re-read each item before acting on it.
    async fn query_index(
        &self,
        index_pk: &str,
        upto_sk: &str,
        limit: usize,
    ) -> Result<Vec<Key>, StoreError>;
}

/// Checks one condition against the current item's version and token (`None` when absent).
pub fn condition_holds(condition: Condition, current: Option<(u64, Option<Token>)>) -> bool {
    match condition {
        Condition::Always => true,
        Condition::NotExists => current.is_none(),
        Condition::Exists => current.is_some(),
        Condition::VersionIs(v) => current.is_some_and(|(version, _)| version == v),
        Condition::TokenIs(t) => current.is_some_and(|(_, token)| token == t),
    }
}

/// Rejects write batches that no adapter could apply atomically.
/// The most writes one atomic batch may hold: DynamoDB's TransactWriteItems limit, which the
/// embedded store holds too so that what works on one works on both.
pub const MAX_WRITES: usize = 100;

pub fn validate_batch(writes: &[Write]) -> Result<(), StoreError> {
    if writes.is_empty() {
        return Err(StoreError::Invalid("empty write batch".into()));
    }
    if writes.len() > MAX_WRITES {
        return Err(StoreError::Invalid(format!(
            "more than {MAX_WRITES} writes in one batch"
        )));
    }
    let mut keys: Vec<&Key> = writes.iter().map(Write::key).collect();
    keys.sort();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err(StoreError::Invalid(
            "one batch touches the same item twice".into(),
        ));
    }
    Ok(())
}

/// One way of using the catalog store (`MetaStore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreUse {
    Get,
    Query,
    /// A query of the index of soft-deleted namespaces.
    QueryIndex,
    /// A `Write::Put`, alone or in a batch.
    Put,
    /// A `Write::Delete`, alone or in a batch.
    Delete,
    /// A `Write::Check` (in a batch).
    Check,
}

impl StoreUse {
    /// The use one part of a write is.
    pub fn of_write(write: &Write) -> StoreUse {
        match write {
            Write::Put { .. } => StoreUse::Put,
            Write::Delete { .. } => StoreUse::Delete,
            Write::Check { .. } => StoreUse::Check,
        }
    }
}
