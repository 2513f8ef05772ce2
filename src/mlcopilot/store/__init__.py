"""Where baselines, scan runs and incidents live between scans: SQLite or PostgreSQL.

Use :func:`open_store` with a SQLAlchemy URL (:func:`default_state_url` gives the local SQLite
file); the schema is created or upgraded by the package's Alembic migrations on open. Only
commands that record a scan create a database (``create=True``); a missing one is
:class:`MissingStore` otherwise, and a file that is not already mlcopilot's is refused.
"""

from mlcopilot.errors import MissingStore, StoreConflict
from mlcopilot.store.sql import SqlStore, default_state_url, open_store

__all__ = ["MissingStore", "SqlStore", "StoreConflict", "default_state_url", "open_store"]
