"""When a scan last found each incident: ``incidents.seen_at``.

Two scans of one model can commit out of the order they read DataHub in (two watchers, one
scanning a full rescan's batch, the other the same model for an event). The older one must
leave alone what the fresher one decided, and for an incident the fresher one only found
again, nothing stored said when: ``updated_at`` is also set by acknowledging or resolving by
hand, at the wall-clock time. ``seen_at`` is set by scans only.

The open incidents take the clock of the scan that last wrote them (``last_run_id``: the scan
that opened or refreshed them; acknowledging by hand does not change it). Resolved ones keep
none: ``resolved_at`` already says when.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("seen_at", sa.DateTime(timezone=True), nullable=True))
    i = sa.table(
        "incidents",
        sa.column("state", sa.String),
        sa.column("last_run_id", sa.Integer),
        sa.column("seen_at", sa.DateTime(timezone=True)),
    )
    runs = sa.table(
        "scan_runs", sa.column("id", sa.Integer), sa.column("now", sa.DateTime(timezone=True))
    )
    scan_clock = sa.select(runs.c.now).where(runs.c.id == i.c.last_run_id).scalar_subquery()
    op.get_bind().execute(sa.update(i).where(i.c.state != "resolved").values(seen_at=scan_clock))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("seen_at")
