"""moto's server, applying one request at a time, with a transaction rollback that costs what
the transaction touches.

DynamoDB applies each conditional write atomically: of two writes conditioned on the same state,
one fails. moto checks a condition and then writes without a lock, so under concurrent requests
two conditional writes can both succeed and one update is lost. Floe's tests race real
concurrent writers against the store, so they need the atomicity DynamoDB gives: this launcher
serves moto's own application with a lock around each request (connections are still accepted
concurrently, so keep-alive clients never block one another).

moto's TransactWriteItems backs up for rollback by deep-copying the whole table once per item of
the transaction: a 100-item transaction on a table of 50,000 items copies five million items,
takes minutes and leaves gigabytes of garbage cycles behind, until the process is killed for
memory. Under the lock nothing else runs during a transaction, so a copy of just the items it
touches is as good a backup: `install_item_rollback` puts that in place of moto's.

Usage: python moto_server.py HOST PORT
"""

import copy
import os
import sys
import threading
from typing import Any


def install_item_rollback() -> None:
    """Makes TransactWriteItems back up and restore only the items it names. Safe only where
    requests are applied one at a time (see `main`); idempotent."""
    from moto.dynamodb import models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "floe_item_rollback", False):
        return
    transact = backend.transact_write_items

    class _TablesUncopied:
        """The `copy` module as moto's transaction sees it: a table is its own backup."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def touched(tables: dict, transact_items: list) -> list:
        """(table, hash key, range key, copy of the item or None) for each well-formed key."""
        saved = []
        for entry in transact_items:
            op = next(iter(entry.values()), None) if isinstance(entry, dict) else None
            table = tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            attrs = op.get("Key") or op.get("Item") or {}
            try:
                hash_key = DynamoType(attrs[table.hash_key_attr])
                range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
                current = table.get_item(hash_key, range_key)
            except Exception:  # noqa: BLE001 moto refuses the malformed key itself, before writing it
                continue
            saved.append((table, hash_key, range_key, copy.deepcopy(current)))
        return saved

    def restore(saved: list) -> None:
        # Reversed, so that where a key repeats (moto then refuses the transaction), the state
        # from before the transaction is the one left.
        for table, hash_key, range_key, item in reversed(saved):
            if range_key is None:
                if item is None:
                    table.items.pop(hash_key, None)
                else:
                    table.items[hash_key] = item
            elif item is None:
                table.items.get(hash_key, {}).pop(range_key, None)
            else:
                table.items[hash_key][range_key] = item

    def transact_write_items(self, transact_items):
        saved = touched(self.tables, transact_items)
        models.copy = _TablesUncopied
        try:
            return transact(self, transact_items)
        except BaseException:
            restore(saved)
            raise
        finally:
            models.copy = copy

    transact_write_items.floe_item_rollback = True
    backend.transact_write_items = transact_write_items


def serial_app():
    """moto's application, applying one request at a time."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()

    def serial(environ, start_response):
        with one_at_a_time:
            # The whole body is produced under the lock: moto may build it lazily.
            return list(app(environ, start_response))

    return serial


def main() -> None:
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import run_simple

    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    install_item_rollback()
    run_simple(host, port, serial_app(), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
