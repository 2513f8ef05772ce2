"""Rescan batches: a full rescan split into requests of a few models each, shared by watchers.

A row of ``rescan_requests`` whose ``model`` starts with ``*/`` is one batch of a full rescan,
its models in the new ``models`` column (NULL for every other row): claimed, renewed,
completed and retried under a lease like a model's request, by any watcher or
``mlcopilot scan --shared`` on the database.

Revision ID: 0006
Revises: 0005
Create Date: 2027-02-15
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("rescan_requests") as batch:
        batch.add_column(sa.Column("models", sa.JSON(), nullable=True))


def downgrade() -> None:
    # A batch without its models means nothing: its models are scanned at the next full rescan.
    op.execute("DELETE FROM rescan_requests WHERE models IS NOT NULL")
    with op.batch_alter_table("rescan_requests") as batch:
        batch.drop_column("models")
