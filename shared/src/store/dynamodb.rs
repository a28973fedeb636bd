//! `MetaStore` on DynamoDB: one table, `pk`/`sk` keys, a numeric version `v` and the row body.
//!
//! Every write, single- or multi-item, is one TransactWriteItems with a fresh client request
//! token, so the SDK's own retries of it are idempotent: a failed condition is proof that nothing
//! was written, never the echo of an earlier attempt of the same request that had landed.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck, Delete, GlobalSecondaryIndex,
    KeySchemaElement, KeyType, Projection, ProjectionType, Put, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification, TransactWriteItem,
};

use super::{Condition, Item, Key, MetaStore, StoreError, StoreUse, Token, Write, validate_batch};

/// Name of the sparse index over soft-deleted namespaces, for the purge.
pub const DELETED_INDEX: &str = "deleted";

/// The attribute DynamoDB's Time to Live deletes items by (Unix seconds); template.yaml enables
/// it on the catalog table.
pub const TTL_ATTRIBUTE: &str = "ttl";

type Attributes = HashMap<String, AttributeValue>;

/// DynamoDB-backed store; cheap to clone.
#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

fn key_attributes(key: &Key) -> Attributes {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(key.pk.clone())),
        ("sk".to_owned(), AttributeValue::S(key.sk.clone())),
    ])
}

fn item_attributes(item: &Item) -> Attributes {
    let mut attributes = key_attributes(&item.key);
    attributes.insert("v".into(), AttributeValue::N(item.version.to_string()));
    attributes.insert(
        "body".into(),
        AttributeValue::B(Blob::new(item.body.clone())),
    );
    if let Some(token) = item.token {
        attributes.insert("tok".into(), AttributeValue::S(token.to_hex()));
    }
    if let Some(index) = &item.index {
        attributes.insert("gsi1pk".into(), AttributeValue::S(index.pk.clone()));
        attributes.insert("gsi1sk".into(), AttributeValue::S(index.sk.clone()));
    }
    if let Some(expires_at) = item.expires_at {
        attributes.insert(
            TTL_ATTRIBUTE.into(),
            AttributeValue::N(expires_at.to_string()),
        );
    }
    attributes
}

fn decode(attributes: &Attributes) -> Result<Item, StoreError> {
    let text = |name: &str| match attributes.get(name) {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    };
    let key = Key::new(
        text("pk").unwrap_or_default(),
        text("sk").unwrap_or_default(),
    );
    let corrupt = |reason: &str| StoreError::Corrupt {
        key: key.clone(),
        reason: reason.to_owned(),
    };
    let version = match attributes.get("v") {
        Some(AttributeValue::N(n)) => n
            .parse::<u64>()
            .map_err(|_| corrupt("version is not a number"))?,
        _ => return Err(corrupt("no version attribute")),
    };
    let body = match attributes.get("body") {
        Some(AttributeValue::B(b)) => b.clone().into_inner(),
        _ => return Err(corrupt("no body attribute")),
    };
    let index = match (text("gsi1pk"), text("gsi1sk")) {
        (Some(pk), Some(sk)) => Some(Key::new(pk, sk)),
        _ => None,
    };
    let token = match text("tok") {
        Some(hex) => Some(Token::from_hex(&hex).ok_or_else(|| corrupt("malformed token"))?),
        None => None,
    };
    let expires_at = match attributes.get(TTL_ATTRIBUTE) {
        Some(AttributeValue::N(n)) => Some(
            n.parse::<u64>()
                .map_err(|_| corrupt("expiry is not a number"))?,
        ),
        _ => None,
    };
    Ok(Item {
        key,
        version,
        token,
        body,
        index,
        expires_at,
    })
}

/// The condition expression and its attribute values, as the SDK's `set_*` setters take them
/// (`None` for an unconditional write). Single writes and transactions share it.
fn condition_parts(condition: Condition) -> (Option<String>, Option<Attributes>) {
    let (expr, value) = match condition {
        Condition::Always => return (None, None),
        Condition::NotExists => ("attribute_not_exists(pk)", None),
        Condition::Exists => ("attribute_exists(pk)", None),
        Condition::VersionIs(v) => ("v = :expected", Some(AttributeValue::N(v.to_string()))),
        Condition::TokenIs(Some(t)) => ("tok = :expected", Some(AttributeValue::S(t.to_hex()))),
        Condition::TokenIs(None) => ("attribute_exists(pk) AND attribute_not_exists(tok)", None),
    };
    let values = value.map(|v| HashMap::from([(":expected".to_owned(), v)]));
    (Some(expr.to_owned()), values)
}

/// Whether a failed request may still have been applied.
fn write_error<E: ProvideErrorMetadata + std::fmt::Debug, R: std::fmt::Debug>(
    e: SdkError<E, R>,
) -> StoreError {
    // TransactionInProgressException is not among them: an earlier attempt with the same client
    // request token is still running and may yet land.
    const NOT_APPLIED: [&str; 3] = [
        "ValidationException",
        "ResourceNotFoundException",
        "AccessDeniedException",
    ];
    match &e {
        SdkError::ConstructionFailure(_) => StoreError::Unavailable(format!("{e:?}")),
        SdkError::ServiceError(service) => {
            let code = service.err().code();
            let detail = || {
                format!(
                    "{}: {}",
                    code.unwrap_or_default(),
                    service.err().message().unwrap_or_default()
                )
            };
            if code.is_some_and(is_throttling) {
                StoreError::Throttled(detail())
            } else if code.is_some_and(|c| NOT_APPLIED.contains(&c)) {
                StoreError::Unavailable(detail())
            } else {
                StoreError::Unknown(format!("{e:?}"))
            }
        }
        _ => StoreError::Unknown(format!("{e:?}")),
    }
}

/// DynamoDB's codes for a request it declined for now: throughput or request-rate limits.
fn is_throttling(code: &str) -> bool {
    matches!(
        code,
        "ProvisionedThroughputExceededException"
            | "ThrottlingException"
            | "RequestLimitExceeded"
            | "ThrottlingError"
            | "ProvisionedThroughputExceeded"
    )
}

fn read_error<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::fmt::Debug,
    R: std::fmt::Debug,
{
    match &e {
        SdkError::ServiceError(service) if service.err().code().is_some_and(is_throttling) => {
            StoreError::Throttled(format!("{e:?}"))
        }
        _ => StoreError::Unavailable(format!("{e:?}")),
    }
}

impl DynamoStore {
    /// The IAM actions this adapter calls for each use of the store (crate::iam). Every write
    /// is one TransactWriteItems, which IAM authorizes per item through the actions of its parts.
    pub fn aws_actions(store_use: StoreUse) -> &'static [&'static str] {
        match store_use {
            StoreUse::Get => &["dynamodb:GetItem"],
            StoreUse::Query => &["dynamodb:Query"],
            // On the index resource (`<table>/index/deleted`).
            StoreUse::QueryIndex => &["dynamodb:Query"],
            StoreUse::Put => &["dynamodb:PutItem"],
            StoreUse::Delete => &["dynamodb:DeleteItem"],
            StoreUse::Check => &["dynamodb:ConditionCheckItem"],
        }
    }

    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// A store on `table` with the SDK settings given (its endpoint: moto's, for the bench).
    pub fn from_sdk(sdk: &aws_config::SdkConfig, table: impl Into<String>) -> Self {
        Self::new(Client::new(sdk), table)
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table and its indexes if missing (the same definition template.yaml declares).
    pub async fn create_table(&self) -> Result<bool, StoreError> {
        let attribute = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition")
        };
        let key = |name: &str, kind: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .expect("key schema")
        };
        let deleted = GlobalSecondaryIndex::builder()
            .index_name(DELETED_INDEX)
            .key_schema(key("gsi1pk", KeyType::Hash))
            .key_schema(key("gsi1sk", KeyType::Range))
            .projection(
                Projection::builder()
                    .projection_type(ProjectionType::KeysOnly)
                    .build(),
            )
            .build()
            .expect("index definition");
        let created = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attribute("pk"))
            .attribute_definitions(attribute("sk"))
            .attribute_definitions(attribute("gsi1pk"))
            .attribute_definitions(attribute("gsi1sk"))
            .key_schema(key("pk", KeyType::Hash))
            .key_schema(key("sk", KeyType::Range))
            .global_secondary_indexes(deleted)
            // New items (the change events among them) feed the events function.
            .stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::NewImage)
                    .build()
                    .expect("stream specification"),
            )
            .send()
            .await;
        match created {
            Ok(_) => {
                self.enable_time_to_live().await?;
                Ok(true)
            }
            Err(e) if e.code() == Some("ResourceInUseException") => Ok(false),
            Err(e) => Err(read_error(e)),
        }
    }

    /// Deletes the table with every item in it: for the bench's tables of one run each.
    pub async fn delete_table(&self) -> Result<(), StoreError> {
        self.client
            .delete_table()
            .table_name(&self.table)
            .send()
            .await
            .map(drop)
            .map_err(read_error)
    }

    /// Lets DynamoDB delete expired items (idempotency keys) by their [`TTL_ATTRIBUTE`].
    async fn enable_time_to_live(&self) -> Result<(), StoreError> {
        let specification = TimeToLiveSpecification::builder()
            .attribute_name(TTL_ATTRIBUTE)
            .enabled(true)
            .build()
            .expect("time to live specification");
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(specification)
            .send()
            .await
            .map(drop)
            .map_err(read_error)
    }

    fn transact_item(&self, write: &Write) -> TransactWriteItem {
        let (expr, values) = condition_parts(write.condition());
        match write {
            Write::Put { item, .. } => TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(item_attributes(item)))
                        .set_condition_expression(expr)
                        .set_expression_attribute_values(values)
                        .build()
                        .expect("put"),
                )
                .build(),
            Write::Delete { key, .. } => TransactWriteItem::builder()
                .delete(
                    Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attributes(key)))
                        .set_condition_expression(expr)
                        .set_expression_attribute_values(values)
                        .build()
                        .expect("delete"),
                )
                .build(),
            Write::Check { key, .. } => TransactWriteItem::builder()
                .condition_check(
                    ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attributes(key)))
                        .condition_expression(expr.unwrap_or_else(|| {
                            "attribute_exists(pk) OR attribute_not_exists(pk)".into()
                        }))
                        .set_expression_attribute_values(values)
                        .build()
                        .expect("condition check"),
                )
                .build(),
        }
    }

    async fn transact(&self, writes: &[Write]) -> Result<(), StoreError> {
        let items = writes.iter().map(|w| self.transact_item(w)).collect();
        let outcome = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(uuid::Uuid::new_v4().to_string())
            .send()
            .await;
        match outcome {
            Ok(_) => Ok(()),
            Err(e) => {
                if let Some(canceled) = e.as_service_error().and_then(|s| match s {
                    aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) => Some(c),
                    _ => None,
                }) {
                    let codes: Vec<Option<&str>> = canceled
                        .cancellation_reasons()
                        .iter()
                        .map(|r| r.code())
                        .collect();
                    return Err(match cancellation(&codes) {
                        Cancellation::ConditionFailed(index) => StoreError::ConditionFailed {
                            index,
                            key: writes[index].key().clone(),
                        },
                        Cancellation::Conflict => StoreError::Conflict(format!(
                            "transaction cancelled by a concurrent one: {codes:?}"
                        )),
                        Cancellation::Throttled => StoreError::Throttled(format!(
                            "transaction cancelled: {codes:?}"
                        )),
                        Cancellation::NotApplied => StoreError::Unavailable(format!(
                            "transaction cancelled: {codes:?}"
                        )),
                    });
                }
                Err(write_error(e))
            }
        }
    }
}

/// What a cancelled transaction's reasons prove. Nothing of a cancelled transaction is applied.
#[derive(Debug, PartialEq, Eq)]
enum Cancellation {
    /// The condition of this write failed.
    ConditionFailed(usize),
    /// Another transaction held one of the items: a lost race, like a failed condition.
    Conflict,
    /// An item's throughput was exceeded: declined for now.
    Throttled,
    /// Another transient cause.
    NotApplied,
}

fn cancellation(codes: &[Option<&str>]) -> Cancellation {
    if let Some(index) = codes
        .iter()
        .position(|c| *c == Some("ConditionalCheckFailed"))
    {
        Cancellation::ConditionFailed(index)
    } else if codes.contains(&Some("TransactionConflict")) {
        Cancellation::Conflict
    } else if codes.iter().flatten().any(|c| is_throttling(c)) {
        Cancellation::Throttled
    } else {
        Cancellation::NotApplied
    }
}

#[async_trait]
impl MetaStore for DynamoStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        let answer = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key_attributes(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(read_error)?;
        answer.item().map(decode).transpose()
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::new();
        let mut start = start_after.map(|after| {
            HashMap::from([
                ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
                ("sk".to_owned(), AttributeValue::S(after.to_owned())),
            ])
        });
        while out.len() < limit {
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_values(":pk", AttributeValue::S(pk.to_owned()));
            // DynamoDB refuses an empty string as a key condition value: no prefix, no condition.
            request = if sk_prefix.is_empty() {
                request.key_condition_expression("pk = :pk")
            } else {
                request
                    .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                    .expression_attribute_values(":prefix", AttributeValue::S(sk_prefix.to_owned()))
            };
            let page = request
                .consistent_read(true)
                .limit(
                    i32::try_from(limit - out.len())
                        .unwrap_or(i32::MAX)
                        .min(1000),
                )
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(read_error)?;
            for attributes in page.items() {
                out.push(decode(attributes)?);
            }
            match page.last_evaluated_key() {
                Some(last) if !last.is_empty() => start = Some(last.clone()),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn query_index(
        &self,
        index_pk: &str,
        upto_sk: &str,
        limit: usize,
    ) -> Result<Vec<Key>, StoreError> {
        let mut out = Vec::new();
        let mut start = None;
        while out.len() < limit {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(DELETED_INDEX)
                .key_condition_expression("gsi1pk = :pk AND gsi1sk <= :upto")
                .expression_attribute_values(":pk", AttributeValue::S(index_pk.to_owned()))
                .expression_attribute_values(":upto", AttributeValue::S(upto_sk.to_owned()))
                .limit(
                    i32::try_from(limit - out.len())
                        .unwrap_or(i32::MAX)
                        .min(1000),
                )
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(read_error)?;
            for attributes in page.items() {
                let text = |name: &str| match attributes.get(name) {
                    Some(AttributeValue::S(s)) => Some(s.clone()),
                    _ => None,
                };
                if let (Some(pk), Some(sk)) = (text("pk"), text("sk")) {
                    out.push(Key::new(pk, sk));
                }
            }
            match page.last_evaluated_key() {
                Some(last) if !last.is_empty() => start = Some(last.clone()),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        validate_batch(&writes)?;
        self.transact(&writes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellation_reasons_classify_what_happened() {
        let none = "None";
        assert_eq!(
            cancellation(&[Some(none), Some("ConditionalCheckFailed")]),
            Cancellation::ConditionFailed(1)
        );
        assert_eq!(
            cancellation(&[Some("TransactionConflict"), Some(none)]),
            Cancellation::Conflict
        );
        assert_eq!(
            cancellation(&[Some("TransactionConflict"), Some("ConditionalCheckFailed")]),
            Cancellation::ConditionFailed(1)
        );
        // Throttled: declined for now, retryable as it is (503).
        assert_eq!(
            cancellation(&[Some("ThrottlingError"), None]),
            Cancellation::Throttled
        );
        assert_eq!(
            cancellation(&[Some(none), Some("ProvisionedThroughputExceeded")]),
            Cancellation::Throttled
        );
        assert_eq!(
            cancellation(&[Some("ValidationError"), None]),
            Cancellation::NotApplied
        );
    }
}
