//! iceberg-rust (the `iceberg` and `iceberg-catalog-rest` crates, 0.10.1) as a real client of
//! Floe, on S3 with vended credentials.
//!
//! From the environment:
//! - `FLOE_URI`: the catalog's base URL (`http://HOST:PORT/iceberg`);
//! - `FLOE_TOKEN`: a bearer token;
//! - `FLOE_WAREHOUSE`: the warehouse (org) name;
//! - `FLOE_NAMESPACE`, `FLOE_TABLE`: a namespace and a table that do not exist yet (or, with
//!   `FLOE_MODE=read`, a table that exists, with columns `id` long and `name` string).
//!
//! With `FLOE_MODE=read` it only loads that table and scans it with the vended credentials,
//! printing the rows. With `FLOE_MODE=v3` it creates a format-version 3 table, appends to it
//! twice (each append numbering its rows from the table's `next-row-id`, as iceberg-rust's
//! snapshot producer does), and prints each snapshot's row range, the table's `next-row-id` and
//! the rows scanned back. Otherwise it creates the namespace and the table, writes one Parquet data file through iceberg-rust's
//! writer stack with the FileIO that the catalog's answer configured (the vended credentials),
//! commits it with a fast append, reloads the table and scans it back, and checks that the
//! credentials handed out with createTable last at least 55 minutes. Any failure exits non-zero
//! with a message on stderr; success prints one JSON line on stdout.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use futures::TryStreamExt;
use iceberg::arrow::schema_to_arrow_schema;
use iceberg::io::FileIO;
use iceberg::spec::{DataFileFormat, NestedField, PrimitiveType, Schema, Type};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use iceberg_catalog_rest::{
    REST_CATALOG_PROP_URI, REST_CATALOG_PROP_WAREHOUSE, RestCatalogBuilder,
};
use iceberg_storage_opendal::OpenDalStorageFactory;
use serde_json::json;

/// The shortest lifetime accepted for credentials handed out with createTable.
const MIN_CREDENTIAL_LIFETIME: Duration = Duration::from_secs(55 * 60);

/// What Floe puts in a table answer's config when it vends S3 credentials.
const CREDENTIAL_KEYS: [&str; 3] = [
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
];
const EXPIRES_AT_MS: &str = "s3.session-token-expires-at-ms";

type Failure = String;

/// Attaches what was being done to an error.
trait Context<T> {
    fn context(self, doing: impl std::fmt::Display) -> Result<T, Failure>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn context(self, doing: impl std::fmt::Display) -> Result<T, Failure> {
        self.map_err(|e| format!("{doing}: {e}"))
    }
}

fn env(name: &str) -> Result<String, Failure> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Ok(value),
        _ => Err(format!("environment variable {name} must be set")),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The rows the client writes and expects to read back.
fn rows() -> Vec<(i64, String)> {
    vec![
        (1, "alpha".to_owned()),
        (2, "beta".to_owned()),
        (3, "gamma".to_owned()),
    ]
}

fn schema() -> Result<Schema, Failure> {
    Schema::builder()
        .with_schema_id(0)
        .with_fields(vec![
            NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .context("building the table schema")
}

/// The vended credentials in a table's FileIO, and their expiry (ms since the epoch).
fn vended_expiry(file_io: &FileIO, answer: &str) -> Result<u64, Failure> {
    let props = file_io.config().props();
    let missing: Vec<&str> = CREDENTIAL_KEYS
        .iter()
        .copied()
        .chain([EXPIRES_AT_MS])
        .filter(|key| props.get(*key).is_none_or(|v| v.is_empty()))
        .collect();
    if !missing.is_empty() {
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        return Err(format!(
            "the FileIO from the {answer} answer lacks vended credentials {missing:?} \
             (it has the keys {keys:?})"
        ));
    }
    props[EXPIRES_AT_MS]
        .parse::<u64>()
        .context(format!("{EXPIRES_AT_MS} from the {answer} answer"))
}

/// One Parquet data file with `rows()`, written through iceberg-rust's writer stack with the
/// table's own FileIO.
async fn write_data_file(table: &Table) -> Result<Vec<iceberg::spec::DataFile>, Failure> {
    let metadata = table.metadata();
    let schema = metadata.current_schema().clone();
    let properties = metadata
        .table_properties()
        .context("reading the table's properties")?;
    let parquet = ParquetWriterBuilder::from_table_properties(&properties, schema.clone());
    let locations = DefaultLocationGenerator::new(metadata).context("location generator")?;
    let names = DefaultFileNameGenerator::new(
        "floe-rust-client".to_owned(),
        Some(format!("{}", now_ms())),
        DataFileFormat::Parquet,
    );
    let rolling = RollingFileWriterBuilder::new_with_default_file_size(
        parquet,
        table.file_io().clone(),
        locations,
        names,
    );
    let mut writer = DataFileWriterBuilder::new(rolling)
        .build(None)
        .await
        .context("building the data file writer")?;

    let arrow_schema = schema_to_arrow_schema(&schema).context("arrow schema")?;
    let (ids, names): (Vec<i64>, Vec<String>) = rows().into_iter().unzip();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(StringArray::from(names)),
    ];
    let batch = RecordBatch::try_new(Arc::new(arrow_schema), columns).context("record batch")?;
    writer
        .write(batch)
        .await
        .context("writing the Parquet data file")?;
    writer
        .close()
        .await
        .context("closing the Parquet data file")
}

/// Every row of the table's current snapshot, sorted.
async fn scan(table: &Table) -> Result<Vec<(i64, String)>, Failure> {
    let batches: Vec<RecordBatch> = table
        .scan()
        .select_all()
        .build()
        .context("planning the scan")?
        .to_arrow()
        .await
        .context("starting the scan")?
        .try_collect()
        .await
        .context("reading the scan")?;
    let mut rows = Vec::new();
    for batch in &batches {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| format!("the scan returned no column {name}"))
        };
        let ids = column("id")?
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("column id is not Int64")?;
        let names = column("name")?
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or("column name is not Utf8")?;
        for i in 0..batch.num_rows() {
            if ids.is_null(i) || names.is_null(i) {
                return Err(format!("row {i} of the scan has a null"));
            }
            rows.push((ids.value(i), names.value(i).to_owned()));
        }
    }
    rows.sort();
    Ok(rows)
}

async fn run() -> Result<serde_json::Value, Failure> {
    let uri = env("FLOE_URI")?;
    let token = env("FLOE_TOKEN")?;
    let warehouse = env("FLOE_WAREHOUSE")?;
    let namespace = env("FLOE_NAMESPACE")?;
    let table_name = env("FLOE_TABLE")?;

    let props = HashMap::from([
        (REST_CATALOG_PROP_URI.to_owned(), uri.clone()),
        (REST_CATALOG_PROP_WAREHOUSE.to_owned(), warehouse),
        ("token".to_owned(), token),
        // iceberg-rust does not ask for vended credentials unless told to.
        (
            "header.X-Iceberg-Access-Delegation".to_owned(),
            "vended-credentials".to_owned(),
        ),
        // FileIO gets the catalog's properties too: these keep it to the vended credentials,
        // never ~/.aws or the instance metadata service.
        ("s3.disable-config-load".to_owned(), "true".to_owned()),
        ("s3.disable-ec2-metadata".to_owned(), "true".to_owned()),
    ]);
    let catalog = RestCatalogBuilder::default()
        .with_storage_factory(Arc::new(OpenDalStorageFactory::S3 {
            customized_credential_load: None,
        }))
        .load("floe", props)
        .await
        .context(format!("connecting to the catalog at {uri}"))?;

    let namespace_name = namespace;
    let namespace = NamespaceIdent::new(namespace_name.clone());
    match std::env::var("FLOE_MODE").as_deref() {
        Ok("read") => return read_existing(&catalog, TableIdent::new(namespace, table_name)).await,
        Ok("v3") => return write_v3(&catalog, namespace, table_name).await,
        _ => {}
    }
    catalog
        .create_namespace(&namespace, HashMap::new())
        .await
        .context(format!("creating namespace {namespace_name}"))?;
    let ident = TableIdent::new(namespace.clone(), table_name);
    let creation = TableCreation::builder()
        .name(ident.name().to_owned())
        .schema(schema()?)
        .build();
    let requested_at_ms = now_ms();
    let table = catalog
        .create_table(&namespace, creation)
        .await
        .context(format!("creating table {ident}"))?;

    // The credentials handed out with createTable, as iceberg-rust keeps them: in the table's
    // FileIO properties, from the answer's config.
    let expires_at_ms = vended_expiry(table.file_io(), "createTable")?;
    let lifetime_ms = expires_at_ms.saturating_sub(requested_at_ms);
    if lifetime_ms < MIN_CREDENTIAL_LIFETIME.as_millis() as u64 {
        return Err(format!(
            "the credentials vended with createTable expire at {expires_at_ms} ms, {} s after \
             the request; at least {} s expected",
            lifetime_ms / 1000,
            MIN_CREDENTIAL_LIFETIME.as_secs()
        ));
    }

    let data_files = write_data_file(&table).await?;
    if data_files.len() != 1 {
        return Err(format!(
            "the writer produced {} data files, expected 1",
            data_files.len()
        ));
    }
    let data_file_paths: Vec<String> = data_files
        .iter()
        .map(|f| f.file_path().to_owned())
        .collect();
    let record_count: u64 = data_files.iter().map(|f| f.record_count()).sum();

    let transaction = Transaction::new(&table);
    let transaction = transaction
        .fast_append()
        .add_data_files(data_files)
        .apply(transaction)
        .context("preparing the fast append")?;
    let committed = transaction
        .commit(&catalog)
        .await
        .context(format!("committing the fast append to {ident}"))?;
    // A commit answer has no config, so the table iceberg-rust returns from a commit has a FileIO
    // without the vended credentials; reported, and the table is reloaded before the scan.
    let committed_props = committed.file_io().config().props();
    let commit_file_io_has_credentials = CREDENTIAL_KEYS
        .iter()
        .all(|key| committed_props.contains_key(*key));

    let table = catalog
        .load_table(&ident)
        .await
        .context(format!("reloading {ident}"))?;
    vended_expiry(table.file_io(), "loadTable")?;
    let snapshot = table
        .metadata()
        .current_snapshot()
        .ok_or_else(|| format!("{ident} has no current snapshot after the commit"))?;
    let snapshot_id = snapshot.snapshot_id();
    let rows_read = scan(&table).await?;
    let rows_written = rows();
    if rows_read != rows_written {
        return Err(format!(
            "the scan read {rows_read:?}, but {rows_written:?} were written"
        ));
    }

    Ok(json!({
        "table": ident.to_string(),
        "table_location": table.metadata().location(),
        "metadata_location": table.metadata_location(),
        "snapshot_id": snapshot_id,
        "data_files": data_file_paths,
        "record_count": record_count,
        "rows_read": rows_read.len(),
        "credentials_expire_at_ms": expires_at_ms,
        "credential_lifetime_s": lifetime_ms / 1000,
        "commit_file_io_has_credentials": commit_file_io_has_credentials,
    }))
}

/// Loads a table that exists and scans it with the credentials its answer vended.
async fn read_existing(
    catalog: &impl Catalog,
    ident: TableIdent,
) -> Result<serde_json::Value, Failure> {
    let table = catalog
        .load_table(&ident)
        .await
        .context(format!("loading {ident}"))?;
    vended_expiry(table.file_io(), "loadTable")?;
    let rows = scan(&table).await?;
    Ok(json!({
        "table": ident.to_string(),
        "metadata_location": table.metadata_location(),
        "rows": rows,
    }))
}

/// Creates a v3 table and appends `rows()` to it twice, reloading in between (a commit's answer
/// has no credentials); reports the row lineage the catalog kept.
async fn write_v3(
    catalog: &impl Catalog,
    namespace: NamespaceIdent,
    table_name: String,
) -> Result<serde_json::Value, Failure> {
    catalog
        .create_namespace(&namespace, HashMap::new())
        .await
        .context("creating the namespace")?;
    let ident = TableIdent::new(namespace.clone(), table_name);
    let creation = TableCreation::builder()
        .name(ident.name().to_owned())
        .schema(schema()?)
        .properties(HashMap::from([(
            "format-version".to_owned(),
            "3".to_owned(),
        )]))
        .build();
    catalog
        .create_table(&namespace, creation)
        .await
        .context(format!("creating the v3 table {ident}"))?;
    for round in 1..=2 {
        let table = catalog
            .load_table(&ident)
            .await
            .context(format!("loading {ident} before append {round}"))?;
        let data_files = write_data_file(&table).await?;
        let transaction = Transaction::new(&table);
        let transaction = transaction
            .fast_append()
            .add_data_files(data_files)
            .apply(transaction)
            .context("preparing the fast append")?;
        transaction
            .commit(catalog)
            .await
            .context(format!("committing append {round} to {ident}"))?;
    }
    let table = catalog
        .load_table(&ident)
        .await
        .context(format!("reloading {ident}"))?;
    let metadata = table.metadata();
    let mut snapshots: Vec<_> = metadata.snapshots().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    let ranges: Vec<serde_json::Value> = snapshots
        .iter()
        .map(|s| json!({"first_row_id": s.first_row_id(), "added_rows": s.added_rows_count()}))
        .collect();
    let rows_read = scan(&table).await?;
    Ok(json!({
        "table": ident.to_string(),
        "format_version": format!("{}", metadata.format_version()),
        "next_row_id": metadata.next_row_id(),
        "snapshots": ranges,
        "rows_read": rows_read.len(),
    }))
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("floe-rust-client: {failure}");
            ExitCode::FAILURE
        }
    }
}
