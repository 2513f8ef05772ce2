"""Reading notification groups back: acknowledgements made elsewhere, and sink references.

What a scan checks for acknowledgements, and where each incident's group lives in a sink
(what a report links).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, select

from mlcopilot.model import GroupState, SinkName, SinkRef, Urn, WatchedGroup
from mlcopilot.store import schema as t
from mlcopilot.store.rows import incident_from_mapping


def watched(conn: Connection, models: Sequence[Urn] | None) -> list[WatchedGroup]:
    """Open, unacknowledged groups with an open incident of ``models`` (all when None)."""
    g, i, r = t.notify_groups, t.incidents, t.sink_refs
    groups = conn.execute(
        select(g.c.key, g.c.generation).where(g.c.state == GroupState.OPEN.value).order_by(g.c.key)
    ).all()
    wanted = set(models) if models is not None else None
    result: list[WatchedGroup] = []
    for key, generation in groups:
        rows = conn.execute(
            select(i).where(
                i.c.group_key == key,
                i.c.group_generation == generation,
                i.c.state == "open",
            )
        ).all()
        incidents = tuple(incident_from_mapping(dict(row._mapping)) for row in rows)
        if not incidents or (wanted is not None and not {x.model for x in incidents} & wanted):
            continue
        refs = {
            row.sink: SinkRef(sink=row.sink, key=row.ref, url=row.url, data=dict(row.data))
            for row in conn.execute(
                select(r).where(r.c.group_key == key, r.c.group_generation == generation)
            )
        }
        result.append(WatchedGroup(key, int(generation), refs, incidents))
    return result


def incident_refs(conn: Connection, sink: SinkName) -> dict[tuple[str, int], SinkRef]:
    """Each incident occurrence's group reference in ``sink``, by ``(id, generation)``.

    Whatever the state of the incident or its group: an acknowledged or resolved incident
    keeps the issue it was reported in. Occurrences whose group was never delivered to
    ``sink`` are absent.
    """
    i, r = t.incidents, t.sink_refs
    rows = conn.execute(
        select(i.c.id, i.c.generation, r.c.sink, r.c.ref, r.c.url, r.c.data)
        .join(r, (r.c.group_key == i.c.group_key) & (r.c.group_generation == i.c.group_generation))
        .where(r.c.sink == sink)
        .order_by(i.c.id, i.c.generation)
    )
    return {
        (row.id, int(row.generation)): SinkRef(
            sink=row.sink, key=row.ref, url=row.url, data=dict(row.data)
        )
        for row in rows
    }
