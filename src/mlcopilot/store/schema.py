"""The state database's tables, as SQLAlchemy Core metadata (one schema for SQLite and Postgres).

This module describes the schema the newest migration in ``migrations/versions`` produces: for
queries, for ``alembic revision --autogenerate`` when the schema changes, and to create a new
database (``open_store`` creates its tables from here and stamps the newest revision; older
databases are upgraded by the migrations). ``tests/store/test_schema_at_head.py`` checks that
both ways give the same database, column order included.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
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

baseline_schemas = Table(
    "baseline_schemas",
    metadata,
    Column("digest", String(32), primary_key=True),
    Column("schema", JSON, nullable=False),
)
"""Each distinct baseline schema once, under the digest of its JSON text
(:func:`~mlcopilot.model.schema_digest`): the models sharing a dataset share its schema."""

baselines = Table(
    "baselines",
    metadata,
    Column("model", Text, nullable=False),
    Column("dataset", Text, nullable=False),
    Column("source", String(16), nullable=False),
    Column("captured_at", UTCDateTime, nullable=False),
    # Columns in the order the migrations leave them (added ones last): a new database is
    # created from this schema, an old one migrated, and the two are the same (a test checks).
    Column("schema_digest", String(32), ForeignKey("baseline_schemas.digest"), nullable=False),
    PrimaryKeyConstraint("model", "dataset"),
    CheckConstraint("source IN ('history', 'first_scan', 'accepted')", name="source"),
)

profile_baselines = Table(
    "profile_baselines",
    metadata,
    Column("model", Text, nullable=False),
    Column("dataset", Text, nullable=False),
    Column("profile", JSON, nullable=False),
    Column("source", String(16), nullable=False),
    Column("captured_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("model", "dataset"),
    CheckConstraint("source IN ('history', 'first_scan', 'accepted')", name="source"),
)
"""The ``datasetProfile`` (its own JSON) each model's upstream dataset is compared with."""

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
    Column("group_key", String(32)),
    Column("group_generation", Integer),
    # The clock of the last scan that found it; only scans set it (``Incident.seen_at``).
    Column("seen_at", UTCDateTime),
    # What a scan wrote of it beyond its identity (``content_digest``): found again as stored,
    # it is only stamped seen. Null on rows written before digests were: rewritten whole.
    Column("content_digest", BigInteger),
    PrimaryKeyConstraint("id", "generation"),
    CheckConstraint("generation >= 1", name="generation"),
    CheckConstraint("state IN ('open', 'acknowledged', 'resolved')", name="state"),
    CheckConstraint("severity IN ('critical', 'high', 'medium', 'low')", name="severity"),
    CheckConstraint("state != 'resolved' OR resolved_at IS NOT NULL", name="resolved_at"),
    CheckConstraint(
        "state != 'acknowledged' OR acknowledged_at IS NOT NULL", name="acknowledged_at"
    ),
    Index("ix_incidents_model", "model"),
    Index("ix_incidents_entity", "entity"),
    Index("ix_incidents_group_key_group_generation", "group_key", "group_generation"),
    Index(
        "uq_incidents_one_open_generation",
        "id",
        unique=True,
        sqlite_where=text(OPEN_WHERE),
        postgresql_where=text(OPEN_WHERE),
    ),
)

notify_groups = Table(
    "notify_groups",
    metadata,
    Column("key", String(32), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("check_name", String(64), nullable=False),
    Column("entity", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("opened_at", UTCDateTime, nullable=False),
    Column("notified_at", UTCDateTime, nullable=False),
    Column("resolved_at", UTCDateTime),
    Column("acknowledged_by", Text),
    Column("notified", JSON, nullable=False),
    Column("sinks", JSON, nullable=False),
    Column("updates", Integer, nullable=False),
    Column("reminders", Integer, nullable=False),
    PrimaryKeyConstraint("key", "generation"),
    CheckConstraint("generation >= 1", name="generation"),
    CheckConstraint("state IN ('open', 'acknowledged', 'resolved')", name="state"),
    Index(
        "uq_notify_groups_one_open_generation",
        "key",
        unique=True,
        sqlite_where=text(OPEN_WHERE),
        postgresql_where=text(OPEN_WHERE),
    ),
)
"""One row per notification group generation: one root cause, one issue, one Slack thread."""

OUTBOX_STATUSES = "'pending', 'sending', 'done', 'dead', 'cancelled'"

outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dedupe_key", String(512), nullable=False),
    Column("sink", String(255), nullable=False),
    Column("action", String(16), nullable=False),
    Column("group_key", String(64), nullable=False),
    Column("group_generation", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("uncertain", Boolean, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("not_before", UTCDateTime, nullable=False),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("lease_owner", Text),
    Column("lease_expires_at", UTCDateTime),
    Column("last_error", Text),
    Column("warning", Text),
    Column("delivered_at", UTCDateTime),
    Column("run_id", Integer, ForeignKey("scan_runs.id")),
    CheckConstraint(f"status IN ({OUTBOX_STATUSES})", name="status"),
    CheckConstraint("sink <> ''", name="sink"),
    Index("uq_outbox_dedupe_key", "dedupe_key", unique=True),
    Index("ix_outbox_status_sink", "status", "sink"),
    Index("ix_outbox_sink_group_key_group_generation", "sink", "group_key", "group_generation"),
)
"""The transactional outbox: every side effect a scan decided, until a relay delivered it."""

sink_refs = Table(
    "sink_refs",
    metadata,
    Column("group_key", String(64), nullable=False),
    Column("group_generation", Integer, nullable=False),
    Column("sink", String(255), nullable=False),
    Column("ref", Text, nullable=False),
    Column("url", Text),
    Column("data", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("group_key", "group_generation", "sink"),
)
"""Where each group lives in each sink: the GitHub issue number, the Slack channel and ts."""

rescan_requests = Table(
    "rescan_requests",
    metadata,
    Column("model", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("requested_at", UTCDateTime, nullable=False),
    Column("due_at", UTCDateTime, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("claimed_by", Text),
    Column("claimed_at", UTCDateTime),
    Column("lease_until", UTCDateTime),
    Column("last_error", Text),
    Column("models", JSON),
    PrimaryKeyConstraint("model"),
    CheckConstraint("attempts >= 0", name="attempts"),
    Index("ix_rescan_requests_due_at", "due_at"),
)
"""Models ``mlcopilot watch`` must scan again (``*``: all of them), one row per model; and the
batches a full rescan is split into (``model`` ``*/...``, their models in ``models``)."""
