"""Writes the sample API Gateway HTTP API (payload 2.0) events, one per route of the Iceberg
catalog and of the management API, browser requests of the web view (`ui-*.json`), plus the
purge's scheduled event. Run from the repository root: python3 events/generate.py

The events address org `demo` with the token `ema_events_example_token`, the namespace
`events_ns` and the table `events_table` (and the view `events_view`); the management events also expect the team
`events_team`, the api client `events_client`, the bucket configuration `events_bucket`, the
dropped (recoverable) namespace `events_dropped`, and
the token's principal to be a service
administrator (creating and updating orgs). The web view's events that carry the session cookie
expect a session of the token's principal whose id is `SESSION`. tests/lambda provisions exactly
that before feeding each file through lambda_http's own decoding. `events-stream.json` is what
the catalog table's DynamoDB stream hands floe-events.
"""

import base64
import json
import pathlib
import urllib.parse

TOKEN = "ema_events_example_token"
# A web view session id (43 letters and digits, as the server draws them).
SESSION = "eventsExampleSession" + "0" * 23
HERE = pathlib.Path(__file__).parent

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}

# name, method, route template, path parameters, query, body
ROUTES = [
    ("get-config", "GET", "/v1/config", {}, {"warehouse": "demo"}, None),
    ("list-namespaces", "GET", "/v1/{prefix}/namespaces", {}, {}, None),
    ("create-namespace", "POST", "/v1/{prefix}/namespaces", {}, {},
     {"namespace": ["events_created"], "properties": {"owner": "events"}}),
    ("load-namespace", "GET", "/v1/{prefix}/namespaces/{namespace}", {"namespace": "events_ns"}, {}, None),
    ("namespace-exists", "HEAD", "/v1/{prefix}/namespaces/{namespace}", {"namespace": "events_ns"}, {}, None),
    ("drop-namespace", "DELETE", "/v1/{prefix}/namespaces/{namespace}", {"namespace": "events_empty"}, {}, None),
    ("update-namespace-properties", "POST", "/v1/{prefix}/namespaces/{namespace}/properties",
     {"namespace": "events_ns"}, {}, {"updates": {"owner": "events"}, "removals": ["stale"]}),
    ("list-tables", "GET", "/v1/{prefix}/namespaces/{namespace}/tables", {"namespace": "events_ns"},
     {"pageSize": "10"}, None),
    ("create-table", "POST", "/v1/{prefix}/namespaces/{namespace}/tables", {"namespace": "events_ns"}, {},
     {"name": "created_table", "schema": SCHEMA}),
    ("load-table", "GET", "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
     {"namespace": "events_ns", "table": "events_table"}, {}, None),
    ("load-credentials", "GET", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
     {"namespace": "events_ns", "table": "events_table"}, {}, None),
    ("sign-request", "POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
     {"namespace": "events_ns", "table": "events_table"}, {},
     {"method": "GET", "region": "us-east-1", "uri": "https://events-bucket.s3.amazonaws.com/events_ns/data/a.parquet",
      "headers": {"User-Agent": ["Botocore/1.0"]}}),
    ("table-exists", "HEAD", "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
     {"namespace": "events_ns", "table": "events_table"}, {}, None),
    ("commit-table", "POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
     {"namespace": "events_ns", "table": "events_table"}, {},
     {"requirements": [], "updates": [{"action": "set-properties", "updates": {"owner": "events"}}]}),
    ("drop-table", "DELETE", "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
     {"namespace": "events_ns", "table": "events_table"}, {"purgeRequested": "true"}, None),
    ("rename-table", "POST", "/v1/{prefix}/tables/rename", {}, {},
     {"source": {"namespace": ["events_ns"], "name": "events_table"},
      "destination": {"namespace": ["events_ns"], "name": "renamed_table"}}),
    ("report-metrics", "POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
     {"namespace": "events_ns", "table": "events_table"}, {},
     {"report-type": "commit-report", "table-name": "events_ns.events_table", "snapshot-id": 1,
      "sequence-number": 1, "operation": "append", "metrics": {}}),
    ("list-views", "GET", "/v1/{prefix}/namespaces/{namespace}/views", {"namespace": "events_ns"}, {}, None),
    ("register-table", "POST", "/v1/{prefix}/namespaces/{namespace}/register", {"namespace": "events_ns"}, {},
     {"name": "registered_table",
      "metadata-location": "file:///events/legacy/orders/metadata/00001-1b5b5a4e.metadata.json"}),
    ("commit-transaction", "POST", "/v1/{prefix}/transactions/commit", {}, {},
     {"table-changes": [{"identifier": {"namespace": ["events_ns"], "name": "events_table"},
                         "requirements": [],
                         "updates": [{"action": "set-properties", "updates": {"owner": "events"}}]}]}),
    ("create-view", "POST", "/v1/{prefix}/namespaces/{namespace}/views", {"namespace": "events_ns"}, {},
     {"name": "created_view", "schema": {"type": "struct", "schema-id": 0, "fields": SCHEMA["fields"]},
      "view-version": {"version-id": 1, "schema-id": 0, "timestamp-ms": 1764547200000,
                       "summary": {"engine-name": "events"}, "default-namespace": ["events_ns"],
                       "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}]},
      "properties": {}}),
    ("load-view", "GET", "/v1/{prefix}/namespaces/{namespace}/views/{view}",
     {"namespace": "events_ns", "view": "events_view"}, {}, None),
    ("view-exists", "HEAD", "/v1/{prefix}/namespaces/{namespace}/views/{view}",
     {"namespace": "events_ns", "view": "events_view"}, {}, None),
    ("replace-view", "POST", "/v1/{prefix}/namespaces/{namespace}/views/{view}",
     {"namespace": "events_ns", "view": "events_view"}, {},
     {"requirements": [], "updates": [{"action": "set-properties", "updates": {"owner": "events"}}]}),
    ("drop-view", "DELETE", "/v1/{prefix}/namespaces/{namespace}/views/{view}",
     {"namespace": "events_ns", "view": "events_view"}, {}, None),
    ("rename-view", "POST", "/v1/{prefix}/views/rename", {}, {},
     {"source": {"namespace": ["events_ns"], "name": "events_view"},
      "destination": {"namespace": ["events_ns"], "name": "renamed_view"}}),
    ("register-view", "POST", "/v1/{prefix}/namespaces/{namespace}/register-view", {"namespace": "events_ns"}, {},
     {"name": "registered_view",
      "metadata-location": "file:///events/legacy/view/metadata/00001-6b1f7e9a.metadata.json"}),
    ("unregister-table", "POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
     {"namespace": "events_ns", "table": "events_table"}, {}, None),
    ("plan-table-scan", "POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
     {"namespace": "events_ns", "table": "events_table"}, {},
     {"filter": {"type": "gt-eq", "term": "id", "value": 1}, "case-sensitive": True, "use-snapshot-schema": False}),
    ("fetch-planning-result", "GET", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
     {"namespace": "events_ns", "table": "events_table", "plan-id": "events_plan"}, {}, None),
    ("cancel-planning", "DELETE", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
     {"namespace": "events_ns", "table": "events_table", "plan-id": "events_plan"}, {}, None),
    ("fetch-scan-tasks", "POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
     {"namespace": "events_ns", "table": "events_table"}, {}, {"plan-task": "events_task"}),
]

# The management API (floe-management), relative to /api/v1; `{org}` is `demo`.
USER = "user:events-user"
# A dropped table's uuid that nothing in the events' org has (what restores: tests/http/recovery.rs).
DROPPED_UUID = "0193a0d2-7c1e-7000-8000-00000000d20b"

MANAGEMENT_ROUTES = [
    ("create-org", "POST", "/orgs", {}, {}, {"name": "events_org"}),
    ("update-org", "PATCH", "/orgs/{org}", {}, {}, {"iceberg_enabled": True}),
    ("create-api-client", "POST", "/orgs/{org}/api-clients", {}, {}, {"name": "events-reader", "role": "read"}),
    ("list-api-clients", "GET", "/orgs/{org}/api-clients", {}, {}, None),
    ("delete-api-client", "DELETE", "/orgs/{org}/api-clients/{id}", {"id": "events_client"}, {}, None),
    ("put-member", "PUT", "/orgs/{org}/members/{principal}", {"principal": USER}, {}, {"role": "read"}),
    ("create-team", "POST", "/orgs/{org}/teams", {}, {}, {"name": "events_created_team"}),
    ("get-team", "GET", "/orgs/{org}/teams/{team}", {"team": "events_team"}, {}, None),
    ("put-team-member", "PUT", "/orgs/{org}/teams/{team}/members/{principal}",
     {"team": "events_team", "principal": USER}, {}, None),
    ("delete-team-member", "DELETE", "/orgs/{org}/teams/{team}/members/{principal}",
     {"team": "events_team", "principal": USER}, {}, None),
    ("list-org-namespaces", "GET", "/orgs/{org}/namespaces", {}, {"deleted": "true"}, None),
    ("delete-org-namespace", "DELETE", "/orgs/{org}/namespaces/{namespace}", {"namespace": "events_empty"},
     {"immediate": "true"}, None),
    ("restore-namespace", "POST", "/orgs/{org}/namespaces/{namespace}/restore", {"namespace": "events_dropped"},
     {}, None),
    ("list-dropped-tables", "GET", "/orgs/{org}/namespaces/{namespace}/deleted-tables", {"namespace": "events_ns"},
     {}, None),
    ("restore-dropped-table", "POST", "/orgs/{org}/namespaces/{namespace}/deleted-tables/{table_uuid}/restore",
     {"namespace": "events_ns", "table_uuid": DROPPED_UUID}, {}, {"name": "events_restored"}),
    ("purge-dropped-table", "DELETE", "/orgs/{org}/namespaces/{namespace}/deleted-tables/{table_uuid}",
     {"namespace": "events_ns", "table_uuid": DROPPED_UUID}, {}, None),
    ("maintain-table", "POST", "/orgs/{org}/namespaces/{namespace}/tables/{table}/maintain",
     {"namespace": "events_ns", "table": "events_table"}, {"dry_run": "true"}, None),
    ("get-table-maintenance", "GET", "/orgs/{org}/namespaces/{namespace}/tables/{table}/maintenance",
     {"namespace": "events_ns", "table": "events_table"}, {}, None),
    ("get-namespace-settings", "GET", "/orgs/{org}/namespaces/{namespace}", {"namespace": "events_ns"}, {}, None),
    ("update-namespace-settings", "PATCH", "/orgs/{org}/namespaces/{namespace}", {"namespace": "events_ns"}, {},
     {"description": "Events from API Gateway"}),
    ("list-grants", "GET", "/orgs/{org}/namespaces/{namespace}/grants", {"namespace": "events_ns"}, {}, None),
    ("put-grant", "PUT", "/orgs/{org}/namespaces/{namespace}/grants", {"namespace": "events_ns"}, {},
     {"principal": "team:events_team", "action": "read"}),
    ("delete-grant", "DELETE", "/orgs/{org}/namespaces/{namespace}/grants", {"namespace": "events_ns"},
     {"principal": "team:events_team"}, None),
    ("get-me", "GET", "/me", {}, {}, None),
    ("create-bucket", "POST", "/orgs/{org}/buckets", {}, {},
     {"nickname": "events_new_bucket", "platform": "s3", "bucket": "events-new-bucket",
      "auth": {"type": "anonymous"}}),
    ("list-buckets", "GET", "/orgs/{org}/buckets", {}, {}, None),
    ("get-bucket", "GET", "/orgs/{org}/buckets/{nickname}", {"nickname": "default"}, {}, None),
    ("delete-bucket", "DELETE", "/orgs/{org}/buckets/{nickname}", {"nickname": "events_bucket"}, {}, None),
    ("set-default-bucket", "PUT", "/orgs/{org}/default-bucket", {}, {}, {"nickname": "default"}),
    ("list-events", "GET", "/orgs/{org}/events", {}, {"limit": "10"}, None),
]

# The web view (floe-ui), as a browser sends it; routes as floe::ui::GATEWAY_ROUTES declares them.
# name, method, route template, path, query, form body, with the session cookie
UI_ROUTES = [
    ("ui-index", "GET", "/ui", "/ui", {}, None, False),
    ("ui-sign-in", "POST", "/ui/{proxy+}", "/ui/signin", {}, {"token": TOKEN}, False),
    ("ui-org", "GET", "/ui/{proxy+}", "/ui/orgs/demo", {}, None, True),
    ("ui-org-signed-out", "GET", "/ui/{proxy+}", "/ui/orgs/demo", {}, None, False),
    ("ui-table", "GET", "/ui/{proxy+}", "/ui/orgs/demo/namespaces/events_ns/tables/events_table",
     {"page": "1"}, None, True),
    ("ui-stylesheet", "GET", "/ui/{proxy+}", "/ui/static/floe.css", {}, None, False),
    ("ui-sign-out", "POST", "/ui/{proxy+}", "/ui/signout", {}, {}, True),
]


def event(method, template, params, query, body, base="/iceberg"):
    """An Iceberg route's event (`base` /iceberg, as PyIceberg sends it), or a management
    route's (`base` /api/v1, as curl sends it)."""
    iceberg = base == "/iceberg"
    for param in ("prefix", "org"):
        if "{" + param + "}" in template:
            params = {param: "demo", **params}
    path = base + template
    for name, value in params.items():
        path = path.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
    route_key = f"{method} {base}{template}"
    user_agent = "PyIceberg/0.12.0" if iceberg else "curl/8.5.0"
    headers = {
        "accept": "application/json",
        "authorization": f"Bearer {TOKEN}",
        "host": "floe.execute-api.us-east-1.amazonaws.com",
        "user-agent": user_agent,
    }
    if iceberg:
        headers["x-iceberg-access-delegation"] = "vended-credentials"
    if body is not None:
        headers["content-type"] = "application/json"
    out = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": urllib.parse.urlencode(query),
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "floe",
            "domainName": "floe.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "floe",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.10",
                     "userAgent": user_agent},
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "routeKey": route_key,
            "stage": "$default",
            "time": "29/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1796040000000,
        },
        "isBase64Encoded": False,
    }
    if query:
        out["queryStringParameters"] = query
    if params:
        out["pathParameters"] = params
    if body is not None:
        out["body"] = json.dumps(body)
    return out


def ui_event(method, template, path, query, form, signed_in):
    """A browser's request to the web view: HTML accepted, the session in the payload's `cookies`
    (API Gateway takes them out of the headers), a form post base64-encoded as API Gateway
    passes non-text bodies, with the Origin and Sec-Fetch-Site a browser adds."""
    host = "floe.execute-api.us-east-1.amazonaws.com"
    user_agent = "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0"
    route_key = f"{method} {template}"
    headers = {
        "accept": "text/html,application/xhtml+xml",
        "accept-encoding": "identity",
        "host": host,
        "user-agent": user_agent,
        "x-forwarded-proto": "https",
    }
    if form is not None:
        headers["content-type"] = "application/x-www-form-urlencoded"
        headers["origin"] = f"https://{host}"
        headers["sec-fetch-site"] = "same-origin"
    out = event(method, template, {}, query, None)
    out.update({"routeKey": route_key, "rawPath": path, "headers": headers})
    out["requestContext"].update({"routeKey": route_key})
    out["requestContext"]["http"].update({"path": path, "userAgent": user_agent})
    if template.endswith("{proxy+}"):
        out["pathParameters"] = {"proxy": path.removeprefix("/ui/")}
    if signed_in:
        out["cookies"] = [f"floe_session={SESSION}"]
    if form is not None:
        out["body"] = base64.b64encode(urllib.parse.urlencode(form).encode()).decode()
        out["isBase64Encoded"] = True
    return out


SCHEDULE = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": "123456789012",
    "time": "2026-11-29T12:00:00Z",
    "region": "us-east-1",
    "resources": ["arn:aws:events:us-east-1:123456789012:rule/floe-purge"],
    "detail": {},
}


# What the DynamoDB stream hands floe-events: a new change event (the outbox item) and a new
# table row beside it in the same transaction, which is not an event.
CHANGE_EVENT = {
    "specversion": "1.0", "id": "1", "source": "/orgs/demo", "type": "io.floe.table.created",
    "subject": "namespaces/events_ns/tables/events_table", "time": "2026-11-29T12:00:00.000Z",
    "datacontenttype": "application/json", "sequence": "00000000000000000001",
    "data": {"org": "demo", "sequence": 1, "namespace": "events_ns", "namespace-uuid": "0193-ns",
             "table": "events_table", "table-uuid": "0193-table",
             "metadata-location": "s3://warehouse/events_ns/events_table/metadata/00000-0193.metadata.json",
             "principal": {"id": "api_client:events", "name": "events"}},
}


def stream_record(sequence_number, keys, image):
    return {
        "eventID": f"event-{sequence_number}",
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1796040000,
            "Keys": keys,
            "NewImage": {**keys, **image},
            "SequenceNumber": sequence_number,
            "SizeBytes": 512,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/floe/stream/2026-11-29T00:00:00.000",
    }


def stream_event():
    body = base64.b64encode(json.dumps(CHANGE_EVENT).encode()).decode()
    table_row = base64.b64encode(b'{"id":"0193-table"}').decode()
    return {"Records": [
        stream_record("100000000000000000001", {"pk": {"S": "NS#0193-ns"}, "sk": {"S": "TABLE#events_table"}},
                      {"v": {"N": "1"}, "body": {"B": table_row}, "tok": {"S": "0" * 32}}),
        stream_record("100000000000000000002", {"pk": {"S": "EVENTS#demo"}, "sk": {"S": "00000000000000000001"}},
                      {"v": {"N": "1"}, "body": {"B": body}, "ttl": {"N": "1796644800"}}),
    ]}


def main():
    for name, method, template, params, query, body in ROUTES:
        (HERE / f"{name}.json").write_text(json.dumps(event(method, template, params, query, body), indent=2) + "\n")
    for name, method, template, params, query, body in MANAGEMENT_ROUTES:
        managed = event(method, template, params, query, body, base="/api/v1")
        (HERE / f"{name}.json").write_text(json.dumps(managed, indent=2) + "\n")
    for name, *request in UI_ROUTES:
        (HERE / f"{name}.json").write_text(json.dumps(ui_event(*request), indent=2) + "\n")
    (HERE / "purge-schedule.json").write_text(json.dumps(SCHEDULE, indent=2) + "\n")
    maintenance = dict(SCHEDULE, resources=["arn:aws:events:us-east-1:123456789012:rule/floe-maintenance"])
    (HERE / "maintenance-schedule.json").write_text(json.dumps(maintenance, indent=2) + "\n")
    (HERE / "events-stream.json").write_text(json.dumps(stream_event(), indent=2) + "\n")


if __name__ == "__main__":
    main()
