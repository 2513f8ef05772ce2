"""PostgreSQL connections pinged before use only when they have been idle.

SQLAlchemy's ``pool_pre_ping`` sends ``SELECT 1`` at every checkout: a round trip per
transaction. For the relay, which commits once per message sent, that was 14% of a row's time
(``benchmarks/relay.py``). A connection used within the last :data:`PING_AFTER_S` seconds is
trusted instead; one idle longer (the server may have restarted, a firewall may have dropped
it) is pinged as before, and replaced if the ping fails. The cost of trusting: a connection the
server dropped within those seconds fails the one operation that uses it, and SQLAlchemy then
replaces every pooled connection (it invalidates the pool on a disconnect), so the next one
works.

This is SQLAlchemy's documented "pessimistic" disconnect handling done in a ``checkout``
event, with the ping the dialect itself uses.
"""

from __future__ import annotations

import time
from typing import Any, Final

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

PING_AFTER_S: Final = 5.0
"""A pooled connection idle at least this long is pinged before it is used."""
_LAST_USED: Final = "mlcopilot_last_used"


def ping_when_idle(engine: Engine) -> Engine:
    """Ping ``engine``'s connections at checkout once idle :data:`PING_AFTER_S` (not always)."""
    dialect = engine.dialect

    def checkout(
        dbapi_connection: Any, entry: ConnectionPoolEntry, _proxy: PoolProxiedConnection
    ) -> None:
        last = entry.info.get(_LAST_USED)
        if last is not None and time.monotonic() - last < PING_AFTER_S:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as exc:  # the pool replaces the connection and checks out again
            raise DisconnectionError(f"the pooled connection is gone: {exc}") from exc

    event.listen(engine, "connect", _used)
    event.listen(engine, "checkin", _used)
    event.listen(engine, "checkout", checkout)
    return engine


def _used(_dbapi_connection: Any, entry: ConnectionPoolEntry) -> None:
    entry.info[_LAST_USED] = time.monotonic()
