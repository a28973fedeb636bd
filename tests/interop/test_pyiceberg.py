"""PyIceberg 0.12 against a real `floe serve`: the catalog as engines use it."""

import threading
import uuid

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException, NamespaceAlreadyExistsError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def _namespace(catalog) -> str:
    name = "py_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(name)
    return name


def test_create_append_scan_round_trip(floe):
    catalog = floe.catalog()
    ns = _namespace(catalog)
    assert (ns,) in catalog.list_namespaces()
    table = catalog.create_table(f"{ns}.events", schema=SCHEMA)
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
    table.append(data)
    back = catalog.load_table(f"{ns}.events").scan().to_arrow().sort_by("id")
    assert back.to_pydict() == data.to_pydict()
    assert catalog.table_exists(f"{ns}.events")
    assert catalog.list_tables(ns) == [(ns, "events")]
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace(ns)


def test_schema_evolution_and_overwrite(floe):
    catalog = floe.catalog()
    ns = _namespace(catalog)
    table = catalog.create_table(f"{ns}.evolve", schema=SCHEMA)
    table.append(pa.table({"id": pa.array([1], pa.int64()), "name": pa.array(["x"])}))
    with table.update_schema() as update:
        update.add_column("score", DoubleType())
    table = catalog.load_table(f"{ns}.evolve")
    assert [f.name for f in table.schema().fields] == ["id", "name", "score"]
    table.append(pa.table({"id": pa.array([2], pa.int64()), "name": pa.array(["y"]), "score": pa.array([0.5])}))
    rows = catalog.load_table(f"{ns}.evolve").scan().to_arrow().sort_by("id").to_pydict()
    assert rows == {"id": [1, 2], "name": ["x", "y"], "score": [None, 0.5]}
    table = catalog.load_table(f"{ns}.evolve")
    table.overwrite(pa.table({"id": pa.array([9], pa.int64()), "name": pa.array(["z"]), "score": pa.array([1.0])}))
    rows = catalog.load_table(f"{ns}.evolve").scan().to_arrow().to_pydict()
    assert rows == {"id": [9], "name": ["z"], "score": [1.0]}


def test_snapshot_summary_carries_the_author(floe):
    catalog = floe.catalog()
    ns = _namespace(catalog)
    table = catalog.create_table(f"{ns}.authored", schema=SCHEMA)
    table.append(
        pa.table({"id": pa.array([1], pa.int64()), "name": pa.array(["a"])}),
        snapshot_properties={"arraylake.author-email": "spoof@example.com", "arraylake.source.repo": "acme/src"},
    )
    summary = catalog.load_table(f"{ns}.authored").current_snapshot().summary
    assert summary["arraylake.author-email"] == "demo-admin@api-clients.floe.local"
    assert "arraylake.author-name" not in summary.additional_properties
    assert summary["arraylake.source.repo"] == "acme/src"


def test_concurrent_appends_from_threads_lose_nothing(floe):
    catalog = floe.catalog()
    ns = _namespace(catalog)
    catalog.create_table(f"{ns}.shared", schema=SCHEMA, properties={"commit.retry.num-retries": "20", "commit.retry.min-wait-ms": "10", "commit.retry.max-wait-ms": "200"})
    writers, per_writer = 4, 3
    errors, conflicts = [], []

    def write(worker: int):
        own = floe.catalog(f"w{worker}")
        for n in range(per_writer):
            for _attempt in range(50):
                try:
                    table = own.load_table(f"{ns}.shared")
                    table.append(pa.table({"id": pa.array([worker * 100 + n], pa.int64()), "name": pa.array([f"w{worker}"])}))
                    break
                except CommitFailedException:
                    conflicts.append(worker)
            else:
                errors.append(f"worker {worker} gave up")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    table = catalog.load_table(f"{ns}.shared")
    ids = sorted(table.scan().to_arrow()["id"].to_pylist())
    assert ids == sorted(w * 100 + n for w in range(writers) for n in range(per_writer))
    assert len(table.snapshots()) == writers * per_writer


def test_unrelated_concurrent_commits_all_land(floe):
    """Six clients set different properties at once. PyIceberg does not retry metadata-only
    commits, so any 409 would surface; the catalog rebases them as Java's does, and all land."""
    catalog = floe.catalog()
    ns = _namespace(catalog)
    catalog.create_table(f"{ns}.props", schema=SCHEMA)
    writers = 6
    tables = [floe.catalog(f"p{w}").load_table(f"{ns}.props") for w in range(writers)]
    start, errors = threading.Barrier(writers), []

    def commit(worker: int):
        start.wait()
        try:
            tables[worker].transaction().set_properties({f"writer.{worker}": "done"}).commit_transaction()
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(f"writer {worker}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=commit, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    properties = catalog.load_table(f"{ns}.props").properties
    assert all(properties[f"writer.{w}"] == "done" for w in range(writers))


def test_drop_and_missing_tables(floe):
    catalog = floe.catalog()
    ns = _namespace(catalog)
    catalog.create_table(f"{ns}.gone", schema=SCHEMA)
    catalog.drop_table(f"{ns}.gone")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.gone")
    catalog.drop_namespace(ns)
    assert (ns,) not in catalog.list_namespaces()


def test_staged_create_transaction(floe):
    catalog = floe.catalog()
    ns = _namespace(catalog)
    txn = catalog.create_table_transaction(f"{ns}.staged", schema=SCHEMA)
    txn.append(pa.table({"id": pa.array([7], pa.int64()), "name": pa.array(["s"])}))
    txn.commit_transaction()
    rows = catalog.load_table(f"{ns}.staged").scan().to_arrow().to_pydict()
    assert rows == {"id": [7], "name": ["s"]}
