"""Alembic environment for the mlcopilot state database.

mlcopilot runs the migrations itself when it opens a store (``mlcopilot.store.open_store``),
handing over an open connection in ``config.attributes["connection"]``; there is no
alembic.ini. For development (``alembic revision --autogenerate``), a ``sqlalchemy.url`` main
option is used instead.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from mlcopilot.store.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    if context.is_offline_mode():
        raise RuntimeError("mlcopilot migrations run online only (against a connection)")
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("run mlcopilot migrations through mlcopilot.store.open_store")
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


_main()
