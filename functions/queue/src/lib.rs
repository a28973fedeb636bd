//! The maintenance queue on SQS. The scheduled function claims the tables due (the catalog's
//! due index) and puts one message per table on the queue; the worker function, fed by the
//! queue's event source mapping, maintains each under a lease. SQS delivers at least once:
//! a message delivered twice, or after its claim lapsed, does nothing (see
//! `floe::catalog::tables::maintenance`), so the queue's guarantees are enough.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use floe::catalog::Catalog;
use floe::catalog::tables::maintenance::{DueTable, WorkerOutcome};

/// Messages SQS takes in one `SendMessageBatch`.
const BATCH: usize = 10;

/// The AWS actions the scheduler's sends need (`SendMessageBatch` is authorised as
/// `sqs:SendMessage`).
pub const SEND_ACTIONS: [&str; 1] = ["sqs:SendMessage"];

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("the maintenance queue refused {0} message(s): {1}")]
    Refused(usize, String),
    #[error("the maintenance queue cannot be reached: {0}")]
    Unreachable(String),
}

/// The queue the scheduler sends claimed tables to.
#[derive(Clone)]
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsQueue {
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    /// Sends one message per table. A table whose message is refused stays claimed until its
    /// claim lapses, then the next run claims it again: nothing is lost, only delayed.
    pub async fn send(&self, tables: &[DueTable]) -> Result<usize, QueueError> {
        let mut sent = 0;
        let mut refused = Vec::new();
        for chunk in tables.chunks(BATCH) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, due)| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(serde_json::to_string(due).expect("plain data serializes"))
                        .build()
                        .expect("id and body are set")
                })
                .collect::<Vec<_>>();
            let answer = self
                .client
                .send_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| {
                    QueueError::Unreachable(format!(
                        "{}",
                        aws_sdk_sqs::error::DisplayErrorContext(e)
                    ))
                })?;
            sent += answer.successful().len();
            refused.extend(answer.failed().iter().map(|f| f.code().to_owned()));
        }
        if refused.is_empty() {
            Ok(sent)
        } else {
            Err(QueueError::Refused(refused.len(), refused.join(", ")))
        }
    }
}

/// What one scheduled run put on the queue.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Scheduled {
    pub claimed: usize,
    pub sent: usize,
}

/// The scheduler's run: the sweep and the claim (at most `limit` tables), then the messages.
pub async fn schedule(
    catalog: &Catalog,
    queue: &SqsQueue,
    now_ms: u64,
    limit: usize,
) -> Result<Scheduled, Box<dyn std::error::Error + Send + Sync>> {
    let claimed = catalog.schedule_due(now_ms, limit).await?;
    let sent = queue.send(&claimed).await?;
    tracing::info!(claimed = claimed.len(), sent, "maintenance scheduled");
    Ok(Scheduled {
        claimed: claimed.len(),
        sent,
    })
}

/// The worker's run over one batch of messages: each table maintained under its lease. A
/// message whose table failed is reported back (SQS delivers it again, then to the dead-letter
/// queue); an unreadable one goes straight on to the dead-letter queue's count the same way.
pub async fn work(catalog: &Catalog, event: SqsEvent, now_ms: u64) -> SqsBatchResponse {
    let mut failures = Vec::new();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let due: Option<DueTable> = record
            .body
            .as_deref()
            .and_then(|body| serde_json::from_str(body).ok());
        let Some(due) = due else {
            tracing::error!(message_id = %id, "a maintenance message that names no table");
            failures.push(failure(id));
            continue;
        };
        match catalog.maintain_claimed(&due, now_ms).await {
            Ok(WorkerOutcome::Maintained(outcome)) => {
                if let Some(error) = outcome.error {
                    // Recorded on the table, which backs off: the message is done.
                    tracing::warn!(table = %outcome.table, error = %error, "table maintenance failed");
                }
            }
            Ok(WorkerOutcome::Disabled | WorkerOutcome::Skipped) => {}
            Err(e) => {
                tracing::error!(message_id = %id, org = %due.org, namespace = %due.namespace, table = %due.table, error = %e, "maintenance could not run");
                failures.push(failure(id));
            }
        }
    }
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures;
    response
}

fn failure(id: String) -> BatchItemFailure {
    let mut failure = BatchItemFailure::default();
    failure.item_identifier = id;
    failure
}
