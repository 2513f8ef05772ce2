"""What a scan wrote of each incident, as a digest: ``incidents.content_digest``.

A full rescan finds nearly every open incident again, and nearly always as it is stored. Each
such refresh rewrote the row's severity, message, path and evidence (the JSON encoded again):
a fifth of a rescan batch's time in the watcher. With the digest stored, a scan that finds an
incident as stored only stamps it seen, one statement for many (a rescan's PostgreSQL CPU fell
by about a quarter).

Rows written before stay null: their next refresh rewrites them whole and stores the digest.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("content_digest", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("content_digest")
