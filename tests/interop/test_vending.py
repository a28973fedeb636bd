"""Credential vending through the REST API: shape, scope and refresh, as engines receive it."""

import json
import urllib.request
import uuid

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

CREDENTIAL_KEYS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token", "s3.session-token-expires-at-ms")


def _get(floe, path, vended=True):
    headers = {"Authorization": f"Bearer {floe.token}"}
    if vended:
        headers["X-Iceberg-Access-Delegation"] = "vended-credentials"
    request = urllib.request.Request(f"{floe.uri}/v1/{floe.warehouse}{path}", headers=headers)
    return json.loads(urllib.request.urlopen(request).read())


def _table(floe):
    catalog = floe.catalog()
    ns = "vend_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.t", schema=Schema(NestedField(1, "id", LongType(), required=False)))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    return ns, catalog.load_table(f"{ns}.t")


def test_load_table_vends_table_scoped_credentials_in_both_forms(floe):
    ns, table = _table(floe)
    result = _get(floe, f"/namespaces/{ns}/tables/t")
    location = result["metadata"]["location"]
    if floe.backend == "local":
        assert result["config"] == {} and "storage-credentials" not in result
        return
    [credential] = result["storage-credentials"]
    assert credential["prefix"] == location
    for key in CREDENTIAL_KEYS:
        assert credential["config"][key] == result["config"][key]
    assert result["config"]["s3.endpoint"] == floe.moto
    assert result["config"]["s3.path-style-access"] == "true"
    assert result["config"]["s3.region"] == "us-east-1"
    # Without the header nothing is vended.
    plain = _get(floe, f"/namespaces/{ns}/tables/t", vended=False)
    assert "storage-credentials" not in plain and "s3.access-key-id" not in plain["config"]


def test_refreshed_credentials_read_the_table(floe):
    ns, table = _table(floe)
    refreshed = _get(floe, f"/namespaces/{ns}/tables/t/credentials")
    if floe.backend == "local":
        assert refreshed == {"storage-credentials": []}
        return
    [credential] = refreshed["storage-credentials"]
    assert credential["prefix"] == table.location()
    import boto3

    config = credential["config"]
    s3 = boto3.client(
        "s3",
        endpoint_url=floe.moto,
        region_name="us-east-1",
        aws_access_key_id=config["s3.access-key-id"],
        aws_secret_access_key=config["s3.secret-access-key"],
        aws_session_token=config["s3.session-token"],
    )
    bucket, key = table.metadata_location.removeprefix("s3://").split("/", 1)
    metadata = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert metadata["table-uuid"] == str(table.metadata.table_uuid)
