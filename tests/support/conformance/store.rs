//! One `MetaStore` conformance suite, run against every adapter: the embedded store
//! (tests/local) and DynamoDB (tests/aws).

use std::sync::Arc;

use floe::store::{Condition, Item, Key, MetaStore, StoreError, Token, Write};
use tokio::sync::Barrier;

/// An item with no token, index or expiry.
pub fn item(pk: &str, sk: &str, version: u64, body: &str) -> Item {
    Item {
        key: Key::new(pk, sk),
        version,
        token: None,
        body: body.as_bytes().to_vec(),
        index: None,
        expires_at: None,
    }
}

fn tokened(pk: &str, sk: &str, body: &str, token: Token) -> Item {
    Item {
        token: Some(token),
        ..item(pk, sk, 1, body)
    }
}

fn indexed(pk: &str, sk: &str, version: u64, index_sk: &str) -> Item {
    Item {
        index: Some(Key::new("IDX", index_sk)),
        ..item(pk, sk, version, "indexed")
    }
}

/// The sparse index lists exactly the items that carry an index key, in index order.
async fn sparse_index_follows_writes(store: &dyn MetaStore) {
    store
        .write(vec![
            put(indexed("I#1", "A", 1, "0001#a"), Condition::NotExists),
            put(indexed("I#1", "B", 1, "0003#b"), Condition::NotExists),
            put(item("I#1", "C", 1, "plain"), Condition::NotExists),
        ])
        .await
        .unwrap();
    let keys = |found: Vec<Key>| found.into_iter().map(|k| k.sk).collect::<Vec<_>>();
    assert_eq!(
        keys(store.query_index("IDX", "0002~", 10).await.unwrap()),
        ["A"]
    );
    assert_eq!(
        keys(store.query_index("IDX", "9", 10).await.unwrap()),
        ["A", "B"]
    );
    assert_eq!(keys(store.query_index("IDX", "9", 1).await.unwrap()), ["A"]);
    assert!(
        store
            .query_index("OTHER", "9", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Rewriting without an index key removes the entry; deleting the item removes its entry.
    store
        .write(vec![put(
            item("I#1", "A", 2, "restored"),
            Condition::VersionIs(1),
        )])
        .await
        .unwrap();
    assert_eq!(
        keys(store.query_index("IDX", "9", 10).await.unwrap()),
        ["B"]
    );
    store
        .write(vec![Write::Delete {
            key: Key::new("I#1", "B"),
            condition: Condition::Exists,
        }])
        .await
        .unwrap();
    assert!(store.query_index("IDX", "9", 10).await.unwrap().is_empty());
}

/// A put of `item` on `condition`.
pub fn put(item: Item, condition: Condition) -> Write {
    Write::Put { item, condition }
}

async fn conditional_writes(store: &dyn MetaStore) {
    let key = Key::new("P#1", "ROW");
    store
        .write(vec![put(
            item("P#1", "ROW", 1, "one"),
            Condition::NotExists,
        )])
        .await
        .unwrap();
    let again = store
        .write(vec![put(
            item("P#1", "ROW", 1, "dup"),
            Condition::NotExists,
        )])
        .await;
    assert!(
        matches!(again, Err(StoreError::ConditionFailed { index: 0, .. })),
        "{again:?}"
    );
    let read = store.get(&key).await.unwrap().unwrap();
    assert_eq!((read.version, read.body.as_slice()), (1, b"one".as_slice()));
    store
        .write(vec![put(
            item("P#1", "ROW", 2, "two"),
            Condition::VersionIs(1),
        )])
        .await
        .unwrap();
    let stale = store
        .write(vec![put(
            item("P#1", "ROW", 2, "stale"),
            Condition::VersionIs(1),
        )])
        .await;
    assert!(
        matches!(stale, Err(StoreError::ConditionFailed { index: 0, .. })),
        "{stale:?}"
    );
    assert_eq!(store.get(&key).await.unwrap().unwrap().body, b"two");
    let wrong = store
        .write(vec![Write::Delete {
            key: key.clone(),
            condition: Condition::VersionIs(7),
        }])
        .await;
    assert!(matches!(wrong, Err(StoreError::ConditionFailed { .. })));
    store
        .write(vec![Write::Delete {
            key: key.clone(),
            condition: Condition::VersionIs(2),
        }])
        .await
        .unwrap();
    assert!(store.get(&key).await.unwrap().is_none());
    let exists = store
        .write(vec![put(item("P#1", "ROW", 3, "x"), Condition::Exists)])
        .await;
    assert!(matches!(exists, Err(StoreError::ConditionFailed { .. })));
}

async fn transactions_are_atomic(store: &dyn MetaStore) {
    store
        .write(vec![put(item("T#1", "B", 1, "b"), Condition::NotExists)])
        .await
        .unwrap();
    let failed = store
        .write(vec![
            put(item("T#1", "A", 1, "a"), Condition::NotExists),
            put(item("T#1", "B", 1, "b2"), Condition::NotExists),
        ])
        .await;
    assert!(
        matches!(failed, Err(StoreError::ConditionFailed { index: 1, .. })),
        "{failed:?}"
    );
    assert!(
        store.get(&Key::new("T#1", "A")).await.unwrap().is_none(),
        "nothing of a failed batch lands"
    );
    let check = store
        .write(vec![
            Write::Check {
                key: Key::new("T#1", "MISSING"),
                condition: Condition::Exists,
            },
            put(item("T#1", "C", 1, "c"), Condition::NotExists),
        ])
        .await;
    assert!(
        matches!(check, Err(StoreError::ConditionFailed { index: 0, .. })),
        "{check:?}"
    );
    assert!(store.get(&Key::new("T#1", "C")).await.unwrap().is_none());
    // A Check and a Delete of the same item in one batch: refused before anything is sent.
    let twice = store
        .write(vec![
            Write::Check {
                key: Key::new("T#1", "B"),
                condition: Condition::VersionIs(1),
            },
            put(item("T#1", "A", 1, "a"), Condition::NotExists),
            Write::Delete {
                key: Key::new("T#1", "B"),
                condition: Condition::Exists,
            },
        ])
        .await;
    assert!(matches!(twice, Err(StoreError::Invalid(_))), "{twice:?}");
    store
        .write(vec![
            put(item("T#1", "A", 1, "a"), Condition::NotExists),
            Write::Delete {
                key: Key::new("T#1", "B"),
                condition: Condition::VersionIs(1),
            },
        ])
        .await
        .unwrap();
    assert!(store.get(&Key::new("T#1", "A")).await.unwrap().is_some());
    assert!(store.get(&Key::new("T#1", "B")).await.unwrap().is_none());
}

async fn queries_page_in_order(store: &dyn MetaStore) {
    let mut writes = Vec::new();
    for n in [3, 1, 5, 2, 4] {
        writes.push(put(
            item("Q#1", &format!("ROW#{n}"), 1, "r"),
            Condition::NotExists,
        ));
    }
    writes.push(put(item("Q#1", "OTHER#1", 1, "o"), Condition::NotExists));
    writes.push(put(
        item("Q#2", "ROW#9", 1, "elsewhere"),
        Condition::NotExists,
    ));
    store.write(writes).await.unwrap();
    let sks = |items: Vec<Item>| items.into_iter().map(|i| i.key.sk).collect::<Vec<_>>();
    assert_eq!(
        sks(store.query("Q#1", "ROW#", None, 100).await.unwrap()),
        ["ROW#1", "ROW#2", "ROW#3", "ROW#4", "ROW#5"]
    );
    assert_eq!(
        sks(store
            .query("Q#1", "ROW#", Some("ROW#2"), 100)
            .await
            .unwrap()),
        ["ROW#3", "ROW#4", "ROW#5"]
    );
    assert_eq!(
        sks(store.query("Q#1", "ROW#", None, 2).await.unwrap()),
        ["ROW#1", "ROW#2"]
    );
    assert!(
        store
            .query("Q#1", "NONE#", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // An empty prefix is the whole partition.
    assert_eq!(
        sks(store.query("Q#1", "", None, 100).await.unwrap()),
        ["OTHER#1", "ROW#1", "ROW#2", "ROW#3", "ROW#4", "ROW#5"]
    );
}

/// Many tasks race a compare-and-swap on one item, round after round: exactly one wins each
/// round and no write is lost.
async fn concurrent_cas_has_one_winner_per_round(store: Arc<dyn MetaStore>) {
    const TASKS: usize = 12;
    const ROUNDS: u64 = 8;
    let key = Key::new("C#1", "COUNTER");
    store
        .write(vec![put(
            item("C#1", "COUNTER", 1, "start"),
            Condition::NotExists,
        )])
        .await
        .unwrap();
    for round in 1..=ROUNDS {
        let barrier = Arc::new(Barrier::new(TASKS));
        let mut tasks = Vec::new();
        for task in 0..TASKS {
            let (store, barrier) = (store.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let next = item(
                    "C#1",
                    "COUNTER",
                    round + 1,
                    &format!("round {round} task {task}"),
                );
                store
                    .write(vec![put(next, Condition::VersionIs(round))])
                    .await
            }));
        }
        let mut winners = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(()) => winners += 1,
                Err(StoreError::ConditionFailed { .. }) => {}
                Err(other) => panic!("unexpected store error: {other}"),
            }
        }
        assert_eq!(winners, 1, "round {round}");
    }
    assert_eq!(store.get(&key).await.unwrap().unwrap().version, ROUNDS + 1);
}

/// A token condition holds only for the token last written: a version that restarts when an
/// item is deleted and re-created cannot satisfy it, and tokenless items match `TokenIs(None)`.
async fn token_conditions(store: &dyn MetaStore) {
    let (first, second, third) = (Token::random(), Token::random(), Token::random());
    store
        .write(vec![put(
            item("K#1", "LEGACY", 4, "old"),
            Condition::NotExists,
        )])
        .await
        .unwrap();
    assert!(matches!(
        store
            .write(vec![put(
                tokened("K#1", "LEGACY", "x", first),
                Condition::TokenIs(Some(first))
            )])
            .await,
        Err(StoreError::ConditionFailed { .. })
    ));
    store
        .write(vec![put(
            tokened("K#1", "LEGACY", "tokened", first),
            Condition::TokenIs(None),
        )])
        .await
        .unwrap();
    let read = store
        .get(&Key::new("K#1", "LEGACY"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.token, Some(first));
    assert_eq!(read.body, b"tokened");
    assert!(matches!(
        store
            .write(vec![put(
                tokened("K#1", "LEGACY", "x", second),
                Condition::TokenIs(None)
            )])
            .await,
        Err(StoreError::ConditionFailed { .. })
    ));

    // Drop and re-create: same key, same version 1, new token. The old token no longer holds.
    store
        .write(vec![put(
            tokened("K#1", "T", "a", first),
            Condition::NotExists,
        )])
        .await
        .unwrap();
    store
        .write(vec![Write::Delete {
            key: Key::new("K#1", "T"),
            condition: Condition::TokenIs(Some(first)),
        }])
        .await
        .unwrap();
    store
        .write(vec![put(
            tokened("K#1", "T", "b", second),
            Condition::NotExists,
        )])
        .await
        .unwrap();
    assert!(matches!(
        store
            .write(vec![put(
                tokened("K#1", "T", "stale", third),
                Condition::TokenIs(Some(first))
            )])
            .await,
        Err(StoreError::ConditionFailed { index: 0, .. })
    ));
    assert!(matches!(
        store
            .write(vec![put(
                tokened("K#1", "ABSENT", "x", third),
                Condition::TokenIs(None)
            )])
            .await,
        Err(StoreError::ConditionFailed { .. })
    ));
    store
        .write(vec![put(
            tokened("K#1", "T", "c", third),
            Condition::TokenIs(Some(second)),
        )])
        .await
        .unwrap();
    let read = store.get(&Key::new("K#1", "T")).await.unwrap().unwrap();
    assert_eq!((read.token, read.body), (Some(third), b"c".to_vec()));
    let listed = store.query("K#1", "T", None, 10).await.unwrap();
    assert_eq!(listed[0].token, Some(third), "queries return tokens too");

    // A plain put clears the token.
    store
        .write(vec![put(
            item("K#1", "T", 2, "plain"),
            Condition::TokenIs(Some(third)),
        )])
        .await
        .unwrap();
    assert_eq!(
        store
            .get(&Key::new("K#1", "T"))
            .await
            .unwrap()
            .unwrap()
            .token,
        None
    );
}

/// An item's expiry is stored and read back, rewritten with the item and conditions still see
/// the item until the store deletes it.
async fn expiries_round_trip(store: &dyn MetaStore) {
    let later = unix_now() + 3600;
    let expiring = Item {
        expires_at: Some(later),
        ..item("E#1", "A", 1, "expiring")
    };
    store
        .write(vec![put(expiring.clone(), Condition::NotExists)])
        .await
        .unwrap();
    let read = store.get(&Key::new("E#1", "A")).await.unwrap().unwrap();
    assert_eq!(read, expiring);
    let found = store.query("E#1", "", None, 10).await.unwrap();
    assert_eq!(found[0].expires_at, Some(later));
    // Rewritten without an expiry, the item no longer expires.
    store
        .write(vec![put(
            item("E#1", "A", 2, "kept"),
            Condition::VersionIs(1),
        )])
        .await
        .unwrap();
    let read = store.get(&Key::new("E#1", "A")).await.unwrap().unwrap();
    assert_eq!(read.expires_at, None);
}

/// Now, in seconds since the Unix epoch (the unit of `Item::expires_at`).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Conditional writes, tokens, atomic transactions, ordered and paged queries, the sparse index,
/// expiries and a compare-and-swap raced by many tasks, as the port says. `store` is empty.
pub async fn suite(store: Arc<dyn MetaStore>) {
    expiries_round_trip(&*store).await;
    token_conditions(&*store).await;
    conditional_writes(&*store).await;
    transactions_are_atomic(&*store).await;
    queries_page_in_order(&*store).await;
    sparse_index_follows_writes(&*store).await;
    concurrent_cas_has_one_winner_per_round(store).await;
}
