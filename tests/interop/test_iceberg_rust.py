"""iceberg-rust 0.10.1 (the `iceberg` and `iceberg-catalog-rest` crates) against a real `floe serve`
on S3 and STS (moto), with vended credentials.

The client is tests/rust-client, a binary that scripts/test builds and names in FLOE_RUST_CLIENT.
It creates a namespace and a table, writes one Parquet file through iceberg-rust's writer stack
with the FileIO the catalog configured, commits it with a fast append, reloads and scans the table
and checks the vended credentials' lifetime; see its src/main.rs. It runs with no AWS credentials
of its own (no AWS_* variables; config files and instance metadata turned off in its FileIO), so
the only credentials it can sign with are the ones Floe vended, and it checks that its FileIO has
them (moto accepts any signature, so S3 itself proves nothing here). This test then checks from
the outside, through moto with the server's own credentials and through PyIceberg, that the data
file is where the table says and holds what was written.

Only the DynamoDB + S3 backend: the embedded store with a local warehouse vends nothing, and what
this client is here to exercise is iceberg-rust's S3 FileIO on vended credentials.
"""

import json
import os
import subprocess
import uuid

import boto3
import pytest
from pyiceberg.table.snapshots import Operation

from conftest import REGION

BUILD_HINT = (
    "build it with `cargo build --locked --manifest-path tests/rust-client/Cargo.toml` and set "
    "FLOE_RUST_CLIENT=$CARGO_TARGET_DIR/debug/floe-rust-client (scripts/test does both)"
)


def _client_binary() -> str:
    binary = os.environ.get("FLOE_RUST_CLIENT")
    if not binary:
        pytest.fail(f"FLOE_RUST_CLIENT is not set: {BUILD_HINT}")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"FLOE_RUST_CLIENT={binary} is not an executable file: {BUILD_HINT}")
    return binary


def _run_client(floe, namespace: str, table: str, mode: str | None = None) -> dict:
    binary = _client_binary()
    # No AWS_* variables: the client has only the credentials that Floe vends.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOE_", "AWS_"))}
    env.update(FLOE_URI=floe.uri, FLOE_TOKEN=floe.token, FLOE_WAREHOUSE=floe.warehouse,
               FLOE_NAMESPACE=namespace, FLOE_TABLE=table, RUST_BACKTRACE="1")
    if mode:
        env["FLOE_MODE"] = mode
    done = subprocess.run([binary], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"floe-rust-client exited {done.returncode}\nstderr:\n{done.stderr}\nstdout:\n{done.stdout}")
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line, got:\n{done.stdout}"
    return json.loads(lines[0])


@pytest.mark.parametrize("floe", ["aws"], indirect=True)
def test_iceberg_rust_writes_commits_and_reads_back_with_vended_credentials(floe):
    namespace, table = "rs_" + uuid.uuid4().hex[:10], "events"
    summary = _run_client(floe, namespace, table)

    assert summary["table"] == f"{namespace}.{table}"
    assert summary["record_count"] == 3 and summary["rows_read"] == 3
    # Vended with createTable for an hour; the client checked 55 minutes, so does this.
    assert summary["credential_lifetime_s"] >= 55 * 60, summary
    # iceberg-rust 0.10.1 builds the FileIO of the table a commit returns without the answer's
    # config (a commit answer has none): no credentials there. docs/src/engines.md tells users to reload.
    assert summary["commit_file_io_has_credentials"] is False

    # The table as Floe serves it to another engine.
    loaded = floe.catalog().load_table(f"{namespace}.{table}")
    location = loaded.location()
    assert summary["table_location"] == location
    assert summary["metadata_location"] == loaded.metadata_location
    snapshot = loaded.current_snapshot()
    assert snapshot.snapshot_id == summary["snapshot_id"]
    assert snapshot.summary.operation == Operation.APPEND
    assert snapshot.summary["added-data-files"] == "1" and snapshot.summary["added-records"] == "3"
    [data_file] = summary["data_files"]
    assert [task.file.file_path for task in loaded.scan().plan_files()] == [data_file]
    rows = loaded.scan().to_arrow().sort_by("id").to_pydict()
    assert rows == {"id": [1, 2, 3], "name": ["alpha", "beta", "gamma"]}

    # The object itself, seen with the server's credentials: a Parquet file under the table's
    # data directory.
    assert location.startswith("s3://")
    assert data_file.startswith(f"{location}/data/") and data_file.endswith(".parquet"), data_file
    bucket, key = data_file.removeprefix("s3://").split("/", 1)
    s3 = boto3.client("s3", endpoint_url=floe.moto, region_name=REGION, aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    prefix = location.removeprefix(f"s3://{bucket}/") + "/data/"
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    assert listed == [key]
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body[:4] == b"PAR1" and body[-4:] == b"PAR1"


@pytest.mark.parametrize("floe", ["aws"], indirect=True)
def test_iceberg_rust_writes_a_v3_table_and_floe_keeps_its_row_lineage(floe):
    """iceberg-rust's snapshot producer numbers a v3 append's rows from the table's next-row-id;
    Floe keeps the ranges and moves next-row-id by each append's added rows."""
    namespace, table = "rs3_" + uuid.uuid4().hex[:10], "lineage"
    summary = _run_client(floe, namespace, table, mode="v3")
    assert summary["format_version"] == "v3", summary
    assert summary["snapshots"] == [{"first_row_id": 0, "added_rows": 3},
                                    {"first_row_id": 3, "added_rows": 3}], summary
    assert summary["next_row_id"] == 6
    assert summary["rows_read"] == 6

    # The same lineage as another engine loads it.
    loaded = floe.catalog().load_table(f"{namespace}.{table}")
    assert loaded.metadata.format_version == 3
    assert loaded.metadata.next_row_id == 6
    assert sorted((s.first_row_id, s.added_rows) for s in loaded.metadata.snapshots) == [(0, 3), (3, 3)]
