"""Table maintenance on tables real engines wrote: PyIceberg appends, overwrites, deletes, a
branch, a tag and statistics files; Floe's maintain route expires what the policy expires and
deletes exactly the files that only expired snapshots reached (computed here from PyIceberg's
own reading of the manifests); every retained snapshot still scans to the same rows with
PyIceberg, and DuckDB reads the table. A dry run plans the same deletions. On both backends."""

import uuid

import pyarrow as pa
from pyiceberg.expressions import EqualTo
from pyiceberg.schema import Schema
from pyiceberg.table.statistics import BlobMetadata, StatisticsFile
from pyiceberg.types import LongType, NestedField, StringType

from test_duckdb import _connect

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def _api(floe, method: str, path: str, body=None):
    return floe.management(method, f"/orgs/{floe.warehouse}{path}", body, timeout=120)


def _rows(ids, names):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names)})


def _canonical(path: str) -> str:
    return "file:///" + path.removeprefix("file:").lstrip("/") if path.startswith(("file:", "/")) else path


def _reached(table, snapshot_ids) -> set[str]:
    """What the given snapshots reach, read by PyIceberg: manifest lists, manifests, live data
    and delete files, statistics files."""
    io = table.io
    reached = set()
    for snapshot in table.metadata.snapshots:
        if snapshot.snapshot_id not in snapshot_ids:
            continue
        reached.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            reached.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                reached.add(entry.data_file.file_path)
    for stats in table.metadata.statistics:
        if stats.snapshot_id in snapshot_ids:
            reached.add(stats.statistics_path)
    return {_canonical(p) for p in reached}


def _statistics(table, snapshot_id: int, name: str) -> StatisticsFile:
    path = f"{table.location()}/metadata/{name}.stats"
    with table.io.new_output(path).create() as out:
        out.write(b"PFA1" + b"\0" * 60)
    return StatisticsFile(snapshot_id=snapshot_id, statistics_path=path, file_size_in_bytes=64,
                          file_footer_size_in_bytes=16,
                          blob_metadata=[BlobMetadata(type="apache-datasketches-theta-v1", snapshot_id=snapshot_id,
                                                      sequence_number=1, fields=[1], properties={})])


def test_maintenance_deletes_exactly_what_expired_snapshots_alone_reached(floe):
    catalog = floe.catalog()
    ns = "mnt_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.events", schema=SCHEMA)
    table.append(_rows([1, 2, 3], ["a", "b", "c"]))
    table.append(_rows([4, 5], ["d", "e"]))
    first_two = table.refresh().current_snapshot().snapshot_id
    table.manage_snapshots().create_tag(first_two, "v1").commit()
    table.overwrite(_rows([6], ["f"]))
    table.refresh().manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "dev").commit()
    table.refresh().append(_rows([7], ["g"]), branch="dev")
    table.refresh().append(_rows([8, 9], ["h", "i"]))
    table.refresh().delete(EqualTo("id", 8))
    table = table.refresh()
    # Statistics files: one for a snapshot that expires, one for the current one.
    oldest = table.metadata.snapshots[0].snapshot_id
    current = table.current_snapshot().snapshot_id
    with table.update_statistics() as update:
        update.set_statistics(_statistics(table, oldest, "old"))
        update.set_statistics(_statistics(table, current, "current"))
    table = table.refresh()

    refs = table.metadata.refs
    retained = {refs["main"].snapshot_id, refs["v1"].snapshot_id, refs["dev"].snapshot_id}
    expected_rows = {sid: table.scan(snapshot_id=sid).to_arrow().sort_by("id").to_pydict() for sid in retained}
    every = {s.snapshot_id for s in table.metadata.snapshots}
    assert len(every) > len(retained)
    unreachable = _reached(table, every) - _reached(table, retained)
    assert unreachable, "the history has files only expired snapshots reach"

    # Everything older than a millisecond expires, except what the refs keep.
    table.transaction().set_properties({"history.expire.max-snapshot-age-ms": "1"}).commit_transaction()
    status, plan = _api(floe, "POST", f"/namespaces/{ns}/tables/events/maintain?dry_run=true&verbose=true")
    assert status == 200, plan
    status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/events/maintain?verbose=true")
    assert status == 200, run
    assert run["snapshots-expired"] == len(every) - len(retained) == plan["snapshots-expired"]
    deleted = {_canonical(f["location"]) for f in run["deleted-files"]}
    assert deleted == unreachable
    assert {_canonical(f["location"]) for f in plan["deleted-files"]} == deleted
    assert run["files-deleted"] == len(deleted) == plan["files-deleted"]
    assert run["bytes-deleted"] == plan["bytes-deleted"] > 0
    assert set(run["deleted-by-reason"]) == {"expired"}

    table = catalog.load_table(f"{ns}.events")
    assert {s.snapshot_id for s in table.metadata.snapshots} == retained
    assert [s.snapshot_id for s in table.metadata.statistics] == [current]
    for f in run["deleted-files"]:
        assert not table.io.new_input(f["location"]).exists(), f["location"]
    for path in _reached(table, retained):
        assert table.io.new_input(path).exists(), path
    for sid, rows in expected_rows.items():
        assert table.scan(snapshot_id=sid).to_arrow().sort_by("id").to_pydict() == rows
    con = _connect(floe)
    current_rows = expected_rows[refs["main"].snapshot_id]
    assert con.execute(f"SELECT count(*) FROM floe.{ns}.events").fetchone()[0] == len(current_rows["id"])

    # The table takes writes as before, and a second run finds nothing to do.
    table.append(_rows([10], ["j"]))
    status, again = _api(floe, "POST", f"/namespaces/{ns}/tables/events/maintain")
    assert status == 200
    # The snapshot that was current expires, with its manifest list and its statistics file.
    assert again["snapshots-expired"] == 1
    assert again["deleted-by-reason"]["expired"] >= 2, again
    table = catalog.load_table(f"{ns}.events")
    assert len(table.scan().to_arrow()) == len(current_rows["id"]) + 1


def test_unreferenced_files_of_a_crashed_writer_are_removed_past_the_threshold(floe):
    catalog = floe.catalog()
    ns = "mnu_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns, properties={"floe.maintenance.unreferenced-file-age-ms": "1"})
    table = catalog.create_table(f"{ns}.logs", schema=SCHEMA)
    assert table.properties["floe.maintenance.unreferenced-file-age-ms"] == "1"
    table.append(_rows([1, 2], ["a", "b"]))
    stray = f"{table.location()}/data/crashed-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(stray).create() as out:
        out.write(b"half a file")
    status, run = _api(floe, "POST", f"/namespaces/{ns}/tables/logs/maintain?verbose=true")
    assert status == 200, run
    assert [f["location"] for f in run["deleted-files"]] == [stray]
    assert run["deleted-by-reason"] == {"unreferenced": 1}
    assert not table.io.new_input(stray).exists()
    assert catalog.load_table(f"{ns}.logs").scan().to_arrow().num_rows == 2

    status, error = _api(floe, "POST", f"/namespaces/{ns}/tables/missing/maintain")
    assert status == 404, error
