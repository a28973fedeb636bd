//! One bin rewritten into one Parquet file: the inputs read with the `iceberg` crate's Arrow
//! reader (which projects each file onto the table's current schema by field id, promotes
//! types, fills added columns and identity partition values), sorted by the table's sort order
//! when it has one, and written with the crate's Parquet writer, which records the metrics
//! the manifest carries.
//!
//! The bytes pass through an in-memory `FileIO`: storage is read and written by the catalog's
//! own object stores (their credentials, their checks), the crate only ever sees memory.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_ord::sort::{SortColumn, SortOptions, lexsort_to_indices};
use bytes::Bytes;
use futures::TryStreamExt;
use iceberg::arrow::ArrowReaderBuilder;
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, NameMapping, NullOrder, PartitionSpecRef, SchemaRef,
    SortDirection, SortOrderRef, TableMetadata,
};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::select::Bin;
use crate::objects::ObjectStore;

/// Why a bin was not rewritten; its inputs stay as they are.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error("cannot read input {0}: {1}")]
    Input(String, String),
    #[error("cannot rewrite: {0}")]
    Iceberg(#[from] iceberg::Error),
    #[error("cannot sort: {0}")]
    Sort(#[from] arrow_schema::ArrowError),
    #[error("rows read ({read}) differ from the inputs' record counts ({recorded})")]
    RowCount { read: u64, recorded: u64 },
    #[error("cannot write {0}: {1}")]
    Output(String, String),
}

/// What every rewrite of one table shares.
pub struct Table {
    pub schema: SchemaRef,
    pub sort_order: SortOrderRef,
    pub properties: WriterProperties,
    pub name_mapping: Option<Arc<NameMapping>>,
}

impl Table {
    pub fn new(metadata: &TableMetadata) -> Self {
        let properties = metadata.properties();
        let name_mapping = properties
            .get("schema.name-mapping.default")
            .and_then(|json| serde_json::from_str::<NameMapping>(json).ok())
            .map(Arc::new);
        Self {
            schema: metadata.current_schema().clone(),
            sort_order: metadata.default_sort_order().clone(),
            properties: writer_properties(properties),
            name_mapping,
        }
    }
}

/// Java's `write.parquet.compression-codec` (zstd unless set) and its level.
fn writer_properties(properties: &std::collections::HashMap<String, String>) -> WriterProperties {
    let level = properties
        .get("write.parquet.compression-level")
        .and_then(|l| l.parse::<i32>().ok());
    let codec = properties
        .get("write.parquet.compression-codec")
        .map(|c| c.to_ascii_lowercase());
    let compression = match codec.as_deref() {
        Some("uncompressed") | Some("none") => Compression::UNCOMPRESSED,
        Some("snappy") => Compression::SNAPPY,
        Some("lz4") => Compression::LZ4_RAW,
        Some("gzip") => Compression::GZIP(
            level
                .and_then(|l| GzipLevel::try_new(l as u32).ok())
                .unwrap_or_default(),
        ),
        _ => Compression::ZSTD(
            level
                .and_then(|l| ZstdLevel::try_new(l).ok())
                .unwrap_or_default(),
        ),
    };
    WriterProperties::builder()
        .set_compression(compression)
        .build()
}

/// Reads `bin`'s inputs through the table and writes them as one file at `location`: the
/// file's entry, for a manifest. Written to storage, referenced by nothing yet.
pub async fn rewrite(
    objects: &dyn ObjectStore,
    table: &Table,
    spec: PartitionSpecRef,
    bin: &Bin,
    location: &str,
) -> Result<DataFile, RewriteError> {
    let io = FileIO::new_with_memory();
    let mut tasks = Vec::with_capacity(bin.inputs.len());
    for (i, input) in bin.inputs.iter().enumerate() {
        let path = input.file.file_path();
        let bytes = objects
            .get(path)
            .await
            .map_err(|e| RewriteError::Input(path.to_owned(), e.to_string()))?;
        let staged = format!("memory:///in/{i}.parquet");
        let size = bytes.len() as u64;
        io.new_output(&staged)?.write(bytes).await?;
        tasks.push(Ok(FileScanTask {
            file_size_in_bytes: size,
            start: 0,
            length: size,
            record_count: Some(input.file.record_count()),
            data_file_path: staged,
            data_file_format: DataFileFormat::Parquet,
            schema: table.schema.clone(),
            project_field_ids: table
                .schema
                .as_struct()
                .fields()
                .iter()
                .map(|f| f.id)
                .collect(),
            predicate: None,
            deletes: Vec::new(),
            partition: Some(bin.partition.clone()),
            partition_spec: Some(spec.clone()),
            name_mapping: table.name_mapping.clone(),
            case_sensitive: true,
        }));
    }
    let reader = ArrowReaderBuilder::new(io.clone(), iceberg::Runtime::current())
        .with_data_file_concurrency_limit(1)
        .build();
    let batches: Vec<RecordBatch> = reader
        .read(Box::pin(futures::stream::iter(tasks)))?
        .stream()
        .try_collect()
        .await?;
    let read: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    if read != bin.input_records() {
        return Err(RewriteError::RowCount {
            read,
            recorded: bin.input_records(),
        });
    }
    let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(&table.schema)?);
    let batches = batches
        .iter()
        .map(|b| plain(b, &arrow_schema))
        .collect::<Result<Vec<_>, _>>()?;
    let batches = sorted(table, batches)?;

    let staged = "memory:///out.parquet";
    let mut writer = ParquetWriterBuilder::new(table.properties.clone(), table.schema.clone())
        .build(io.new_output(staged)?)
        .await?;
    for batch in &batches {
        writer.write(batch).await?;
    }
    let mut built = writer.close().await?;
    let mut builder = built
        .pop()
        .ok_or_else(|| RewriteError::Output(location.to_owned(), "nothing written".into()))?;
    builder
        .content(DataContentType::Data)
        .file_path(location.to_owned())
        .partition(bin.partition.clone())
        .partition_spec_id(bin.spec_id);
    if !table.sort_order.is_unsorted() {
        builder.sort_order_id(table.sort_order.order_id as i32);
    }
    let file = builder
        .build()
        .map_err(|e| RewriteError::Output(location.to_owned(), e.to_string()))?;
    let bytes: Bytes = io.new_input(staged)?.read().await?;
    objects
        .put_if_absent(location, bytes)
        .await
        .map_err(|e| RewriteError::Output(location.to_owned(), e.to_string()))?;
    Ok(file)
}

/// The batch in the writer's own types: the reader hands identity partition values over as
/// run-end encoded constants, which the Parquet writer does not take.
fn plain(
    batch: &RecordBatch,
    schema: &arrow_schema::SchemaRef,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(column.clone())
            } else {
                arrow_cast::cast(column, field.data_type())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

/// The rows in the table's sort order (each sort field's transform applied to its column);
/// as they came when the table has none.
fn sorted(table: &Table, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>, RewriteError> {
    if table.sort_order.is_unsorted() || batches.is_empty() {
        return Ok(batches);
    }
    let all = arrow_select::concat::concat_batches(&batches[0].schema(), &batches)?;
    let mut columns = Vec::new();
    for field in &table.sort_order.fields {
        let index = table
            .schema
            .as_struct()
            .fields()
            .iter()
            .position(|f| f.id == field.source_id);
        // A sort field over a nested column: rows stay in the order read.
        let Some(index) = index else {
            return Ok(vec![all]);
        };
        let values = iceberg::transform::create_transform_function(&field.transform)?
            .transform(all.column(index).clone())?;
        columns.push(SortColumn {
            values,
            options: Some(SortOptions {
                descending: field.direction == SortDirection::Descending,
                nulls_first: field.null_order == NullOrder::First,
            }),
        });
    }
    let indices = lexsort_to_indices(&columns, None)?;
    Ok(vec![arrow_select::take::take_record_batch(&all, &indices)?])
}
