"""Where baselines, scan runs and incidents live between scans: SQLite or PostgreSQL.

Use :func:`open_store` with a SQLAlchemy URL (:func:`default_state_url` gives the local SQLite
file); the schema is created or upgraded by the package's Alembic migrations on open.
"""

from mlcopilot.store.sql import SqlStore, StoreConflict, default_state_url, open_store

__all__ = ["SqlStore", "StoreConflict", "default_state_url", "open_store"]
