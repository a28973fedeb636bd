"""Remote signing end to end: PyIceberg's fsspec FileIO signs every storage request through
`floe serve` on a bucket with static keys, on a moto server that checks signatures.

moto checks nothing by default; here it is started with its IAM authentication on (after the
set-up requests), so every S3 request must carry a valid SigV4 signature of an IAM user's key.
The catalog holds that key (`FLOE_S3_ACCESS_KEY_ID`); engines never see it.

PyIceberg 0.12 registers its signer on an s3fs client that fsspec shares between threads (and
between FileIOs with the same S3 settings), unregistering and registering it again whenever a
thread first uses a FileIO: a request of another thread in that window goes out unsigned (and
S3 answers 403). The tests therefore run PyIceberg's work in the calling thread (docs/src/storage.md:
"PyIceberg and remote signing").
"""

import json
import os
import secrets
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid

import boto3
import botocore.exceptions
import pyarrow as pa
import pytest
from concurrent.futures import Executor, Future
from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import GreaterThanOrEqual
from pyiceberg.utils.concurrent import ExecutorFactory
from pyiceberg.exceptions import SignError

from conftest import REGION, WAREHOUSE, _free_port, _stop, start_floe, start_moto

SCHEMA = pa.schema([("id", pa.int64()), ("item", pa.string())])


class InCallingThread(Executor):
    """An executor that runs each task at once in the thread that submits it."""

    def submit(self, fn, /, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(e)
        return future


class Signed:
    def __init__(self, uri, token, reader_token, moto, bucket, keys):
        self.uri = uri
        self.token = token
        self.reader_token = reader_token
        self.moto = moto
        self.bucket = bucket
        self.keys = keys

    def catalog(self, token=None, **properties):
        return load_catalog(
            "signed-" + uuid.uuid4().hex[:6],
            type="rest",
            uri=self.uri,
            warehouse=WAREHOUSE,
            token=token or self.token,
            **{
                "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
                "header.X-Iceberg-Access-Delegation": "remote-signing",
                **properties,
            },
        )

    def s3(self, secret=None):
        access_key_id, secret_access_key = self.keys
        return boto3.client("s3", endpoint_url=self.moto, region_name=REGION,
                            aws_access_key_id=access_key_id,
                            aws_secret_access_key=secret or secret_access_key)

    def objects(self):
        listed = self.s3().list_objects_v2(Bucket=self.bucket)
        return sorted(o["Key"] for o in listed.get("Contents", []))

    def sign(self, token, namespace, table, request):
        http = urllib.request.Request(
            f"{self.uri}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{table}/sign",
            data=json.dumps(request).encode(), method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(http) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def signed():
    binary = os.environ.get("FLOE_BIN")
    if not binary:
        pytest.fail("FLOE_BIN must point at the floe binary (scripts/test builds it)")
    work = tempfile.mkdtemp(prefix="floe-signing-")
    moto_proc, moto = start_moto(os.path.join(work, "moto.log"))
    floe_proc = None
    # PyIceberg's executor is made once per process: replaced for this module only.
    executor = (ExecutorFactory._instance, ExecutorFactory._instance_pid)
    ExecutorFactory._instance, ExecutorFactory._instance_pid = InCallingThread(), os.getpid()
    try:
        setup = dict(endpoint_url=moto, region_name=REGION, aws_access_key_id="setup",
                     aws_secret_access_key="setup")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="floe-catalog")
        iam.put_user_policy(UserName="floe-catalog", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="floe-catalog")["AccessKey"]
        keys = (key["AccessKeyId"], key["SecretAccessKey"])
        bucket = "floe-signed-" + uuid.uuid4().hex[:8]
        boto3.client("s3", **setup).create_bucket(Bucket=bucket)
        # From here on, moto authenticates every request.
        # (As text: a form body would be read as form fields, leaving the count empty.)
        urllib.request.urlopen(urllib.request.Request(f"{moto}/moto-api/reset-auth", data=b"0", method="POST",
                                                      headers={"Content-Type": "text/plain"}))
        token = "ema_" + secrets.token_urlsafe(30)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOE_", "AWS_"))}
        port = _free_port()
        env.update(FLOE_ADDR=f"127.0.0.1:{port}", FLOE_DATA_DIR=os.path.join(work, "data"),
                   FLOE_DEV_TOKEN=token, FLOE_DEV_ORG=WAREHOUSE, FLOE_LOG="warn",
                   FLOE_DEV_BUCKET=f"s3://{bucket}/warehouse", FLOE_S3_ENDPOINT=moto,
                   FLOE_S3_REGION=REGION, FLOE_S3_ACCESS_KEY_ID=keys[0],
                   FLOE_S3_SECRET_ACCESS_KEY=keys[1])
        made = subprocess.run([binary, "admin", "create-token", "--name", "reader", "--role", "read"],
                              env=env, check=True, capture_output=True, text=True).stdout
        reader_token = next(word for word in made.split() if word.startswith("ema_"))
        floe_proc, uri = start_floe(binary, env, port, token, os.path.join(work, "floe.log"))
        yield Signed(uri, token, reader_token, moto, bucket, keys)
    finally:
        ExecutorFactory._instance, ExecutorFactory._instance_pid = executor
        if floe_proc is not None:
            _stop(floe_proc)
        _stop(moto_proc)


def test_moto_checks_signatures(signed):
    """The premise: a request signed with the wrong secret is refused by moto itself."""
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        signed.s3(secret="not-the-secret").list_objects_v2(Bucket=signed.bucket)
    assert refused.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "403", "AccessDenied")
    signed.s3().list_objects_v2(Bucket=signed.bucket)


def test_pyiceberg_creates_appends_and_reads_through_signed_requests(signed):
    catalog = signed.catalog()
    ns = "sign_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.orders", schema=SCHEMA)
    table.append(pa.table({"id": [1, 2], "item": ["tea", "cake"]}, schema=SCHEMA))
    table.append(pa.table({"id": [3], "item": ["jam"]}, schema=SCHEMA))
    read = catalog.load_table(f"{ns}.orders").scan().to_arrow().sort_by("id")
    assert read.column("id").to_pylist() == [1, 2, 3]
    location = table.location().removeprefix(f"s3://{signed.bucket}/")
    written = [k for k in signed.objects() if k.startswith(location + "/data/")]
    assert len(written) == 2, written
    # The answers never carried the keys.
    loaded = urllib.request.urlopen(urllib.request.Request(
        f"{signed.uri}/v1/{WAREHOUSE}/namespaces/{ns}/tables/orders",
        headers={"Authorization": f"Bearer {signed.token}",
                 "X-Iceberg-Access-Delegation": "remote-signing"})).read().decode()
    assert signed.keys[1] not in loaded and signed.keys[0] not in loaded
    assert json.loads(loaded)["config"]["s3.signer"] == "S3V4RestSigner"


def test_pyiceberg_reads_through_floes_plan_with_remote_signing(signed):
    """Scan planning on a static-key bucket: the plan carries no credentials, and the engine
    reads the planned files through the signer it set up at load (moto checks every
    signature)."""
    catalog = signed.catalog()
    ns = "plan_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.orders", schema=SCHEMA)
    table.append(pa.table({"id": [1, 2], "item": ["tea", "cake"]}, schema=SCHEMA))
    table.append(pa.table({"id": [3], "item": ["jam"]}, schema=SCHEMA))
    planner = signed.catalog(**{"scan-planning-mode": "server"})
    assert planner.supports_server_side_planning()
    planned = planner.load_table(f"{ns}.orders")
    read = planned.scan(row_filter=GreaterThanOrEqual("id", 2)).to_arrow().sort_by("id")
    assert read.column("id").to_pylist() == [2, 3]
    answer = urllib.request.urlopen(urllib.request.Request(
        f"{signed.uri}/v1/{WAREHOUSE}/namespaces/{ns}/tables/orders/plan", method="POST",
        data=b"{}", headers={"Authorization": f"Bearer {signed.token}", "Content-Type": "application/json",
                             "X-Iceberg-Access-Delegation": "remote-signing"})).read().decode()
    assert "storage-credentials" not in json.loads(answer)
    assert signed.keys[1] not in answer and signed.keys[0] not in answer


def test_refused_requests_write_nothing(signed):
    catalog = signed.catalog()
    ns = "refuse_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA)
    table.append(pa.table({"id": [1], "item": ["a"]}, schema=SCHEMA))
    other = catalog.create_table(f"{ns}.other", schema=SCHEMA)
    before = signed.objects()
    # A reader reads through signing, and cannot write.
    reader = signed.catalog(signed.reader_token)
    assert reader.load_table(f"{ns}.t").scan().to_arrow().num_rows == 1
    with pytest.raises((SignError, OSError, PermissionError)):
        reader.load_table(f"{ns}.t").append(pa.table({"id": [2], "item": ["b"]}, schema=SCHEMA))
    location = table.location().removeprefix(f"s3://{signed.bucket}/")
    other_location = other.location().removeprefix(f"s3://{signed.bucket}/")
    base = f"{signed.moto}/{signed.bucket}"

    def request(method, path, **extra):
        return {"method": method, "region": REGION, "uri": f"{base}/{path}",
                "headers": {"User-Agent": ["test"]}, **extra}

    for token, asked in [
        (signed.reader_token, request("PUT", f"{location}/data/x.parquet")),
        # Another table's file, and a listing of the whole warehouse.
        (signed.token, request("GET", f"{other_location}/data/x.parquet")),
        (signed.token, {"method": "GET", "region": REGION, "headers": {},
                        "uri": f"{base}?list-type=2&prefix=warehouse%2F"}),
        # The table's current metadata file, overwritten.
        (signed.token, request("PUT", table.metadata_location.removeprefix(f"s3://{signed.bucket}/"))),
    ]:
        status, body = signed.sign(token, ns, "t", asked)
        assert status == 403, (asked, body)
        assert body["error"]["type"] == "ForbiddenException"
    # Signed or not, nothing reached the bucket.
    assert signed.objects() == before


def test_an_engine_with_its_own_keys_asks_for_vended_credentials_and_gets_none(signed):
    """PyIceberg sends `X-Iceberg-Access-Delegation: vended-credentials` by default. On a bucket
    whose keys the catalog keeps, the spec lets the server supply "none of the requested
    mechanisms": the table loads with the bucket's endpoint and region, no credentials, and an
    engine holding keys of its own (a team bringing its storage keys to its engines) reads and
    writes with them."""
    access_key_id, secret_access_key = signed.keys
    catalog = load_catalog(
        "own-keys-" + uuid.uuid4().hex[:6], type="rest", uri=signed.uri, warehouse=WAREHOUSE,
        token=signed.token,
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials",
           "s3.access-key-id": access_key_id, "s3.secret-access-key": secret_access_key})
    ns = "own_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.orders", schema=SCHEMA)
    table.append(pa.table({"id": [1, 2], "item": ["tea", "cake"]}, schema=SCHEMA))
    read = catalog.load_table(f"{ns}.orders").scan().to_arrow().sort_by("id")
    assert read.column("item").to_pylist() == ["tea", "cake"]
    loaded = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"{signed.uri}/v1/{WAREHOUSE}/namespaces/{ns}/tables/orders",
        headers={"Authorization": f"Bearer {signed.token}",
                 "X-Iceberg-Access-Delegation": "vended-credentials"})).read())
    assert "storage-credentials" not in loaded
    assert loaded["config"]["s3.endpoint"] == signed.moto
    assert access_key_id not in json.dumps(loaded) and secret_access_key not in json.dumps(loaded)
