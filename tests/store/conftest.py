"""Fixtures for the state-store contract suite: one store per test, on SQLite and PostgreSQL.

SQLite always runs (a file in ``tmp_path``). PostgreSQL runs against the server on
127.0.0.1:5432 (trust auth, database ``test``), or the URL in ``MLCOPILOT_TEST_POSTGRES_URL``;
each test gets a fresh schema of its own, dropped afterwards, so runs never see each other.
When the server does not answer, the PostgreSQL cases skip with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine

from mlcopilot.store import SqlStore, open_store
from testing.postgres import fresh_schema


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A URL for an empty state database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('state') / 'state.db'}"
        return
    with fresh_schema() as url:
        yield url


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    """An open store on an empty database."""
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def raw(store_url: str) -> Iterator[Engine]:
    """A plain SQLAlchemy engine on the same database, to look behind the store's back."""
    engine = create_engine(store_url)
    try:
        yield engine
    finally:
        engine.dispose()
