//! The change-event publisher on AWS: the catalog table's DynamoDB stream feeds this function,
//! which puts each new event item (the outbox, see `floe::events`) on an EventBridge bus.
//!
//! Records arrive in stream order (per partition key, which is per org for events) and are put
//! in that order, at most ten (and 256 KB) per `PutEvents`. When a put fails, the function
//! answers the stream record it failed at as the batch's first failure
//! (`ReportBatchItemFailures`): Lambda retries from there, so nothing before it is sent again and
//! nothing after it is skipped. Records a retried batch sent already may come twice; an event's
//! `source` and `id` name it. EventBridge itself does not order deliveries to targets: consumers
//! that need order use the `sequence` extension, which has no gaps.

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use base64::Engine;
use floe::events::ChangeEvent;
use floe::events::sequencer;
use floe::store::MetaStore;
use floe::store::rows::keys;

/// EventBridge's `Source` of every event Floe puts.
pub const SOURCE: &str = "floe.catalog";
/// Entries per `PutEvents` call, and the call's size limit (EventBridge's).
const MAX_ENTRIES: usize = 10;
const MAX_CALL_BYTES: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("stream record {record} holds a malformed event: {reason}")]
    Malformed { record: String, reason: String },
}

/// One event to put, with the stream record it came from.
struct Pending {
    sequence_number: Option<String>,
    entry: PutEventsRequestEntry,
    size: usize,
}

/// Handles one batch of the stream: puts its new events on `bus`, in order, then numbers the
/// waiting events of every org that has new ones (which come back on the stream as new
/// events). Answers where Lambda must retry from: the first event it could not put, else the
/// first waiting event whose org it could not number (events after it may then come twice).
pub async fn handle(
    client: &aws_sdk_eventbridge::Client,
    store: &dyn MetaStore,
    bus: &str,
    batch: Event,
) -> Result<DynamoDbEventResponse, PublishError> {
    let waiting = waiting_orgs(&batch);
    let mut response = publish(client, bus, batch).await?;
    if !response.batch_item_failures.is_empty() {
        return Ok(response);
    }
    for (org, record) in waiting {
        match sequencer::sequence_org(store, &org).await {
            Ok(numbered) => tracing::info!(org = %org, numbered, "waiting events numbered"),
            Err(e) => {
                tracing::warn!(org = %org, error = %e, "waiting events not numbered; the stream retries from this record");
                let mut failure = DynamoDbBatchItemFailure::default();
                failure.item_identifier = record;
                response.batch_item_failures.push(failure);
                return Ok(response);
            }
        }
    }
    Ok(response)
}

/// The orgs with events newly waiting in the batch, each once, with the stream record of its
/// first one.
pub fn waiting_orgs(batch: &Event) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for record in &batch.records {
        if record.event_name != "INSERT" {
            continue;
        }
        let Ok(image) = serde_json::to_value(&record.change.keys) else {
            continue;
        };
        let Some(org) = image["pk"]["S"]
            .as_str()
            .and_then(keys::org_of_pending_events)
        else {
            continue;
        };
        if !out.iter().any(|(o, _)| o == org) {
            out.push((org.to_owned(), record.change.sequence_number.clone()));
        }
    }
    out
}

/// Puts the batch's new events on `bus`, in order; answers where Lambda must retry from.
pub async fn publish(
    client: &aws_sdk_eventbridge::Client,
    bus: &str,
    batch: Event,
) -> Result<DynamoDbEventResponse, PublishError> {
    let mut pending = Vec::new();
    for record in &batch.records {
        if let Some(event) = change_event(record)? {
            pending.push(to_entry(record, &event, bus));
        }
    }
    let mut response = DynamoDbEventResponse::default();
    let mut start = 0;
    while start < pending.len() {
        let end = chunk_end(&pending[start..]) + start;
        let chunk = &pending[start..end];
        if let Some(failed_at) = put_chunk(client, chunk).await {
            let first = &chunk[failed_at];
            tracing::warn!(sequence_number = ?first.sequence_number, "events not put; the stream retries from this record");
            response.batch_item_failures.push(failure(first));
            return Ok(response);
        }
        start = end;
    }
    tracing::info!(
        events = pending.len(),
        records = batch.records.len(),
        "events put"
    );
    Ok(response)
}

fn failure(pending: &Pending) -> DynamoDbBatchItemFailure {
    let mut failure = DynamoDbBatchItemFailure::default();
    failure.item_identifier = pending.sequence_number.clone();
    failure
}

/// The number of entries from the start of `pending` that fit one call.
fn chunk_end(pending: &[Pending]) -> usize {
    let mut bytes = 0;
    for (i, p) in pending.iter().enumerate().take(MAX_ENTRIES) {
        bytes += p.size;
        if bytes > MAX_CALL_BYTES && i > 0 {
            return i;
        }
    }
    pending.len().min(MAX_ENTRIES)
}

/// Puts one call's entries; the index of the first entry that did not go, if any.
async fn put_chunk(client: &aws_sdk_eventbridge::Client, chunk: &[Pending]) -> Option<usize> {
    let entries = chunk.iter().map(|p| p.entry.clone()).collect();
    match client.put_events().set_entries(Some(entries)).send().await {
        Err(e) => {
            tracing::warn!(error = %aws_sdk_eventbridge::error::DisplayErrorContext(&e), "PutEvents failed");
            Some(0)
        }
        Ok(output) if output.failed_entry_count() > 0 => {
            let first = output
                .entries()
                .iter()
                .position(|e| e.error_code().is_some())
                .unwrap_or(0);
            let entry = output.entries().get(first);
            tracing::warn!(
                code = entry.and_then(|e| e.error_code()),
                message = entry.and_then(|e| e.error_message()),
                failed = output.failed_entry_count(),
                "PutEvents refused entries"
            );
            Some(first)
        }
        Ok(_) => None,
    }
}

fn to_entry(record: &EventRecord, event: &ChangeEvent, bus: &str) -> Pending {
    let detail = serde_json::to_string(event).expect("events always serialize");
    let size = detail.len() + SOURCE.len() + event.kind.as_str().len() + bus.len();
    Pending {
        sequence_number: record.change.sequence_number.clone(),
        entry: PutEventsRequestEntry::builder()
            .event_bus_name(bus)
            .source(SOURCE)
            .detail_type(event.kind.as_str())
            .detail(detail)
            .resources(format!("floe:org/{}", event.data.org))
            .build(),
        size,
    }
}

/// The change event a stream record inserted, if it is one: a new item in an org's events
/// partition. Everything else on the stream (every other row, and the store's own removal of
/// expired events) is not an event.
pub fn change_event(record: &EventRecord) -> Result<Option<ChangeEvent>, PublishError> {
    if record.event_name != "INSERT" {
        return Ok(None);
    }
    let image = serde_json::to_value(&record.change.new_image).map_err(|e| malformed(record, e))?;
    let is_event = image["pk"]["S"]
        .as_str()
        .is_some_and(|pk| pk.starts_with(&keys::events_partition("")));
    if !is_event {
        return Ok(None);
    }
    let body = image["body"]["B"]
        .as_str()
        .ok_or_else(|| malformed(record, "no binary body"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| malformed(record, e))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| malformed(record, e))
}

fn malformed(record: &EventRecord, reason: impl std::fmt::Display) -> PublishError {
    PublishError::Malformed {
        record: record.event_id.clone(),
        reason: reason.to_string(),
    }
}
