"""Moving an existing Iceberg table into Floe: a table PyIceberg wrote through another catalog
(its own SqlCatalog on SQLite) is registered with PyIceberg's `register_table`, read and written
through Floe, unregistered (its files stay) and registered again."""

import json
import tempfile
import urllib.request
import uuid

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from conftest import CLIENT_S3_TIMEOUTS, REGION

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def _other_catalog(floe, warehouse: str) -> SqlCatalog:
    """PyIceberg's own catalog, writing into `warehouse` (storage Floe's org controls)."""
    properties = {"uri": f"sqlite:///{tempfile.mkdtemp()}/other.db", "warehouse": warehouse}
    if floe.backend == "aws":
        properties.update({"s3.endpoint": floe.moto, "s3.access-key-id": "testing",
                           "s3.secret-access-key": "testing", "s3.region": REGION, **CLIENT_S3_TIMEOUTS})
    return SqlCatalog("other", **properties)


def _unregister(floe, ns: str, table: str) -> dict:
    request = urllib.request.Request(
        f"{floe.uri}/v1/{floe.warehouse}/namespaces/{ns}/tables/{table}/unregister",
        method="POST", data=b"", headers={"Authorization": f"Bearer {floe.token}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def test_a_table_from_another_catalog_registers_reads_and_writes(floe):
    catalog = floe.catalog()
    ns = "reg_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    root = catalog.load_namespace_properties(ns)["location"]

    other = _other_catalog(floe, root)
    other.create_namespace("legacy")
    written = other.create_table("legacy.orders", schema=SCHEMA)
    first = pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["a", "b"])})
    written.append(first)
    written = other.load_table("legacy.orders")

    registered = catalog.register_table(f"{ns}.orders", written.metadata_location)
    assert registered.metadata_location == written.metadata_location
    assert registered.metadata.table_uuid == written.metadata.table_uuid
    assert registered.scan().to_arrow().sort_by("id").to_pydict() == first.to_pydict()
    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table(f"{ns}.orders", written.metadata_location)

    second = pa.table({"id": pa.array([3], pa.int64()), "name": pa.array(["c"])})
    catalog.load_table(f"{ns}.orders").append(second)
    rows = catalog.load_table(f"{ns}.orders").scan().to_arrow().sort_by("id").to_pydict()
    assert rows == {"id": [1, 2, 3], "name": ["a", "b", "c"]}

    if floe.backend == "aws":
        # iceberg-rust loads the registered table and reads it with vended credentials.
        from test_iceberg_rust import _run_client
        read = _run_client(floe, ns, "orders", mode="read")
        assert sorted(tuple(r) for r in read["rows"]) == [(1, "a"), (2, "b"), (3, "c")]

    current = catalog.load_table(f"{ns}.orders").metadata_location
    answer = _unregister(floe, ns, "orders")
    assert answer["metadata-location"] == current
    assert len(answer["metadata"]["snapshots"]) == 2
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.orders")

    again = catalog.register_table(f"{ns}.orders_again", current)
    assert again.scan().to_arrow().sort_by("id").to_pydict() == rows


def test_drop_then_register_brings_the_same_rows_back(floe):
    """PyIceberg's own `test_register_table` round trip, as Java catalogs are used: a table is
    dropped (kept for recovery) and its metadata file registered again, under its name or
    another, reading the same rows."""
    catalog = floe.catalog()
    ns = "undo_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.orders", schema=SCHEMA)
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
    table.append(rows)
    location = catalog.load_table(f"{ns}.orders").metadata_location

    catalog.drop_table(f"{ns}.orders")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.orders")
    registered = catalog.register_table(f"{ns}.orders", location)
    assert registered.metadata_location == location
    assert registered.scan().to_arrow().sort_by("id").to_pydict() == rows.to_pydict()
    status, dropped = floe.management("GET", f"/orgs/{floe.warehouse}/namespaces/{ns}/deleted-tables")
    assert status == 200 and dropped["tables"] == [], dropped

    # Again under another name, and the table takes writes after it.
    catalog.drop_table(f"{ns}.orders")
    again = catalog.register_table(f"{ns}.orders_back", location)
    more = pa.table({"id": pa.array([4], pa.int64()), "name": pa.array(["d"])})
    again.append(more)
    read = catalog.load_table(f"{ns}.orders_back").scan().to_arrow().sort_by("id").to_pydict()
    assert read == {"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"]}
