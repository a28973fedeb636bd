"""Bin-pack compaction on tables engines wrote: PyIceberg appends many small files (with a
schema change between them, so older files lack a column), DuckDB deletes rows in one
partition; Floe's maintain route compacts the small files into one per partition, committed as
a `replace` snapshot with Java's summary. PyIceberg, DuckDB and a scan Floe plans read the same
rows before and after; the snapshot before still reads (compaction deletes nothing); files a
delete applies to are left as they are. On both backends."""

import datetime
import uuid

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from test_duckdb import _connect
from test_planning import server_catalog

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "name", StringType(), required=False),
    NestedField(4, "ts", TimestampType(), required=False),
)
EPOCH = datetime.datetime(2024, 1, 1)
POLICY = {
    "floe.compaction.enabled": "true",
    "floe.compaction.min-file-age-ms": "0",
    "floe.compaction.min-input-files": "3",
    "write.target-file-size-bytes": str(8 * 1024 * 1024),
}


def _api(floe, method: str, path: str):
    return floe.management(method, f"/orgs/{floe.warehouse}{path}", None, timeout=300)


def _batch(start: int, n: int, extra: bool) -> pa.Table:
    columns = {
        "id": pa.array(range(start, start + n), pa.int64()),
        "region": pa.array(["us" if i % 3 else "eu" for i in range(start, start + n)]),
        "name": pa.array([f"n{i}" if i % 7 else None for i in range(start, start + n)]),
        "ts": pa.array([EPOCH + datetime.timedelta(minutes=i) for i in range(start, start + n)], pa.timestamp("us")),
    }
    if extra:
        columns["extra"] = pa.array([i * 10 for i in range(start, start + n)], pa.int64())
    return pa.table(columns)


def _rows(arrow: pa.Table) -> list[tuple]:
    columns = [c for c in ("id", "region", "name", "ts", "extra") if c in arrow.column_names]
    return sorted(zip(*(arrow.column(c).to_pylist() for c in columns)), key=lambda r: r[0])


def _duck_rows(floe, ident: str) -> list[tuple]:
    con = _connect(floe)
    got = con.execute(f"SELECT id, region, name, ts, extra FROM floe.{ident} ORDER BY id").fetchall()
    con.close()
    return got


def _data_files(table) -> list:
    return [task.file for task in table.scan().plan_files()]


@pytest.mark.parametrize("partitioned", [True, False], ids=["by-region", "unpartitioned"])
def test_compaction_rewrites_small_files_and_every_engine_reads_the_same_rows(floe, partitioned):
    catalog = floe.catalog()
    ns = "cmp_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region")) if partitioned else PartitionSpec()
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA, partition_spec=spec,
                                 properties={"format-version": "2", **POLICY})
    for i in range(4):
        table.append(_batch(i * 20, 20, extra=False))
    with table.update_schema() as update:
        update.add_column("extra", LongType())
    table = catalog.load_table(f"{ns}.t")
    for i in range(4, 8):
        table.append(_batch(i * 20, 20, extra=True))
    table = table.refresh()
    before = table.current_snapshot().snapshot_id
    files_before = _data_files(table)
    rows_before = _rows(table.scan().to_arrow())
    assert len(rows_before) == 160
    assert len(files_before) == (16 if partitioned else 8)

    status, dry = _api(floe, "POST", f"/namespaces/{ns}/tables/t/maintain?dry_run=true")
    assert status == 200, dry
    assert dry["compaction"]["files-rewritten"] == len(files_before), dry
    assert table.refresh().current_snapshot().snapshot_id == before, "a dry run commits nothing"

    status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/t/maintain")
    assert status == 200, run
    compaction = run["compaction"]
    assert compaction["files-rewritten"] == len(files_before), run
    assert compaction["files-written"] == (2 if partitioned else 1), run
    assert compaction["records-rewritten"] == 160
    assert compaction["partitions-given-up"] == 0

    table = table.refresh()
    snapshot = table.current_snapshot()
    assert snapshot.snapshot_id == compaction["snapshot-id"]
    assert snapshot.parent_snapshot_id == before
    summary = snapshot.summary
    assert summary.operation.value == "replace"
    assert summary["added-data-files"] == str(compaction["files-written"])
    assert summary["deleted-data-files"] == str(len(files_before))
    assert summary["added-records"] == summary["deleted-records"] == "160"
    assert summary["total-records"] == "160"
    assert summary["total-data-files"] == str(compaction["files-written"])
    if partitioned:
        assert summary["changed-partition-count"] == "2"
    # Made by floe-maintenance, an API client: the reference stamps author names of users only.
    assert "arraylake.author-name" not in summary.additional_properties, summary

    after_files = _data_files(table)
    assert len(after_files) == compaction["files-written"]
    assert all("/data/compacted/" in f.file_path for f in after_files)
    assert _rows(table.scan().to_arrow()) == rows_before
    # Floe's own plan of the compacted table.
    planned = server_catalog(floe).load_table(f"{ns}.t")
    assert _rows(planned.scan().to_arrow()) == rows_before
    # DuckDB reads the same rows (nulls where a file predates the column).
    assert [tuple(r) for r in _duck_rows(floe, f"{ns}.t")] == [tuple(r) for r in rows_before]
    # The inputs are still there: the snapshot before reads as it did.
    assert _rows(table.scan(snapshot_id=before).to_arrow()) == rows_before

    # Nothing small is left: a second run rewrites nothing and commits nothing.
    status, again = _api(floe, "POST", f"/namespaces/{ns}/tables/t/maintain")
    assert status == 200 and again["compaction"]["files-rewritten"] == 0, again
    assert table.refresh().current_snapshot().snapshot_id == snapshot.snapshot_id


def test_files_a_delete_applies_to_are_left_alone(floe):
    catalog = floe.catalog()
    ns = "cmpd_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA, partition_spec=spec,
                                 properties={"format-version": "2", **POLICY})
    for i in range(5):
        table.append(_batch(i * 20, 20, extra=False))
    # DuckDB's DELETE writes a position delete file in the eu partition (merge-on-read).
    con = _connect(floe)
    con.execute(f"DELETE FROM floe.{ns}.t WHERE id IN (3, 6, 30)")
    con.close()
    table = table.refresh()
    rows_before = _rows(table.scan().to_arrow())
    assert len(rows_before) == 97

    status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/t/maintain")
    assert status == 200, run
    compaction = run["compaction"]
    assert compaction["files-left"]["has-deletes"] == 5, run
    assert compaction["files-rewritten"] == 5 and compaction["files-written"] == 1, run
    table = table.refresh()
    assert table.current_snapshot().summary.operation.value == "replace"
    assert _rows(table.scan().to_arrow()) == rows_before
    con = _connect(floe)
    duck = con.execute(f"SELECT id, region, name, ts FROM floe.{ns}.t ORDER BY id").fetchall()
    con.close()
    assert [tuple(r) for r in duck] == [tuple(r) for r in rows_before]


def test_compaction_is_off_unless_asked_and_v3_tables_are_left_with_a_reason(floe):
    catalog = floe.catalog()
    ns = "cmpo_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    off = catalog.create_table(f"{ns}.off", schema=SCHEMA, properties={"format-version": "2"})
    for i in range(4):
        off.append(_batch(i * 5, 5, extra=False))
    status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/off/maintain")
    assert status == 200 and "compaction" not in run, run

    v3 = catalog.create_table(f"{ns}.v3", schema=SCHEMA, properties={"format-version": "3", **POLICY})
    status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/v3/maintain")
    assert status == 200, run
    assert "format version 3" in run["compaction"]["skipped"], run
    assert v3.refresh().current_snapshot() is None


def _referenced_files(table) -> set[str]:
    """Every manifest list, manifest and live file any snapshot of the table references."""
    io = table.io
    found = set()
    for snapshot in table.metadata.snapshots:
        found.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            found.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                found.add(entry.data_file.file_path)
    return found


def test_writers_racing_compaction_never_fail_and_lose_no_row(floe):
    """A PyIceberg writer (which does not retry a 409) appends round after round, waiting
    between loading the table and committing, while maintenance compacts the same table
    without pause: every append lands, each row once, and every referenced file exists."""
    import threading
    import time

    catalog = floe.catalog()
    ns = "cmpr_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    catalog.create_table(f"{ns}.t", schema=SCHEMA, partition_spec=spec,
                         properties={"format-version": "2", **POLICY})
    rounds = 24
    failures, landed, given_up = [], [], []
    done = threading.Event()

    def write():
        writer = floe.catalog("racing-writer")
        try:
            for i in range(rounds):
                table = writer.load_table(f"{ns}.t")
                time.sleep(0.02 + (i % 5) * 0.04)
                table.append(_batch(i * 10, 10, extra=False))
        except Exception as e:  # noqa: BLE001 - any failure of the writer fails the test
            failures.append(repr(e))
        finally:
            done.set()

    def compact():
        while not done.is_set():
            status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/t/maintain")
            if status != 200:
                failures.append(f"maintain answered {status}: {run}")
                return
            compaction = run.get("compaction") or {}
            if compaction.get("snapshot-id"):
                landed.append(compaction["snapshot-id"])
            given_up.append(compaction.get("partitions-given-up", 0))

    threads = [threading.Thread(target=write), threading.Thread(target=compact)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not failures, failures
    if not landed:
        # A loaded machine may let the writer finish first; the race is then over, and the
        # table must still compact.
        status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/t/maintain")
        assert status == 200 and run["compaction"].get("snapshot-id"), run
        landed.append(run["compaction"]["snapshot-id"])

    table = catalog.load_table(f"{ns}.t")
    rows = _rows(table.scan().to_arrow())
    assert [r[0] for r in rows] == list(range(rounds * 10)), "a row was lost or doubled"
    con = _connect(floe)
    assert con.execute(f"SELECT count(*), count(DISTINCT id) FROM floe.{ns}.t").fetchone() == (rounds * 10, rounds * 10)
    con.close()
    for path in _referenced_files(table):
        assert table.io.new_input(path).exists(), f"{path} is referenced but missing"
    # The lineage is a line: every snapshot's parent is the one before it on main.
    lineage = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        lineage.append(snapshot)
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    assert len(lineage) == rounds + len(landed)
    assert {s.summary.operation.value for s in lineage} == {"append", "replace"}
    # Appends that lost their race to a compaction were placed after it (their manifest
    # list is the one the catalog wrote for them).
    moved = [s for s in lineage if "-rebased-" in s.manifest_list]
    print(f"compactions landed: {len(landed)}, appends moved after one: {len(moved)}, "
          f"partitions given up: {sum(given_up)}")
