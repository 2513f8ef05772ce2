"""A fresh schema on the PostgreSQL server for each test that needs one, dropped afterwards.

The server is the one on 127.0.0.1:5432 (trust auth, database ``test``), or the URL in
``MLCOPILOT_TEST_POSTGRES_URL``. Each test gets a schema of its own (the URL's
``search_path`` points at it), so runs never see each other. When the server does not
answer, the test skips with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

PG_ADDRESS = "127.0.0.1:5432"
PG_CANDIDATES = (
    f"postgresql+psycopg://postgres@{PG_ADDRESS}/test",
    f"postgresql+psycopg://root@{PG_ADDRESS}/test",
)


@cache
def admin_url() -> tuple[str | None, str]:
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


def with_search_path(url: str, schema: str) -> str:
    """``url`` with its connections' ``search_path`` set to ``schema``."""
    parsed = make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    return parsed.render_as_string(hide_password=False)


@contextmanager
def fresh_schema(prefix: str = "mlc") -> Iterator[str]:
    """A URL on a new, empty schema (skips the test when the server does not answer)."""
    url, why = admin_url()
    if url is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_ADDRESS}: {why}")
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield with_search_path(url, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
