"""Profile baselines in SQL: per model and dataset, the ``datasetProfile`` it was trained on.

Profile drift compares each input's newest profile with this one; ``mlcopilot baseline
accept`` replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Row, select
from sqlalchemy.dialects import postgresql, sqlite

from mlcopilot.errors import StoreError
from mlcopilot.model import ProfileBaseline, Urn, profile_from_json, profile_to_json
from mlcopilot.store import schema as t
from mlcopilot.store.chunks import chunks
from mlcopilot.store.rows import require_aware


def read_profile_baselines(
    conn: Connection, models: Sequence[Urn]
) -> dict[Urn, list[ProfileBaseline]]:
    """Every stored profile baseline of each of ``models`` (every one a key), by dataset."""
    p = t.profile_baselines
    found: dict[Urn, list[ProfileBaseline]] = {model: [] for model in models}
    for chunk in chunks(list(found)):
        query = select(p).where(p.c.model.in_(chunk)).order_by(p.c.model, p.c.dataset)
        for row in conn.execute(query):
            found[row.model].append(_profile_baseline_from(row))
    return found


def _profile_baseline_from(row: Row[Any]) -> ProfileBaseline:
    m = row._mapping
    raw = m["profile"]
    profile = profile_from_json(raw) if isinstance(raw, Mapping) else None
    if profile is None:
        raise StoreError(
            f"the stored profile baseline of {m['dataset']} for {m['model']} is unreadable "
            "(no timestampMillis); accept a new one with `mlcopilot baseline accept`"
        )
    return ProfileBaseline(
        model=m["model"],
        dataset=m["dataset"],
        profile=profile,
        source=m["source"],
        captured_at=m["captured_at"],
    )


def upsert_profile_baselines(conn: Connection, baselines: Sequence[ProfileBaseline]) -> None:
    """Insert or replace ``baselines``, one per model and dataset (the last one wins)."""
    rows: dict[tuple[Urn, Urn], dict[str, Any]] = {}
    for b in baselines:
        require_aware("captured_at", b.captured_at)
        rows[(b.model, b.dataset)] = {
            "model": b.model,
            "dataset": b.dataset,
            "profile": profile_to_json(b.profile),
            "source": b.source,
            "captured_at": b.captured_at,
        }
    if not rows:
        return
    table = t.profile_baselines
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table)
    stmt = stmt.on_conflict_do_update(
        index_elements=[table.c.model, table.c.dataset],
        set_={
            "profile": stmt.excluded.profile,
            "source": stmt.excluded.source,
            "captured_at": stmt.excluded.captured_at,
        },
    )
    conn.execute(stmt, list(rows.values()))
