"""Rescan requests: the models `mlcopilot watch` must scan again, one row per model.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "rescan_requests",
        # One row per model (coalesced): a second request before the scan just bumps it.
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        _ts("requested_at"),
        _ts("due_at"),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_by", sa.Text(), nullable=True),
        _ts("claimed_at", nullable=True),
        _ts("lease_until", nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("model", name=op.f("pk_rescan_requests")),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_rescan_requests_attempts")),
    )
    op.create_index("ix_rescan_requests_due_at", "rescan_requests", ["due_at"])


def downgrade() -> None:
    op.drop_index("ix_rescan_requests_due_at", table_name="rescan_requests")
    op.drop_table("rescan_requests")
