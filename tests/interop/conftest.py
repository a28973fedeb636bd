"""Starts a real `floe serve` on a free loopback port with a temporary data directory.

The binary comes from FLOE_BIN (the test script builds it); the server is stopped when the
session ends.
"""

import os
import secrets
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

WAREHOUSE = "demo"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Floe:
    def __init__(self, uri: str, token: str, data_dir: str):
        self.uri = uri
        self.token = token
        self.data_dir = data_dir
        self.warehouse = WAREHOUSE

    def catalog(self, name: str = "floe"):
        from pyiceberg.catalog import load_catalog

        return load_catalog(name, type="rest", uri=self.uri, warehouse=self.warehouse, token=self.token)


@pytest.fixture(scope="session")
def floe():
    binary = os.environ.get("FLOE_BIN")
    if not binary:
        pytest.fail("FLOE_BIN must point at the floe binary (scripts/test builds it)")
    port = _free_port()
    token = "ema_" + secrets.token_urlsafe(30)
    data_dir = tempfile.mkdtemp(prefix="floe-interop-")
    env = dict(os.environ, FLOE_ADDR=f"127.0.0.1:{port}", FLOE_DATA_DIR=data_dir, FLOE_DEV_TOKEN=token,
               FLOE_DEV_ORG=WAREHOUSE, FLOE_LOG="warn")
    log = open(os.path.join(data_dir, "server.log"), "w")
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    uri = f"http://127.0.0.1:{port}/iceberg"
    deadline = time.time() + 30
    while True:
        try:
            req = urllib.request.Request(f"{uri}/v1/config?warehouse={WAREHOUSE}",
                                         headers={"Authorization": f"Bearer {token}"})
            urllib.request.urlopen(req, timeout=1).read()
            break
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("floe serve did not start; see " + log.name)
            time.sleep(0.1)
    try:
        yield Floe(uri, token, data_dir)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
