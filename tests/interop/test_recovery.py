"""Dropped tables through real engines: PyIceberg writes a table and drops it, the management
API lists and restores it, and PyIceberg and DuckDB read back every row; a table dropped again
and purged is gone from storage. On both backends."""

import uuid

import pyarrow as pa
import pytest
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from test_duckdb import _connect

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))
ROWS = {"id": [1, 2, 3], "name": ["a", "b", "c"]}


def _api(floe, method: str, path: str, body=None):
    return floe.management(method, f"/orgs/{floe.warehouse}{path}", body)


def test_a_dropped_table_is_restored_and_read_by_pyiceberg_and_duckdb(floe):
    catalog = floe.catalog()
    ns = "rec_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.orders", schema=SCHEMA)
    table.append(pa.table({"id": pa.array(ROWS["id"], pa.int64()), "name": pa.array(ROWS["name"])}))
    table.append(pa.table({"id": pa.array([4], pa.int64()), "name": pa.array(["d"])}))
    table_uuid = str(table.metadata.table_uuid)
    metadata_location = catalog.load_table(f"{ns}.orders").metadata_location

    catalog.drop_table(f"{ns}.orders")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.orders")
    status, listed = _api(floe, "GET", f"/namespaces/{ns}/deleted-tables")
    assert status == 200
    assert [(t["name"], t["table-uuid"], t["state"]) for t in listed["tables"]] == [("orders", table_uuid, "deleted")]

    status, restored = _api(floe, "POST", f"/namespaces/{ns}/deleted-tables/{table_uuid}/restore",
                            {"name": "orders_back"})
    assert (status, restored) == (200, {"name": "orders_back", "table-uuid": table_uuid})
    back = catalog.load_table(f"{ns}.orders_back")
    assert back.metadata_location == metadata_location
    assert len(back.snapshots()) == 2
    assert back.scan().to_arrow().sort_by("id").to_pydict() == {"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"]}
    # Time travel to the first snapshot still reads its files.
    first = back.snapshots()[0].snapshot_id
    assert back.scan(snapshot_id=first).to_arrow().sort_by("id").to_pydict() == ROWS
    con = _connect(floe)
    assert con.execute(f"SELECT count(*) FROM floe.{ns}.orders_back").fetchone()[0] == 4
    # It takes writes as before.
    back.append(pa.table({"id": pa.array([5], pa.int64()), "name": pa.array(["e"])}))
    assert len(catalog.load_table(f"{ns}.orders_back").scan().to_arrow()) == 5

    # Dropped again and purged now: nothing recoverable is left.
    catalog.drop_table(f"{ns}.orders_back")
    status, _ = _api(floe, "DELETE", f"/namespaces/{ns}/deleted-tables/{table_uuid}")
    assert status == 204
    status, error = _api(floe, "POST", f"/namespaces/{ns}/deleted-tables/{table_uuid}/restore")
    assert status == 404, error
    assert error["error"]["type"] == "NoSuchTableException"
