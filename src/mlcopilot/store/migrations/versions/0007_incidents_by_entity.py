"""Incidents found by entity: an index on ``incidents.entity``.

What other models hold open on a scan's entities (the tags it plans) is read by entity, 500
a statement; without the index each statement read every incident (a scan of the estate of
10,000 models over 100,000 datasets: 200 statements, each reading all 282,022 incidents).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_incidents_entity", "incidents", ["entity"])


def downgrade() -> None:
    op.drop_index("ix_incidents_entity", table_name="incidents")
