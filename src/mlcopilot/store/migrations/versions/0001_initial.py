"""Initial schema: baselines, scan runs and incidents.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN_WHERE = sa.text("state != 'resolved'")


def _ts(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "baselines",
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("dataset", sa.Text(), nullable=False),
        sa.Column("schema", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        _ts("captured_at"),
        sa.PrimaryKeyConstraint("model", "dataset", name="pk_baselines"),
        sa.CheckConstraint(
            "source IN ('history', 'first_scan', 'accepted')", name=op.f("ck_baselines_source")
        ),
    )
    op.create_table(
        "scan_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        _ts("started_at"),
        _ts("finished_at"),
        _ts("now"),
        sa.Column("catalog", sa.Text(), nullable=False),
        sa.Column("models", sa.JSON(), nullable=False),
        sa.Column("findings", sa.Integer(), nullable=False),
        sa.Column("opened", sa.Integer(), nullable=False),
        sa.Column("updated", sa.Integer(), nullable=False),
        sa.Column("resolved", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_scan_runs"),
    )
    op.create_table(
        "incidents",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("check_name", sa.String(64), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("entity", sa.Text(), nullable=False),
        sa.Column("field", sa.Text(), nullable=True),
        sa.Column("change", sa.String(32), nullable=True),
        sa.Column("previous_field", sa.Text(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("path", sa.JSON(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        _ts("opened_at"),
        _ts("updated_at"),
        _ts("resolved_at", nullable=True),
        _ts("acknowledged_at", nullable=True),
        sa.Column("acknowledged_by", sa.Text(), nullable=True),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.Column("last_run_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", "generation", name="pk_incidents"),
        sa.ForeignKeyConstraint(
            ["last_run_id"], ["scan_runs.id"], name="fk_incidents_last_run_id_scan_runs"
        ),
        sa.CheckConstraint("generation >= 1", name=op.f("ck_incidents_generation")),
        sa.CheckConstraint(
            "state IN ('open', 'acknowledged', 'resolved')", name=op.f("ck_incidents_state")
        ),
        sa.CheckConstraint(
            "severity IN ('critical', 'high', 'medium', 'low')", name=op.f("ck_incidents_severity")
        ),
        sa.CheckConstraint(
            "state != 'resolved' OR resolved_at IS NOT NULL", name=op.f("ck_incidents_resolved_at")
        ),
        sa.CheckConstraint(
            "state != 'acknowledged' OR acknowledged_at IS NOT NULL",
            name=op.f("ck_incidents_acknowledged_at"),
        ),
    )
    op.create_index("ix_incidents_model", "incidents", ["model"])
    # At most one generation of an incident is open (or acknowledged) at a time, enforced by
    # the database itself: two scans racing to open the same incident cannot both succeed.
    op.create_index(
        "uq_incidents_one_open_generation",
        "incidents",
        ["id"],
        unique=True,
        sqlite_where=OPEN_WHERE,
        postgresql_where=OPEN_WHERE,
    )


def downgrade() -> None:
    op.drop_index("uq_incidents_one_open_generation", table_name="incidents")
    op.drop_index("ix_incidents_model", table_name="incidents")
    op.drop_table("incidents")
    op.drop_table("scan_runs")
    op.drop_table("baselines")
