"""Local invocation of the Lambda functions with cargo-lambda (pinned from PyPI), as docs/src/deploying.md shows:
`cargo lambda watch` serves a function, `cargo lambda invoke --data-file events/...` calls it."""

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "ema_events_example_token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cargo_env(data_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOE_", "AWS_"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    return env


class _Watch:
    """A running `cargo lambda watch`: invoke its functions, or reach them over HTTP."""

    def __init__(self, port, env, process, log):
        self.port, self.env, self.process, self.log = port, env, process, log

    def invoke(self, binary: str, event_file: str) -> dict:
        """`cargo lambda invoke`, retried while the watch builds and starts the function."""
        deadline = time.time() + 300
        while True:
            invoked = subprocess.run(
                ["cargo", "lambda", "invoke", binary, "--data-file", event_file,
                 "-A", "127.0.0.1", "-P", str(self.port)],
                cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300,
            )
            if invoked.returncode == 0 or time.time() > deadline or self.process.poll() is not None:
                break
            time.sleep(1)
        assert invoked.returncode == 0, invoked.stderr + open(self.log).read()
        return json.loads(invoked.stdout)

    def url(self, binary: str, path: str) -> str:
        """The function-URL front, which turns plain HTTP into API Gateway v2 events."""
        return f"http://127.0.0.1:{self.port}/lambda-url/{binary}{path}"


@contextlib.contextmanager
def _watch():
    """`cargo lambda watch` on a free port and a fresh data directory. With the embedded store
    one function process holds a data directory at a time, so each test that invokes another
    function watches on its own."""
    port = _free_port()
    data_dir = tempfile.mkdtemp(prefix="floe-cargo-lambda-")
    env = _cargo_env(data_dir)
    log = open(os.path.join(data_dir, "watch.log"), "w")
    watch = subprocess.Popen(
        ["cargo", "lambda", "watch", "-A", "127.0.0.1", "-P", str(port), "--ignore-changes",
         "--env-var", f"FLOE_DATA_DIR={data_dir}/data", "--env-var", f"FLOE_DEV_TOKEN={TOKEN}",
         "--env-var", "FLOE_DEV_ORG=demo"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        yield _Watch(port, env, watch, log.name)
    finally:
        os.killpg(watch.pid, signal.SIGTERM)
        try:
            watch.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(watch.pid, signal.SIGKILL)
        log.close()


def test_watch_serves_a_function_and_invoke_calls_it():
    with _watch() as watch:
        response = watch.invoke("floe-config", "events/get-config.json")
        assert response["statusCode"] == 200
        assert json.loads(response["body"])["overrides"]["prefix"] == "demo"

        request = urllib.request.Request(
            watch.url("floe-config", "/iceberg/v1/config?warehouse=demo"),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        config = json.loads(urllib.request.urlopen(request, timeout=60).read())
        routes = json.loads(subprocess.run([os.environ["FLOE_BIN"], "routes"], check=True,
                                           capture_output=True, text=True).stdout)
        assert len(config["endpoints"]) == len(routes)


def test_the_management_function_is_invoked_like_the_others():
    with _watch() as watch:
        response = watch.invoke("floe-management", "events/get-me.json")
        assert response["statusCode"] == 200, response
        me = json.loads(response["body"])
        assert me["principal"] == "api_client:demo-admin"
        assert me["org_roles"] == {"demo": "admin"}

        created = watch.invoke("floe-management", "events/create-team.json")
        assert created["statusCode"] == 201, created
        request = urllib.request.Request(
            watch.url("floe-management", "/api/v1/orgs/demo/teams/events_created_team"),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        team = json.loads(urllib.request.urlopen(request, timeout=60).read())
        assert team == {"name": "events_created_team", "members": []}

        # An Iceberg route is not this function's: a spec 404.
        request = urllib.request.Request(
            watch.url("floe-management", "/iceberg/v1/config?warehouse=demo"),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        try:
            urllib.request.urlopen(request, timeout=60)
            raise AssertionError("the management function answered an Iceberg route")
        except urllib.error.HTTPError as e:
            assert e.code == 404
            assert json.loads(e.read())["error"]["type"] == "NotFoundException"
