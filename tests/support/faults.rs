//! A fault-injecting `MetaStore`: forwards everything to the real store, except the operations
//! its target matches while it is armed, which it misreports or holds according to its fault.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use floe::store::{Item, Key, MetaStore, StoreError, Write};
use tokio::sync::Notify;

/// Which store operations a `FaultStore` acts on.
#[derive(Clone, Copy)]
pub enum Target {
    /// Reads of a key.
    Read(fn(&Key) -> bool),
    /// Write batches.
    Write(fn(&[Write]) -> bool),
}

/// What a `FaultStore` does to a targeted operation while armed.
#[derive(Clone)]
pub enum Fault {
    /// Every targeted write is not applied and its outcome is unknown (a timeout after sending).
    UnknownOutcome,
    /// Every targeted write is not applied: its first condition fails, as when a concurrent
    /// writer changed what it read (so the caller reads again and retries, and keeps losing).
    LosesRace,
    /// Every targeted write is not applied: the store declined it for now (throttling).
    Throttled,
    /// The first targeted write disarms the store, lands, waits until resumed and then reports
    /// an unknown outcome, as a write whose answer was lost would.
    LandedThenUnknown(Arc<Pause>),
    /// The first targeted operation disarms the store and waits until resumed: a read after it
    /// has read (its caller then holds what it read), a write before it is applied. Lets a test
    /// run other requests at exactly that point.
    Pause(Arc<Pause>),
}

/// The meeting point of a `Fault::Pause` and its test.
#[derive(Default)]
pub struct Pause {
    reached: Notify,
    resume: Notify,
}

impl Pause {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Waits until a targeted operation is held.
    pub async fn reached(&self) {
        self.reached.notified().await
    }

    /// Lets the held operation go on.
    pub fn resume(&self) {
        self.resume.notify_one()
    }

    async fn hold(&self) {
        self.reached.notify_one();
        self.resume.notified().await;
    }
}

/// A store that applies `fault` to the operations `target` matches while `armed` is set.
pub struct FaultStore {
    pub inner: Arc<dyn MetaStore>,
    pub armed: Arc<AtomicBool>,
    pub target: Target,
    pub fault: Fault,
}

impl FaultStore {
    /// Whether this operation is hit: a pause fires once, and disarms the store as it does.
    fn hits(&self, targeted: bool) -> bool {
        targeted
            && match self.fault {
                Fault::Pause(_) | Fault::LandedThenUnknown(_) => {
                    self.armed.swap(false, Ordering::SeqCst)
                }
                _ => self.armed.load(Ordering::SeqCst),
            }
    }
}

#[async_trait]
impl MetaStore for FaultStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        let item = self.inner.get(key).await?;
        if let (Target::Read(matches), Fault::Pause(pause)) = (self.target, &self.fault)
            && self.hits(matches(key))
        {
            pause.hold().await;
        }
        Ok(item)
    }

    async fn query(
        &self,
        pk: &str,
        sk: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        self.inner.query(pk, sk, after, limit).await
    }

    async fn query_index(
        &self,
        pk: &str,
        upto: &str,
        limit: usize,
    ) -> Result<Vec<Key>, StoreError> {
        self.inner.query_index(pk, upto, limit).await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        let Target::Write(matches) = self.target else {
            return self.inner.write(writes).await;
        };
        if !self.hits(matches(&writes)) {
            return self.inner.write(writes).await;
        }
        match &self.fault {
            Fault::UnknownOutcome => Err(StoreError::Unknown("timed out after sending".into())),
            Fault::LosesRace => Err(StoreError::ConditionFailed {
                index: 0,
                key: writes[0].key().clone(),
            }),
            Fault::Throttled => Err(StoreError::Throttled(
                "ProvisionedThroughputExceededException".into(),
            )),
            Fault::LandedThenUnknown(pause) => {
                self.inner.write(writes).await?;
                pause.hold().await;
                Err(StoreError::Unknown(
                    "answer lost after the write landed".into(),
                ))
            }
            Fault::Pause(pause) => {
                pause.hold().await;
                self.inner.write(writes).await
            }
        }
    }
}
