"""A table with `write.metadata.compression-codec=gzip`, written by PyIceberg through Floe and read
back by PyIceberg (through the catalog, and straight from the compressed file with its own
reader, as Java's StaticTable readers do), DuckDB and (on S3) iceberg-rust."""

import uuid

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.table import StaticTable
from pyiceberg.types import LongType, NestedField, StringType

from conftest import CLIENT_S3_TIMEOUTS
from test_duckdb import _connect
from test_iceberg_rust import _run_client

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def test_a_gzip_metadata_table_is_read_by_every_engine(floe):
    catalog = floe.catalog()
    ns = "gz_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.events", schema=SCHEMA,
                                 properties={"write.metadata.compression-codec": "gzip"})
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["alpha", "beta"])}))
    table.append(pa.table({"id": pa.array([3], pa.int64()), "name": pa.array(["gamma"])}))

    loaded = catalog.load_table(f"{ns}.events")
    assert loaded.metadata_location.endswith(".gz.metadata.json"), loaded.metadata_location
    assert loaded.scan().to_arrow().sort_by("id").to_pydict() == {"id": [1, 2, 3], "name": ["alpha", "beta", "gamma"]}

    # PyIceberg's own reader of metadata files, on the compressed file itself.
    io_properties = dict(loaded.io.properties, **CLIENT_S3_TIMEOUTS)
    static = StaticTable.from_metadata(loaded.metadata_location, properties=io_properties)
    assert static.metadata.table_uuid == loaded.metadata.table_uuid
    assert static.current_snapshot().snapshot_id == loaded.current_snapshot().snapshot_id
    assert len(static.scan().to_arrow()) == 3

    con = _connect(floe)
    assert con.execute(f"SELECT count(*), max(id) FROM floe.{ns}.events").fetchone() == (3, 3)

    if floe.backend == "aws":
        read = _run_client(floe, ns, "events", mode="read")
        assert read["metadata_location"] == loaded.metadata_location
        assert sorted(tuple(r) for r in read["rows"]) == [(1, "alpha"), (2, "beta"), (3, "gamma")]


@pytest.mark.parametrize("floe", ["local"], indirect=True)
def test_an_unknown_codec_is_refused(floe):
    catalog = floe.catalog()
    ns = "gzbad_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    with pytest.raises(Exception, match="Invalid codec name: snappy"):
        catalog.create_table(f"{ns}.t", schema=SCHEMA, properties={"write.metadata.compression-codec": "snappy"})
    assert catalog.list_tables(ns) == []
