//! Publishing change events beside `floe serve`: to an NDJSON file in the data directory and,
//! when configured, to a webhook.
//!
//! Events are numbered first ([`super::sequencer`]), then delivered in their org's sequence.
//! Each sink has its own cursor per org in the store (the last sequence it delivered), moved
//! after every delivered event: a publisher that dies mid-batch starts again after the last
//! event it recorded, so every event is delivered at least once (the one in flight may come
//! twice; its `id` tells), in sequence order, and a slow webhook never holds the file back.
//! On AWS the DynamoDB stream plays this part (the `floe-events` function).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

use super::{ChangeEvent, outbox};
use crate::store::rows::{self, keys};
use crate::store::{Condition, MetaStore, StoreError};

/// Events read from the store per query.
const BATCH: usize = 100;
/// Orgs with events, read per pass (the index is ordered by org name).
const ORGS_PER_PASS: usize = 10_000;
/// The structured-mode content type of one CloudEvent (CloudEvents' HTTP binding).
pub const CLOUDEVENTS_JSON: &str = "application/cloudevents+json";

/// Where events go. A sink must not report success for an event it did not take.
#[async_trait]
pub trait Sink: Send + Sync {
    /// The sink's name: its cursors are kept under it.
    fn name(&self) -> &str;
    async fn deliver(&self, event: &ChangeEvent) -> Result<(), SinkError>;
}

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("cannot write the events file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("the webhook did not take the event: {0}")]
    Webhook(String),
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// A sink's cursor in one org.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct CursorRow {
    pub last: u64,
}

/// Delivers every org's events to one sink, in order.
pub struct Publisher {
    store: Arc<dyn MetaStore>,
    sink: Arc<dyn Sink>,
}

impl Publisher {
    pub fn new(store: Arc<dyn MetaStore>, sink: Arc<dyn Sink>) -> Self {
        Self { store, sink }
    }

    /// Delivers every event written so far that the sink has not taken; the number delivered.
    /// Stops at the first event the sink refuses, its cursor just before it.
    pub async fn publish_pending(&self) -> Result<u64, PublishError> {
        // Waiting events are numbered first: delivery follows the org's sequence.
        super::sequencer::sequence_all(&*self.store).await?;
        let orgs = outbox::orgs_with_events(&*self.store, ORGS_PER_PASS).await?;
        let mut delivered = 0;
        for org in orgs {
            delivered += self.publish_org(&org).await?;
        }
        Ok(delivered)
    }

    async fn publish_org(&self, org: &str) -> Result<u64, PublishError> {
        let last = outbox::read_counter(&*self.store, org).await?.last;
        let cursor_key = keys::event_cursor(org, self.sink.name());
        let mut cursor = rows::get::<CursorRow>(&*self.store, &cursor_key)
            .await?
            .map(|c| c.row.last)
            .unwrap_or(0);
        let mut delivered = 0;
        while cursor < last {
            let items = outbox::events_after(&*self.store, org, cursor, BATCH).await?;
            if items.is_empty() {
                break;
            }
            for item in items {
                let event = outbox::decode(&item)?;
                let sequence = event.data.sequence;
                if sequence != cursor + 1 {
                    tracing::warn!(
                        org,
                        sink = self.sink.name(),
                        from = cursor + 1,
                        to = sequence - 1,
                        "events expired before they were delivered"
                    );
                }
                self.sink.deliver(&event).await?;
                cursor = sequence;
                delivered += 1;
                let write = rows::put(
                    cursor_key.clone(),
                    &CursorRow { last: cursor },
                    Condition::Always,
                );
                self.store.write(vec![write]).await?;
            }
        }
        Ok(delivered)
    }

    /// Publishes until `shutdown` resolves: at once when this process writes an event
    /// (`wake`), and every `poll` for events written by others.
    pub async fn run(
        self,
        wake: Arc<tokio::sync::Notify>,
        poll: Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut failures = 0u32;
        loop {
            let notified = wake.notified();
            match self.publish_pending().await {
                Ok(_) => failures = 0,
                Err(e) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(sink = self.sink.name(), error = %e, "events not published; retrying");
                }
            }
            // After a failure, wait longer each time (up to a minute) before trying again.
            let wait = if failures == 0 {
                poll
            } else {
                (poll * 2u32.saturating_pow(failures.min(6))).min(Duration::from_secs(60))
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = notified, if failures == 0 => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Appends each event as one line of JSON to a file.
pub struct NdjsonSink {
    path: PathBuf,
    file: Mutex<Option<tokio::fs::File>>,
}

impl NdjsonSink {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, e: std::io::Error) -> SinkError {
        SinkError::File {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }
}

#[async_trait]
impl Sink for NdjsonSink {
    fn name(&self) -> &str {
        "ndjson"
    }

    async fn deliver(&self, event: &ChangeEvent) -> Result<(), SinkError> {
        let mut line = serde_json::to_vec(event).expect("events always serialize");
        line.push(b'\n');
        let mut file = self.file.lock().await;
        if file.is_none() {
            let opened = tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .await
                .map_err(|e| self.error(e))?;
            *file = Some(opened);
        }
        let handle = file.as_mut().expect("opened above");
        let written = async {
            handle.write_all(&line).await?;
            // On disk before the cursor moves past it.
            handle.sync_data().await
        };
        if let Err(e) = written.await {
            // Reopen next time: a partial line is followed by a whole one.
            *file = None;
            return Err(self.error(e));
        }
        Ok(())
    }
}

type WebhookClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// POSTs each event to a URL (CloudEvents structured mode), retrying with exponential backoff.
pub struct WebhookSink {
    url: url::Url,
    client: WebhookClient,
    retry: ExponentialBuilder,
    timeout: Duration,
}

impl WebhookSink {
    /// A webhook at `url` (http or https).
    pub fn new(url: &str) -> Result<Self, String> {
        let url = url::Url::parse(url).map_err(|e| format!("invalid webhook URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("a webhook URL is http or https".into());
        }
        let connector = crate::outbound::connector(url.scheme() == "https")?;
        Ok(Self {
            url,
            client: Client::builder(TokioExecutor::new()).build(connector),
            retry: ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(10))
                .with_max_times(6)
                .with_jitter(),
            timeout: Duration::from_secs(10),
        })
    }

    /// Retries at most `times` times, the first after `first` (for tests).
    pub fn with_retry(mut self, first: Duration, times: usize) -> Self {
        self.retry = ExponentialBuilder::default()
            .with_min_delay(first)
            .with_max_delay(first * 8)
            .with_max_times(times);
        self
    }

    async fn post(&self, body: Bytes) -> Result<(), SinkError> {
        let request = http::Request::post(self.url.as_str())
            .header(http::header::CONTENT_TYPE, CLOUDEVENTS_JSON)
            .header(http::header::USER_AGENT, "floe")
            .body(Full::new(body))
            .map_err(|e| SinkError::Webhook(e.to_string()))?;
        let response = tokio::time::timeout(self.timeout, self.client.request(request))
            .await
            .map_err(|_| SinkError::Webhook("timed out".into()))?
            .map_err(|e| SinkError::Webhook(e.to_string()))?;
        let status = response.status();
        // Drain the answer so the connection can be reused.
        let _ = response.into_body().collect().await;
        if status.is_success() {
            Ok(())
        } else {
            Err(SinkError::Webhook(format!("HTTP {status}")))
        }
    }
}

#[async_trait]
impl Sink for WebhookSink {
    fn name(&self) -> &str {
        "webhook"
    }

    async fn deliver(&self, event: &ChangeEvent) -> Result<(), SinkError> {
        let body = Bytes::from(serde_json::to_vec(event).expect("events always serialize"));
        (|| self.post(body.clone()))
            .retry(self.retry)
            .notify(
                |e, wait| tracing::info!(error = %e, ?wait, "webhook refused an event; retrying"),
            )
            .await
    }
}
