"""Fixtures for the state-store contract suite: one store per test, on SQLite and PostgreSQL.

SQLite always runs (a file in ``tmp_path``). PostgreSQL runs against the server on
127.0.0.1:5432 (trust auth, database ``test``), or the URL in ``MLCOPILOT_TEST_POSTGRES_URL``;
each test gets a fresh schema of its own, dropped afterwards, so runs never see each other.
When the server does not answer, the PostgreSQL cases skip with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import cache

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from mlcopilot.store import SqlStore, open_store

PG_ADDRESS = "127.0.0.1:5432"
PG_CANDIDATES = (
    f"postgresql+psycopg://postgres@{PG_ADDRESS}/test",
    f"postgresql+psycopg://root@{PG_ADDRESS}/test",
)


@cache
def _postgres() -> tuple[str | None, str]:
    """The first PostgreSQL admin URL that answers, or None and why none did."""
    configured = os.environ.get("MLCOPILOT_TEST_POSTGRES_URL")
    candidates = (configured,) if configured else PG_CANDIDATES
    errors = []
    for url in candidates:
        engine = create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return url, ""
        except SQLAlchemyError as exc:
            errors.append(str(getattr(exc, "orig", exc)).strip().splitlines()[0])
        finally:
            engine.dispose()
    return None, "; ".join(errors)


def _with_search_path(url: str, schema: str) -> str:
    parsed = make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    return parsed.render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A URL for an empty state database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('state') / 'state.db'}"
        return
    admin_url, why = _postgres()
    if admin_url is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_ADDRESS}: {why}")
    schema = f"mlc_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield _with_search_path(admin_url, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


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
