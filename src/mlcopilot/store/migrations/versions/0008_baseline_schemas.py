"""Baseline schemas stored once: ``baseline_schemas`` by digest, ``baselines.schema_digest``.

The models sharing a dataset store the same schema for it: the estate of 10,000 models over
100,000 datasets kept 1.45 million copies of at most 100,000 schemas (1.4 GB of JSON written
by a first scan, all fetched back by the next). Each distinct schema text is now kept once,
under its digest (``mlcopilot.model.schema_digest``, computed here on the text as stored),
and a baseline names it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PAGE = 5_000
"""Baselines moved a statement: the rows are read a page at a time, in key order."""


def _digest(text: str) -> str:
    # Frozen here as it was at this revision: mlcopilot.model.schema_digest may change later.
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def upgrade() -> None:
    op.create_table(
        "baseline_schemas",
        sa.Column("digest", sa.String(32), nullable=False),
        sa.Column("schema", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_baseline_schemas")),
    )
    with op.batch_alter_table("baselines") as batch:
        batch.add_column(sa.Column("schema_digest", sa.String(32), nullable=True))
    _move_schemas(op.get_bind())
    with op.batch_alter_table("baselines") as batch:
        batch.alter_column("schema_digest", existing_type=sa.String(32), nullable=False)
        batch.create_foreign_key(
            op.f("fk_baselines_schema_digest_baseline_schemas"),
            "baseline_schemas",
            ["schema_digest"],
            ["digest"],
        )
        batch.drop_column("schema")


def _move_schemas(conn: sa.Connection) -> None:
    """Store each baseline's schema text once and name its digest, a page of rows at a time."""
    b = sa.table(
        "baselines",
        sa.column("model", sa.Text),
        sa.column("dataset", sa.Text),
        sa.column("schema", sa.JSON),
        sa.column("schema_digest", sa.String),
    )
    s = sa.table("baseline_schemas", sa.column("digest", sa.String), sa.column("schema", sa.JSON))
    text = sa.bindparam("text", type_=sa.Text)
    insert_schema = sa.insert(s).values(
        digest=sa.bindparam("digest"),
        schema=sa.cast(text, sa.JSON) if conn.dialect.name == "postgresql" else text,
    )
    name_digest = (
        sa.update(b)
        .where(b.c.model == sa.bindparam("m"), b.c.dataset == sa.bindparam("d"))
        .values(schema_digest=sa.bindparam("digest"))
    )
    page = (
        sa.select(b.c.model, b.c.dataset, sa.cast(b.c.schema, sa.Text))
        .order_by(b.c.model, b.c.dataset)
        .limit(_PAGE)
    )
    seen: set[str] = set()
    after: tuple[str, str] | None = None
    while True:
        query = page
        if after is not None:
            query = page.where(sa.tuple_(b.c.model, b.c.dataset) > sa.tuple_(*after))
        rows = conn.execute(query).all()
        if not rows:
            return
        new: list[dict[str, str]] = []
        named: list[dict[str, str]] = []
        for model, dataset, stored in rows:
            digest = _digest(stored)
            if digest not in seen:
                seen.add(digest)
                new.append({"digest": digest, "text": stored})
            named.append({"m": model, "d": dataset, "digest": digest})
        if new:
            conn.execute(insert_schema, new)
        conn.execute(name_digest, named)
        after = (rows[-1][0], rows[-1][1])


def downgrade() -> None:
    with op.batch_alter_table("baselines") as batch:
        batch.add_column(sa.Column("schema", sa.JSON(), nullable=True))
    b = sa.table("baselines", sa.column("schema", sa.JSON), sa.column("schema_digest", sa.String))
    s = sa.table("baseline_schemas", sa.column("digest", sa.String), sa.column("schema", sa.JSON))
    stored = sa.select(s.c.schema).where(s.c.digest == b.c.schema_digest).scalar_subquery()
    op.get_bind().execute(sa.update(b).values(schema=stored))
    with op.batch_alter_table("baselines") as batch:
        batch.alter_column("schema", existing_type=sa.JSON(), nullable=False)
        batch.drop_constraint(
            op.f("fk_baselines_schema_digest_baseline_schemas"), type_="foreignkey"
        )
        batch.drop_column("schema_digest")
    op.drop_table("baseline_schemas")
