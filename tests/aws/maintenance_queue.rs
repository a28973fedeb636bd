//! Maintenance spread over a queue, on moto's SQS: a thousand tables due at once are claimed
//! by the scheduler and sent as messages; workers receive them in batches, hand each batch to
//! the worker's handler as Lambda's event source mapping does (decoded as Lambda decodes it),
//! and delete what it did not report as failed. One worker dies with a batch in hand: those
//! messages come back after the queue's visibility timeout and another worker takes them.
//! Every table is maintained exactly once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::QueueAttributeName;
use floe_tests::*;
use serde_json::json;

const TABLES: u64 = 1000;

#[tokio::test]
async fn a_thousand_due_tables_drain_through_the_queue_once_each() {
    let c = Arc::new(TestCatalog::new().await);
    let namespaces = c.create_tables_spread("queue", TABLES).await;

    let sqs = aws_sdk_sqs::Client::new(&moto::sdk().await);
    let url = sqs
        .create_queue()
        .queue_name(moto::unique("floe-maintenance"))
        .attributes(QueueAttributeName::VisibilityTimeout, "2")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let queue = floe_queue::SqsQueue::new(sqs.clone(), url.clone());
    let now = c.now_ms();
    let scheduled = floe_queue::schedule(&c.catalog, &queue, now, 5_000)
        .await
        .unwrap();
    assert_eq!(scheduled.claimed as u64, TABLES);
    assert_eq!(scheduled.sent as u64, TABLES);
    // Nothing more is due: a second scheduler run claims nothing.
    let again = floe_queue::schedule(&c.catalog, &queue, now, 5_000)
        .await
        .unwrap();
    assert_eq!(again.claimed, 0);

    let maintained = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let died = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (c, sqs, url) = (c.clone(), sqs.clone(), url.clone());
            let (maintained, died) = (maintained.clone(), died.clone());
            tokio::spawn(async move {
                let mut empty = 0;
                while empty < 3 {
                    let received = sqs
                        .receive_message()
                        .queue_url(&url)
                        .max_number_of_messages(10)
                        .send()
                        .await
                        .unwrap();
                    let messages = received.messages.unwrap_or_default();
                    if messages.is_empty() {
                        empty += 1;
                        tokio::time::sleep(Duration::from_millis(800)).await;
                        continue;
                    }
                    empty = 0;
                    // The first batch of one worker is lost with its worker: no deletes.
                    if !died.swap(true, std::sync::atomic::Ordering::SeqCst) {
                        continue;
                    }
                    // As Lambda's event source mapping hands a batch to the function.
                    let records: Vec<_> = messages
                        .iter()
                        .map(|m| {
                            json!({
                                "messageId": m.message_id(),
                                "receiptHandle": m.receipt_handle(),
                                "body": m.body(),
                                "attributes": {"ApproximateReceiveCount": "1"},
                                "messageAttributes": {},
                                "md5OfBody": m.md5_of_body(),
                                "eventSource": "aws:sqs",
                                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-maintenance",
                                "awsRegion": "us-east-1"
                            })
                        })
                        .collect();
                    let event: SqsEvent =
                        serde_json::from_value(json!({ "Records": records })).unwrap();
                    let answer = floe_queue::work(&c.catalog, event, now).await;
                    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
                    let entries = messages
                        .iter()
                        .enumerate()
                        .map(|(i, m)| {
                            aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                                .id(i.to_string())
                                .receipt_handle(m.receipt_handle().unwrap())
                                .build()
                                .unwrap()
                        })
                        .collect();
                    sqs.delete_message_batch()
                        .queue_url(&url)
                        .set_entries(Some(entries))
                        .send()
                        .await
                        .unwrap();
                    for m in &messages {
                        let due: floe::catalog::tables::maintenance::DueTable =
                            serde_json::from_str(m.body().unwrap()).unwrap();
                        maintained
                            .lock()
                            .unwrap()
                            .push(format!("{}/{}", due.namespace, due.table));
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    assert!(died.load(std::sync::atomic::Ordering::SeqCst));
    let handled = maintained.lock().unwrap().clone();
    let distinct: BTreeSet<&String> = handled.iter().collect();
    assert_eq!(
        distinct.len() as u64,
        TABLES,
        "every table's message handled"
    );
    // Exactly once each, by the state every table's run recorded.
    for ns in &namespaces {
        let states = c.maintenance_states(ns).await;
        assert_eq!(states.len(), 50, "{ns}");
        for (table, state) in states {
            assert_eq!(state.runs, 1, "{ns}/{table}: {state:?}");
            assert_eq!(state.lease_until_ms, 0);
        }
    }
}
