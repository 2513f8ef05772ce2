"""Taking a state database to a given store migration, for tests of the upgrades themselves."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine


def migrate(url: str, revision: str, *, down: bool = False) -> None:
    """Upgrade (or with ``down``, downgrade) the database at ``url`` to ``revision``."""
    engine = create_engine(url)
    try:
        with resources.as_file(resources.files("mlcopilot.store") / "migrations") as location:
            cfg = Config()
            cfg.set_main_option("script_location", str(location))
            with engine.begin() as conn:
                cfg.attributes["connection"] = conn
                (command.downgrade if down else command.upgrade)(cfg, revision)
    finally:
        engine.dispose()
