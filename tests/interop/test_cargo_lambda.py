"""Local invocation of the Lambda functions with cargo-lambda (pinned from PyPI), as README shows:
`cargo lambda watch` serves a function, `cargo lambda invoke --data-file events/...` calls it."""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
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


def test_watch_serves_a_function_and_invoke_calls_it():
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
        deadline = time.time() + 300
        while True:
            invoked = subprocess.run(
                ["cargo", "lambda", "invoke", "floe-config", "--data-file", "events/get-config.json",
                 "-A", "127.0.0.1", "-P", str(port)],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
            )
            if invoked.returncode == 0 or time.time() > deadline or watch.poll() is not None:
                break
            time.sleep(1)
        assert invoked.returncode == 0, invoked.stderr + open(log.name).read()
        response = json.loads(invoked.stdout)
        assert response["statusCode"] == 200
        assert json.loads(response["body"])["overrides"]["prefix"] == "demo"

        # The function-URL front turns plain HTTP into API Gateway v2 events.
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/lambda-url/floe-config/iceberg/v1/config?warehouse=demo",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        config = json.loads(urllib.request.urlopen(request, timeout=60).read())
        assert len(config["endpoints"]) == 17
    finally:
        os.killpg(watch.pid, signal.SIGTERM)
        try:
            watch.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(watch.pid, signal.SIGKILL)
        log.close()
