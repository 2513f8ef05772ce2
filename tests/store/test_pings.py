"""PostgreSQL connections pinged only once idle: a dropped one is replaced, at worst after one
failed operation (``mlcopilot.store.pings``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from mlcopilot.errors import StoreError
from mlcopilot.store import SqlStore, open_store, pings
from testing.postgres import fresh_schema

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store() -> Iterator[tuple[str, SqlStore]]:
    with fresh_schema() as url, open_store(url) as store:
        yield url, store


def _drop_the_stores_connection(url: str, store: SqlStore) -> None:
    """The server ends the store's pooled connection, as a restart or an admin would."""
    with store._engine.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
    admin = create_engine(url)
    try:
        with admin.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
    finally:
        admin.dispose()


def test_a_connection_dropped_while_idle_is_pinged_and_replaced_unnoticed(
    pg_store: tuple[str, SqlStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store = pg_store
    assert store.incidents() == []
    _drop_the_stores_connection(url, store)
    monkeypatch.setattr(pings, "PING_AFTER_S", 0.0)  # idle long enough to be pinged
    assert store.incidents() == []


def test_a_connection_dropped_right_after_use_fails_one_operation_then_is_replaced(
    pg_store: tuple[str, SqlStore],
) -> None:
    url, store = pg_store
    assert store.incidents() == []
    _drop_the_stores_connection(url, store)
    with pytest.raises(StoreError) as caught:  # trusted without a ping: this one fails
        store.incidents()
    assert "\n" not in str(caught.value)
    assert store.incidents() == []  # the pool replaced its connections
