"""Access control with real engines: a table-grant reader in PyIceberg, another org's api client
reading a public namespace in DuckDB. Everything is set up through the management API."""

import uuid

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import ForbiddenError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from conftest import CLIENT_S3_TIMEOUTS

from test_duckdb import _connect

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def _api(floe, method: str, path: str, token: str, body=None):
    return floe.management(method, path, body, token=token, timeout=30)


def _catalog(floe, token: str, name: str):
    return load_catalog(name, type="rest", uri=floe.uri, warehouse=floe.warehouse, token=token,
                        **CLIENT_S3_TIMEOUTS)


def _table_with_rows(floe, ns: str, name: str):
    table = floe.catalog().create_table(f"{ns}.{name}", schema=SCHEMA)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["a", "b"])}))
    return table


def test_a_table_grant_reader_reads_that_table_only_and_cannot_write(floe):
    admin = floe.catalog()
    ns = "acc_" + uuid.uuid4().hex[:8]
    admin.create_namespace(ns)
    _table_with_rows(floe, ns, "granted")
    _table_with_rows(floe, ns, "hidden")
    status, client = _api(floe, "POST", f"/orgs/{floe.warehouse}/api-clients", floe.token,
                          {"name": "reader-" + ns, "role": "read"})
    assert status == 201, client
    principal = client["principal"]
    assert _api(floe, "PUT", f"/orgs/{floe.warehouse}/members/{principal}", floe.token, {"role": "none"})[0] == 204
    status, _ = _api(floe, "PUT", f"/orgs/{floe.warehouse}/namespaces/{ns}/grants", floe.token,
                     {"principal": principal, "action": "read", "table": "granted"})
    assert status == 204

    reader = _catalog(floe, client["token"], "reader")
    assert reader.list_tables(ns) == [(ns, "granted")]
    table = reader.load_table(f"{ns}.granted")
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    with pytest.raises(ForbiddenError):
        table.append(pa.table({"id": pa.array([3], pa.int64()), "name": pa.array(["c"])}))
    with pytest.raises(ForbiddenError):
        reader.load_table(f"{ns}.hidden")
    assert sorted(admin.load_table(f"{ns}.granted").scan().to_arrow()["id"].to_pylist()) == [1, 2]


def test_another_orgs_api_client_reads_a_public_namespace_with_duckdb(floe):
    ns = "pub_" + uuid.uuid4().hex[:8]
    floe.catalog().create_namespace(ns)
    _table_with_rows(floe, ns, "shared")
    other = "org_" + uuid.uuid4().hex[:8]
    assert _api(floe, "POST", "/orgs", floe.service_admin_token, {"name": other})[0] == 201
    status, client = _api(floe, "POST", f"/orgs/{other}/api-clients", floe.service_admin_token,
                          {"name": "visitor", "role": "admin"})
    assert status == 201, client

    class Visitor:
        token = client["token"]
        warehouse = floe.warehouse
        uri = floe.uri

    # Private: the visitor cannot read it (attaching may already be refused when nothing in the
    # org is public).
    with pytest.raises(Exception):
        _connect(Visitor).execute(f"SELECT count(*) FROM floe.{ns}.shared").fetchone()
    status, _ = _api(floe, "PATCH", f"/orgs/{floe.warehouse}/namespaces/{ns}", floe.token,
                     {"visibility": "AUTHENTICATED_PUBLIC"})
    assert status == 200
    con = _connect(Visitor)
    assert con.execute(f"SELECT count(*), sum(id) FROM floe.{ns}.shared").fetchone() == (2, 3)
    with pytest.raises(Exception):
        con.execute(f"INSERT INTO floe.{ns}.shared VALUES (9, 'z')")
