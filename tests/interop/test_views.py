"""Views through PyIceberg 0.12's REST catalog (create, load, list, exists, register, drop), and
a view created by one client loaded by another: PyIceberg's against a plain HTTP client's, as
Spark or Trino would send it."""

import json
import urllib.request
import uuid

import pytest
from pyiceberg.exceptions import BadRequestError, NoSuchViewError, ViewAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def _http(floe, method: str, path: str, body: dict | None = None) -> dict | None:
    request = urllib.request.Request(
        f"{floe.uri}/v1/{floe.warehouse}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {floe.token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        raw = answer.read()
        return json.loads(raw) if raw else None


def _version(ns: str, sql: str) -> ViewVersion:
    return ViewVersion(
        version_id=1, schema_id=0, summary={"engine-name": "pyiceberg"}, default_namespace=(ns,),
        representations=[ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect="spark"))])


def test_pyiceberg_creates_lists_loads_and_drops_a_view(floe):
    catalog = floe.catalog()
    ns = "pyv_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    catalog.create_table(f"{ns}.events", schema=SCHEMA)
    view = catalog.create_view(f"{ns}.recent", schema=SCHEMA,
                               view_version=_version(ns, f"SELECT * FROM {ns}.events"))
    assert view.metadata.current_version_id == 1
    assert catalog.list_views(ns) == [(ns, "recent")]
    assert catalog.view_exists(f"{ns}.recent")
    assert not catalog.view_exists(f"{ns}.events")
    assert catalog.list_tables(ns) == [(ns, "events")]
    with pytest.raises(ViewAlreadyExistsError):
        catalog.create_view(f"{ns}.events", schema=SCHEMA, view_version=_version(ns, "SELECT 1"))

    # Another client loads what PyIceberg created.
    loaded = _http(floe, "GET", f"/namespaces/{ns}/views/recent")
    representation = loaded["metadata"]["versions"][0]["representations"][0]
    assert representation == {"type": "sql", "sql": f"SELECT * FROM {ns}.events", "dialect": "spark"}
    assert loaded["metadata"]["view-uuid"] == str(view.metadata.view_uuid)

    catalog.drop_view(f"{ns}.recent")
    with pytest.raises(NoSuchViewError):
        catalog.load_view(f"{ns}.recent")
    assert catalog.list_views(ns) == []


def test_a_view_created_over_http_is_loaded_by_pyiceberg(floe):
    catalog = floe.catalog()
    ns = "httpv_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    created = _http(floe, "POST", f"/namespaces/{ns}/views", {
        "name": "by_http",
        "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False}]},
        "view-version": {"version-id": 1, "schema-id": 0, "timestamp-ms": 1764547200000,
                         "summary": {"engine-name": "trino"}, "default-namespace": [ns],
                         "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "trino"}]},
        "properties": {}})
    view = catalog.load_view(f"{ns}.by_http")
    assert str(view.metadata.view_uuid) == created["metadata"]["view-uuid"]
    assert view.metadata.versions[0].representations[0].root.dialect == "trino"

    # The view's own file registers under no other name: its directory is the view's (what
    # registers: tests/http/views.rs).
    location = created["metadata"]["location"]
    with pytest.raises(BadRequestError):
        catalog.register_view(f"{ns}.again", created["metadata-location"])
    assert catalog.view_exists(f"{ns}.by_http")
    assert not catalog.view_exists(f"{ns}.again")
    assert location.startswith(catalog.load_namespace_properties(ns)["location"])
