"""Profile baselines: the datasetProfile each model's upstream data is compared with.

Revision ID: 0004
Revises: 0003
Create Date: 2027-01-15
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "profile_baselines",
        # One per model and dataset, as baselines: the profile in datasetProfile's own JSON.
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("dataset", sa.Text(), nullable=False),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("captured_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model", "dataset", name=op.f("pk_profile_baselines")),
        sa.CheckConstraint(
            "source IN ('history', 'first_scan', 'accepted')",
            name=op.f("ck_profile_baselines_source"),
        ),
    )


def downgrade() -> None:
    op.drop_table("profile_baselines")
