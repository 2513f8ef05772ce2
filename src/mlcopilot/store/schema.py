"""The state database's tables, as SQLAlchemy Core metadata (one schema for SQLite and Postgres).

The tables are created and changed only by the Alembic migrations in ``migrations/versions``;
this module describes the schema the newest migration produces, for queries (and for
``alembic revision --autogenerate`` when the schema changes). A test checks the two agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names, so that migrations can name what they alter on every engine."""

OPEN_WHERE = "state != 'resolved'"
"""The rows the one-open-generation-per-id unique index covers."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp, stored as UTC and always read back as an aware UTC datetime.

    PostgreSQL stores ``timestamp with time zone``; SQLite has no such type, so the UTC wall
    time is stored as text and UTC is attached again on the way out. Naive datetimes are
    refused: they would be read back as a different instant on another machine.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Check ``value`` is aware and convert it to UTC (naive UTC for SQLite)."""
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()}: the store needs aware ones")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Return the stored instant as an aware UTC datetime."""
        if value is None:
            return None
        if not isinstance(value, datetime):  # pragma: no cover - the drivers return datetimes
            raise TypeError(f"expected a datetime from the database, got {value!r}")
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


metadata = MetaData(naming_convention=NAMING)

baselines = Table(
    "baselines",
    metadata,
    Column("model", Text, nullable=False),
    Column("dataset", Text, nullable=False),
    Column("schema", JSON, nullable=False),
    Column("source", String(16), nullable=False),
    Column("captured_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("model", "dataset"),
    CheckConstraint("source IN ('history', 'first_scan', 'accepted')", name="source"),
)

scan_runs = Table(
    "scan_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=False),
    Column("now", UTCDateTime, nullable=False),
    Column("catalog", Text, nullable=False),
    Column("models", JSON, nullable=False),
    Column("findings", Integer, nullable=False),
    Column("opened", Integer, nullable=False),
    Column("updated", Integer, nullable=False),
    Column("resolved", Integer, nullable=False),
)

incidents = Table(
    "incidents",
    metadata,
    Column("id", String(64), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("check_name", String(64), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("model", Text, nullable=False),
    Column("entity", Text, nullable=False),
    Column("field", Text),
    Column("change", String(32)),
    Column("previous_field", Text),
    Column("message", Text, nullable=False),
    Column("path", JSON, nullable=False),
    Column("evidence", JSON, nullable=False),
    Column("opened_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("resolved_at", UTCDateTime),
    Column("acknowledged_at", UTCDateTime),
    Column("acknowledged_by", Text),
    Column("resolution", Text),
    Column("last_run_id", Integer, ForeignKey("scan_runs.id")),
    PrimaryKeyConstraint("id", "generation"),
    CheckConstraint("generation >= 1", name="generation"),
    CheckConstraint("state IN ('open', 'acknowledged', 'resolved')", name="state"),
    CheckConstraint("severity IN ('critical', 'high', 'medium', 'low')", name="severity"),
    CheckConstraint("state != 'resolved' OR resolved_at IS NOT NULL", name="resolved_at"),
    CheckConstraint(
        "state != 'acknowledged' OR acknowledged_at IS NOT NULL", name="acknowledged_at"
    ),
    Index("ix_incidents_model", "model"),
    Index(
        "uq_incidents_one_open_generation",
        "id",
        unique=True,
        sqlite_where=text(OPEN_WHERE),
        postgresql_where=text(OPEN_WHERE),
    ),
)
