"""Notifications: groups, the transactional outbox and sink references.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-01
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN_WHERE = sa.text("state != 'resolved'")


def _ts(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.add_column("incidents", sa.Column("group_key", sa.String(32), nullable=True))
    op.add_column("incidents", sa.Column("group_generation", sa.Integer(), nullable=True))
    op.create_index(
        "ix_incidents_group_key_group_generation", "incidents", ["group_key", "group_generation"]
    )
    op.create_table(
        "notify_groups",
        sa.Column("key", sa.String(32), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("check_name", sa.String(64), nullable=False),
        sa.Column("entity", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        _ts("opened_at"),
        _ts("notified_at"),
        _ts("resolved_at", nullable=True),
        sa.Column("acknowledged_by", sa.Text(), nullable=True),
        sa.Column("notified", sa.JSON(), nullable=False),
        sa.Column("sinks", sa.JSON(), nullable=False),
        sa.Column("updates", sa.Integer(), nullable=False),
        sa.Column("reminders", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "generation", name="pk_notify_groups"),
        sa.CheckConstraint("generation >= 1", name=op.f("ck_notify_groups_generation")),
        sa.CheckConstraint(
            "state IN ('open', 'acknowledged', 'resolved')", name=op.f("ck_notify_groups_state")
        ),
    )
    # One open generation per group, enforced by the database: two scanners racing to open
    # the same group (and so to notify about it) cannot both succeed.
    op.create_index(
        "uq_notify_groups_one_open_generation",
        "notify_groups",
        ["key"],
        unique=True,
        sqlite_where=OPEN_WHERE,
        postgresql_where=OPEN_WHERE,
    )
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dedupe_key", sa.String(200), nullable=False),
        sa.Column("sink", sa.String(16), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("group_key", sa.String(64), nullable=False),
        sa.Column("group_generation", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("uncertain", sa.Boolean(), nullable=False),
        _ts("created_at"),
        _ts("not_before"),
        _ts("next_attempt_at"),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        _ts("lease_expires_at", nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("warning", sa.Text(), nullable=True),
        _ts("delivered_at", nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_outbox"),
        sa.ForeignKeyConstraint(["run_id"], ["scan_runs.id"], name="fk_outbox_run_id_scan_runs"),
        sa.CheckConstraint(
            "status IN ('pending', 'sending', 'done', 'dead', 'cancelled')",
            name=op.f("ck_outbox_status"),
        ),
        sa.CheckConstraint("sink IN ('datahub', 'github', 'slack')", name=op.f("ck_outbox_sink")),
    )
    # The same notification decided twice (two scanners, a replay) is stored once.
    op.create_index("uq_outbox_dedupe_key", "outbox", ["dedupe_key"], unique=True)
    op.create_index("ix_outbox_status_sink", "outbox", ["status", "sink"])
    op.create_index(
        "ix_outbox_sink_group_key_group_generation",
        "outbox",
        ["sink", "group_key", "group_generation"],
    )
    op.create_table(
        "sink_refs",
        sa.Column("group_key", sa.String(64), nullable=False),
        sa.Column("group_generation", sa.Integer(), nullable=False),
        sa.Column("sink", sa.String(16), nullable=False),
        sa.Column("ref", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("group_key", "group_generation", "sink", name="pk_sink_refs"),
    )


def downgrade() -> None:
    op.drop_table("sink_refs")
    op.drop_index("ix_outbox_sink_group_key_group_generation", table_name="outbox")
    op.drop_index("ix_outbox_status_sink", table_name="outbox")
    op.drop_index("uq_outbox_dedupe_key", table_name="outbox")
    op.drop_table("outbox")
    op.drop_index("uq_notify_groups_one_open_generation", table_name="notify_groups")
    op.drop_table("notify_groups")
    op.drop_index("ix_incidents_group_key_group_generation", table_name="incidents")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("group_generation")
        batch.drop_column("group_key")
