//! The events function on moto: the catalog table's DynamoDB stream, read with the streams
//! API and decoded as Lambda decodes it. The function numbers the changes' waiting events, and
//! the numbered events that follow on the stream go onto an EventBridge bus whose rule feeds an
//! SQS queue. Every change lands on the queue once, and a put that fails mid-batch names the
//! record the stream retries from, after which the rest arrives.

use std::time::Duration;

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodbstreams::types::{AttributeValue, ShardIteratorType};
use aws_sdk_eventbridge::types::Target;
use aws_sdk_sqs::types::QueueAttributeName;
use base64::Engine;
use floe_tests::*;
use serde_json::{Value, json};

/// A bus whose every Floe event is copied to a new queue: (bus, queue url).
async fn bus_to_queue() -> (String, String) {
    let sdk = moto::sdk().await;
    let events = aws_sdk_eventbridge::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let bus = moto::unique("floe-bus");
    events.create_event_bus().name(&bus).send().await.unwrap();
    let queue_url = sqs
        .create_queue()
        .queue_name(moto::unique("floe-events"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap();
    let queue_arn = attributes.attributes().unwrap()[&QueueAttributeName::QueueArn].clone();
    events
        .put_rule()
        .name("floe-all")
        .event_bus_name(&bus)
        .event_pattern(json!({"source": [floe_events::SOURCE]}).to_string())
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule("floe-all")
        .event_bus_name(&bus)
        .targets(
            Target::builder()
                .id("queue")
                .arn(queue_arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    (bus, queue_url)
}

/// An attribute as DynamoDB's JSON writes it (what Lambda hands the function).
fn dynamodb_json(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::B(b) => {
            json!({"B": base64::engine::general_purpose::STANDARD.encode(b.as_ref())})
        }
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        other => panic!("the catalog writes no {other:?}"),
    }
}

fn image(attributes: &std::collections::HashMap<String, AttributeValue>) -> Value {
    attributes
        .iter()
        .map(|(name, value)| (name.clone(), dynamodb_json(value)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Every record of the table's stream, oldest first, as the records of a Lambda event.
async fn stream_records(table: &str) -> Vec<Value> {
    let sdk = moto::sdk().await;
    let arn = aws_sdk_dynamodb::Client::new(&sdk)
        .describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap()
        .latest_stream_arn
        .expect("the catalog table has a stream");
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let description = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap()
        .stream_description
        .unwrap();
    let mut records = Vec::new();
    for shard in description.shards() {
        let mut iterator = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id().unwrap())
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator;
        while let Some(current) = iterator {
            let page = streams
                .get_records()
                .shard_iterator(current)
                .send()
                .await
                .unwrap();
            if page.records().is_empty() {
                break;
            }
            for record in page.records() {
                let change = record.dynamodb().unwrap();
                records.push(json!({
                    "eventID": record.event_id(),
                    "eventName": record.event_name().unwrap().as_str(),
                    "eventVersion": "1.1",
                    "eventSource": "aws:dynamodb",
                    "awsRegion": "us-east-1",
                    "eventSourceARN": arn,
                    "dynamodb": {
                        "ApproximateCreationDateTime": change.approximate_creation_date_time().map_or(0.0, |t| t.as_secs_f64()),
                        "Keys": image(change.keys().unwrap()),
                        "NewImage": change.new_image().map(image),
                        "SequenceNumber": change.sequence_number(),
                        "SizeBytes": change.size_bytes(),
                        "StreamViewType": "NEW_IMAGE"
                    }
                }));
            }
            iterator = page.next_shard_iterator;
        }
    }
    records
}

/// The CloudEvents the queue received, waiting for `count` of them.
async fn received(queue_url: &str, count: usize) -> Vec<Value> {
    let sqs = aws_sdk_sqs::Client::new(&moto::sdk().await);
    let mut events = Vec::new();
    for _ in 0..50 {
        let messages = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        for message in messages.messages() {
            let envelope: Value = serde_json::from_str(message.body().unwrap()).unwrap();
            assert_eq!(envelope["source"], floe_events::SOURCE);
            assert_eq!(envelope["detail-type"], envelope["detail"]["type"]);
            events.push(envelope["detail"].clone());
            sqs.delete_message()
                .queue_url(queue_url)
                .receipt_handle(message.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
        if events.len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    events
}

fn sequences(events: &[Value]) -> Vec<u64> {
    let mut numbers: Vec<u64> = events
        .iter()
        .map(|e| e["data"]["sequence"].as_u64().unwrap())
        .collect();
    numbers.sort();
    numbers
}

/// The stream's records after the function saw the changes' waiting events: it numbers them,
/// and the numbered events follow on the stream.
async fn stream_after_numbering(c: &TestCatalog, bus: &str) -> Event {
    let table = c.dynamodb_table.as_deref().unwrap();
    let written: Event =
        serde_json::from_value(json!({"Records": stream_records(table).await})).unwrap();
    assert!(
        written
            .records
            .iter()
            .all(|r| floe_events::change_event(r).unwrap().is_none()),
        "a change's events wait to be numbered"
    );
    let waiting = floe_events::waiting_orgs(&written);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    let client = aws_sdk_eventbridge::Client::new(&moto::sdk().await);
    let answer = floe_events::handle(&client, &*c.store, bus, written.clone())
        .await
        .unwrap();
    assert!(answer.batch_item_failures.is_empty());
    let mut all: Event =
        serde_json::from_value(json!({"Records": stream_records(table).await})).unwrap();
    all.records.drain(..written.records.len());
    all
}

#[tokio::test]
async fn the_stream_puts_every_change_event_on_the_bus() {
    let c = TestCatalog::aws().await;
    let (bus, queue_url) = bus_to_queue().await;
    c.create_namespace("streamed").await;
    c.create_table("streamed", "t").await;
    for id in 1..=3 {
        c.append_snapshot(ADMIN_TOKEN, "streamed", "t", id)
            .await
            .assert_ok(200);
    }
    let batch = stream_after_numbering(&c, &bus).await;
    // The stream carries every row the numbering wrote; five of them are events.
    assert!(batch.records.len() > 5, "{}", batch.records.len());
    let events: Vec<_> = batch
        .records
        .iter()
        .filter_map(|r| floe_events::change_event(r).unwrap())
        .collect();
    assert_eq!(events.len(), 5);

    let client = aws_sdk_eventbridge::Client::new(&moto::sdk().await);
    let answer = floe_events::publish(&client, &bus, batch).await.unwrap();
    assert!(answer.batch_item_failures.is_empty());
    let got = received(&queue_url, 5).await;
    assert_eq!(sequences(&got), [1, 2, 3, 4, 5]);
    let mut by_sequence = got.clone();
    by_sequence.sort_by_key(|e| e["data"]["sequence"].as_u64());
    let kinds: Vec<&str> = by_sequence
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "io.floe.namespace.created",
            "io.floe.table.created",
            "io.floe.table.committed",
            "io.floe.table.committed",
            "io.floe.table.committed"
        ]
    );
}

#[tokio::test]
async fn a_failed_put_names_the_record_the_stream_retries_from() {
    let c = TestCatalog::aws().await;
    let (bus, queue_url) = bus_to_queue().await;
    c.create_namespace("retried").await;
    c.create_table("retried", "t").await;
    let batch = stream_after_numbering(&c, &bus).await;
    let first_event = batch
        .records
        .iter()
        .position(|r| floe_events::change_event(r).unwrap().is_some())
        .unwrap();

    // A bus that does not exist refuses the puts: the answer is the first event's record.
    let client = aws_sdk_eventbridge::Client::new(&moto::sdk().await);
    let answer = floe_events::publish(&client, &moto::unique("no-bus"), batch.clone())
        .await
        .unwrap();
    assert_eq!(answer.batch_item_failures.len(), 1);
    assert_eq!(
        answer.batch_item_failures[0].item_identifier,
        batch.records[first_event].change.sequence_number
    );

    // Lambda retries from that record on: everything arrives, once.
    let mut retried = batch.clone();
    retried.records.drain(..first_event);
    let answer = floe_events::publish(&client, &bus, retried).await.unwrap();
    assert!(answer.batch_item_failures.is_empty());
    let got = received(&queue_url, 2).await;
    assert_eq!(sequences(&got), [1, 2]);
}
