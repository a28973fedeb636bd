"""Starts real `floe serve` processes on free loopback ports, one per backend:

- ``local``: the embedded store and a local warehouse directory (the default deployment);
- ``aws``: DynamoDB, S3 and STS on a moto server, with credentials vended to the engines.

The binary comes from FLOE_BIN (the test script builds it). moto is the one at
FLOE_MOTO_ENDPOINT if set, else one started here. Everything started here is stopped when the
session ends.
"""

import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import pytest

WAREHOUSE = "demo"
# moto applies one request at a time (tests/support/moto_server.py), so under concurrent clients
# on a loaded machine a request can wait behind others longer than the AWS SDK's 3-second
# default, which PyArrow's S3 filesystem then reports as "Operation too slow". Test clients wait
# as long as a slow real network might make them.
CLIENT_S3_TIMEOUTS = {"s3.connect-timeout": "60", "s3.request-timeout": "60"}
REGION = "us-east-1"
PLAN_ENTRIES_PER_ANSWER = 3
VENDING_ROLE = "arn:aws:iam::123456789012:role/floe-vending"
# Where the web view links a snapshot's `arraylake.source.repo` (test_ui.py checks the link).
REPO_URL = "https://repos.example.test/{org}/{repo}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, proc: subprocess.Popen, log: str, headers=None) -> None:
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=1).read()
            return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"{url} did not come up; see {log}")
            time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


class Floe:
    def __init__(self, backend: str, uri: str, token: str, data_dir: str, moto: str | None,
                 service_admin_token: str):
        self.backend = backend
        self.uri = uri
        self.token = token
        self.data_dir = data_dir
        self.warehouse = WAREHOUSE
        self.moto = moto
        # A service administrator's token (made with `floe admin create-token --service-admin`
        # before the server started): the only principal that may create orgs.
        self.service_admin_token = service_admin_token
        # The management API beside the Iceberg routes.
        self.api = uri.removesuffix("/iceberg") + "/api/v1"

    def management(self, method: str, path: str, body=None, token: str | None = None, timeout: float = 60):
        """A management API request (`path` under /api/v1) as `token` (default: the org admin):
        its status and JSON answer, for errors too."""
        request = urllib.request.Request(
            self.api + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token or self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read()
                return answer.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def catalog(self, name: str = "floe"):
        """A PyIceberg catalog configured with uri, warehouse and token only."""
        from pyiceberg.catalog import load_catalog

        return load_catalog(name, type="rest", uri=self.uri, warehouse=self.warehouse, token=self.token,
                            **CLIENT_S3_TIMEOUTS)


def start_moto(log_path: str) -> tuple[subprocess.Popen, str]:
    """moto's own application on a free loopback port, one request at a time (see
    tests/support/moto_server.py), once it answers: the process and its endpoint."""
    port = _free_port()
    launcher = os.path.join(os.path.dirname(__file__), "..", "support", "moto_server.py")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, launcher, "127.0.0.1", str(port)], stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    _wait_for(f"{endpoint}/moto-api/data.json", proc, log_path)
    return proc, endpoint


def start_floe(binary: str, env: dict, port: int, token: str, log_path: str) -> tuple[subprocess.Popen, str]:
    """`floe serve` with `env` (which sets FLOE_ADDR to `port`), once it answers `token`: the
    process and its catalog URI."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    uri = f"http://127.0.0.1:{port}/iceberg"
    _wait_for(f"{uri}/v1/config?warehouse={WAREHOUSE}", proc, log_path,
              headers={"Authorization": f"Bearer {token}"})
    return proc, uri


@pytest.fixture(scope="session")
def moto_endpoint():
    given = os.environ.get("FLOE_MOTO_ENDPOINT")
    if given:
        yield given
        return
    proc, endpoint = start_moto(os.path.join(tempfile.mkdtemp(prefix="floe-moto-"), "moto.log"))
    try:
        yield endpoint
    finally:
        _stop(proc)


def _aws_env(moto: str) -> dict:
    import boto3

    bucket = "floe-" + uuid.uuid4().hex[:12]
    boto3.client("s3", endpoint_url=moto, region_name=REGION, aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    return {
        "AWS_ENDPOINT_URL": moto,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "FLOE_STORE": "dynamodb",
        "FLOE_DYNAMODB_TABLE": "floe-" + uuid.uuid4().hex[:12],
        "FLOE_DEV_BUCKET": f"s3://{bucket}/warehouse",
        "FLOE_S3_ENDPOINT": moto,
        "FLOE_S3_REGION": REGION,
        "FLOE_VENDING_ROLE_ARN": VENDING_ROLE,
    }


@pytest.fixture(scope="session", params=["local", "aws"])
def floe(request):
    binary = os.environ.get("FLOE_BIN")
    if not binary:
        pytest.fail("FLOE_BIN must point at the floe binary (scripts/test builds it)")
    backend = request.param
    moto = request.getfixturevalue("moto_endpoint") if backend == "aws" else None
    port = _free_port()
    token = "ema_" + secrets.token_urlsafe(30)
    data_dir = tempfile.mkdtemp(prefix=f"floe-interop-{backend}-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOE_", "AWS_"))}
    env.update(FLOE_ADDR=f"127.0.0.1:{port}", FLOE_DATA_DIR=data_dir, FLOE_DEV_TOKEN=token,
               FLOE_DEV_ORG=WAREHOUSE, FLOE_LOG="warn", FLOE_UI_REPO_URL=REPO_URL,
               # Scan plans paged into many small plan tasks, so every engine that plans through
               # Floe here fetches tasks (test_planning.py).
               FLOE_PLAN_ENTRIES_PER_ANSWER=str(PLAN_ENTRIES_PER_ANSWER))
    if backend == "aws":
        env.update(_aws_env(moto))
        subprocess.run([binary, "admin", "init"], env=env, check=True, capture_output=True)
    made = subprocess.run([binary, "admin", "create-token", "--service-admin"], env=env, check=True,
                          capture_output=True, text=True).stdout
    service_admin_token = next(word for word in made.split() if word.startswith("ema_"))
    proc, uri = start_floe(binary, env, port, token, os.path.join(data_dir, "server.log"))
    try:
        yield Floe(backend, uri, token, data_dir, moto, service_admin_token)
    finally:
        _stop(proc)
