"""DuckDB 1.5.5 with its iceberg extension (from PyPI wheels) against a real `floe serve`."""

import importlib
import pathlib
import uuid

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType


def _connect(floe):
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for name in ("httpfs", "avro", "iceberg"):
        package = importlib.import_module(f"duckdb_extension_{name}")
        path = next(pathlib.Path(package.__file__).parent.glob("extensions/*/*.duckdb_extension"))
        con.execute(f"LOAD '{path}'")
    con.execute(f"CREATE SECRET floe_token (TYPE iceberg, TOKEN '{floe.token}')")
    con.execute(
        f"ATTACH '{floe.warehouse}' AS floe (TYPE iceberg, ENDPOINT '{floe.uri}', SECRET floe_token, "
        "READ_ONLY false)"
    )
    return con


@pytest.fixture
def written_by_pyiceberg(floe):
    catalog = floe.catalog()
    ns = "duck_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))
    table = catalog.create_table(f"{ns}.obs", schema=schema)
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])}))
    table.append(pa.table({"id": pa.array([4], pa.int64()), "name": pa.array(["d"])}))
    return ns


def test_duckdb_reads_what_pyiceberg_wrote(floe, written_by_pyiceberg):
    con = _connect(floe)
    ns = written_by_pyiceberg
    assert con.execute(f"SELECT count(*), sum(id) FROM floe.{ns}.obs").fetchone() == (4, 10)
    names = [r[0] for r in con.execute(f"SELECT name FROM floe.{ns}.obs ORDER BY id").fetchall()]
    assert names == ["a", "b", "c", "d"]
    schemas = {r[0] for r in con.execute("SELECT schema_name FROM duckdb_schemas() WHERE database_name = 'floe'").fetchall()}
    assert ns in schemas


def test_duckdb_creates_and_inserts(floe):
    con = _connect(floe)
    ns = "duckw_" + uuid.uuid4().hex[:8]
    con.execute(f"CREATE SCHEMA floe.{ns}")
    con.execute(f"CREATE TABLE floe.{ns}.made_by_duck (id BIGINT, label VARCHAR)")
    con.execute(f"INSERT INTO floe.{ns}.made_by_duck VALUES (1, 'x'), (2, 'y')")
    assert con.execute(f"SELECT count(*), sum(id) FROM floe.{ns}.made_by_duck").fetchone() == (2, 3)
    # And PyIceberg reads what DuckDB wrote.
    rows = floe.catalog().load_table(f"{ns}.made_by_duck").scan().to_arrow().sort_by("id").to_pydict()
    assert rows == {"id": [1, 2], "label": ["x", "y"]}


def test_duckdb_commits_two_tables_in_one_transaction(floe):
    """With `POST /v1/{prefix}/transactions/commit` advertised, DuckDB commits every table a
    transaction wrote through it: both tables move together."""
    con = _connect(floe)
    ns = "duckt_" + uuid.uuid4().hex[:8]
    con.execute(f"CREATE SCHEMA floe.{ns}")
    con.execute(f"CREATE TABLE floe.{ns}.facts (id BIGINT, amount DOUBLE)")
    con.execute(f"CREATE TABLE floe.{ns}.dims (id BIGINT, label VARCHAR)")
    con.execute("BEGIN TRANSACTION")
    con.execute(f"INSERT INTO floe.{ns}.facts VALUES (1, 9.5), (2, 0.5)")
    con.execute(f"INSERT INTO floe.{ns}.dims VALUES (1, 'one'), (2, 'two')")
    con.execute("COMMIT")
    assert con.execute(f"SELECT count(*), sum(amount) FROM floe.{ns}.facts").fetchone() == (2, 10.0)
    catalog = floe.catalog()
    for table, rows in [("facts", 2), ("dims", 2)]:
        loaded = catalog.load_table(f"{ns}.{table}")
        assert len(loaded.scan().to_arrow()) == rows
        assert len(loaded.metadata.snapshots) == 1
