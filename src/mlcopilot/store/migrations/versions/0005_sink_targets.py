"""Sink targets: a row's sink names where it goes (``slack:C0PAYMENTS``), and any plugin.

The ``sink`` of an outbox row and of a sink reference was one of three names; it is now a
target: the sink's name, or its name and a destination chosen by routing (a channel, a
repository). Sinks are plugins, so the column no longer lists the names it may hold.

Revision ID: 0005
Revises: 0004
Create Date: 2027-02-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WIDE = 255
_OLD = "sink IN ('datahub', 'github', 'slack')"


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint(op.f("ck_outbox_sink"), type_="check")
        batch.alter_column("sink", type_=sa.String(_WIDE), existing_type=sa.String(16))
        batch.alter_column("dedupe_key", type_=sa.String(512), existing_type=sa.String(200))
        batch.create_check_constraint(op.f("ck_outbox_sink"), "sink <> ''")
    with op.batch_alter_table("sink_refs") as batch:
        batch.alter_column("sink", type_=sa.String(_WIDE), existing_type=sa.String(16))


def downgrade() -> None:
    with op.batch_alter_table("sink_refs") as batch:
        batch.alter_column("sink", type_=sa.String(16), existing_type=sa.String(_WIDE))
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint(op.f("ck_outbox_sink"), type_="check")
        batch.alter_column("dedupe_key", type_=sa.String(200), existing_type=sa.String(512))
        batch.alter_column("sink", type_=sa.String(16), existing_type=sa.String(_WIDE))
        batch.create_check_constraint(op.f("ck_outbox_sink"), _OLD)
