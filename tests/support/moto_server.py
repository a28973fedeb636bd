"""moto's server, applying one request at a time.

DynamoDB applies each conditional write atomically: of two writes conditioned on the same state,
one fails. moto checks a condition and then writes without a lock, and its TransactWriteItems
deep-copies every table first for rollback, so under concurrent requests two conditional writes
can both succeed and one update is lost. Floe's tests race real concurrent writers against the
store, so they need the atomicity DynamoDB gives: this launcher serves moto's own application
with a lock around each request (connections are still accepted concurrently, so keep-alive
clients never block one another).

Usage: python moto_server.py HOST PORT
"""

import os
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()

    def serial(environ, start_response):
        with one_at_a_time:
            # The whole body is produced under the lock: moto may build it lazily.
            return list(app(environ, start_response))

    run_simple(host, port, serial, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
