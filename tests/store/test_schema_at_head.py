"""A new state database is created at the newest schema at once, as the migrations build it.

``open_store`` creates a new database's tables from :mod:`mlcopilot.store.schema` and stamps
it with the newest revision (Alembic's recipe for a database built from scratch) instead of
running every migration in turn. That is only sound if the two are the same database, so
here one database is built each way, on SQLite and on PostgreSQL, and everything the engine
says about them is compared: the tables, their columns in order with types, nullability and
defaults, primary and foreign keys, indexes (partial ones' conditions included), unique and
check constraints, and the revision stamped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, inspect, text

from mlcopilot.store import open_store
from testing.migrations import migrate
from testing.postgres import fresh_schema


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def two_urls(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """Two empty databases of one engine."""
    if request.param == "sqlite":
        folder = tmp_path_factory.mktemp("state")
        yield f"sqlite:///{folder / 'migrated.db'}", f"sqlite:///{folder / 'created.db'}"
        return
    with fresh_schema("mlc_migrated") as migrated, fresh_schema("mlc_created") as created:
        yield migrated, created


def _plain(value: Any) -> Any:
    """``value`` with its SQL text's spacing and quoting made comparable across the two."""
    if isinstance(value, str):
        return re.sub(r"\s+", " ", value.replace('"', "")).strip()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items()) if v not in (None, {}, [])}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value) if value is not None and not isinstance(value, bool | int) else value


def _by_name(items: Any) -> list[Any]:
    return sorted((_plain(dict(item)) for item in items), key=lambda item: str(item.get("name")))


def described(engine: Engine) -> dict[str, Any]:
    """Everything the engine's catalog says about the state database's tables."""
    found = inspect(engine)
    tables: dict[str, Any] = {}
    for table in sorted(found.get_table_names()):
        tables[table] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], _plain(c.get("default")))
                for c in found.get_columns(table)
            ],
            "primary key": _plain(found.get_pk_constraint(table)),
            "foreign keys": _by_name(found.get_foreign_keys(table)),
            "indexes": _by_name(found.get_indexes(table)),
            "unique": _by_name(found.get_unique_constraints(table)),
            "checks": _by_name(found.get_check_constraints(table)),
        }
    with engine.connect() as conn:
        tables["alembic_version rows"] = conn.execute(
            text("SELECT version_num FROM alembic_version")
        ).all()
    return tables


def test_a_new_database_is_what_the_migrations_build(two_urls: tuple[str, str]) -> None:
    migrated_url, created_url = two_urls
    migrate(migrated_url, "head")  # every migration in turn, as an old database gets them
    open_store(created_url).close()  # a new database, as every first scan makes it
    engines = [create_engine(url) for url in two_urls]
    try:
        migrated, created = (described(engine) for engine in engines)
    finally:
        for engine in engines:
            engine.dispose()
    assert len(migrated) > 9  # the state's tables and Alembic's, not an empty comparison
    assert migrated["incidents"]["checks"], "no check constraint read: the comparison is blind"
    assert any(ix.get("dialect_options") for ix in migrated["incidents"]["indexes"]), (
        "no partial index read: the comparison is blind to their conditions"
    )
    for table in migrated.keys() | created.keys():
        assert created.get(table) == migrated.get(table), table


def test_a_new_database_takes_every_later_migration_down_and_up(
    two_urls: tuple[str, str],
) -> None:
    """The migrations' downgrades find in a created database the names they expect."""
    _, created_url = two_urls
    open_store(created_url).close()
    migrate(created_url, "base", down=True)
    engine = create_engine(created_url)
    try:
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    migrate(created_url, "head")
    with open_store(created_url) as store:
        assert store.incidents() == []
