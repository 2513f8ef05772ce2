"""Reading notification groups back: acknowledgements made elsewhere, and sink references.

What a scan checks for acknowledgements, and where each incident's group lives in a sink
(what a report links).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Select, select

from mlcopilot.model import GroupState, SinkName, SinkRef, Urn, WatchedGroup, WatchedMember
from mlcopilot.store import schema as t
from mlcopilot.store.chunks import chunks, one_of
from mlcopilot.store.outbox_sql import of_sinks

_WATCHED_COLUMNS = (
    t.incidents.c.id,
    t.incidents.c.generation,
    t.incidents.c.model,
    t.incidents.c.group_key,
    t.incidents.c.group_generation,
)
"""What reading acknowledgements back needs of a member: its name (id and generation) and
model. Not the incident: its JSON columns decoded were 1.6 s of a full rescan's batch's 11."""


def watched(
    conn: Connection, models: Sequence[Urn] | None, keys: Sequence[str] | None = None
) -> list[WatchedGroup]:
    """Open groups with an open incident of ``models`` (all when None), with those incidents.

    With ``keys``: the open groups of those keys, with all their open incidents (``models`` is
    then ignored): a group acknowledged as a whole (its GitHub issue) acknowledges them all.

    Only the incidents of ``models`` are members: a group on a shared upstream entity has
    members across the estate, and every batch of a full rescan read them all again (~36,000 at
    ``make bench``'s 1,000-model estate, and a DataHub request for each 500), to acknowledge
    incidents their own batch reads back anyway. An issue acknowledged on GitHub acknowledges
    its whole group: ``notify.acks`` reads that group again by ``keys``.

    Set-based reads whatever the number of groups (a watcher scans every few seconds against a
    store of thousands of open groups): the incidents, then their groups' sink references, a
    statement each (per chunk of models or keys). The incidents come named (id, generation,
    model), not read whole.
    """
    g, i, r = t.notify_groups, t.incidents, t.sink_refs
    of_open_group = (g.c.state == GroupState.OPEN.value,)
    incidents: Select[Any] = (
        select(*_WATCHED_COLUMNS)
        .join(g, (g.c.key == i.c.group_key) & (g.c.generation == i.c.group_generation))
        .where(*of_open_group, i.c.state == "open")
    )
    refs = (
        select(r)
        .join(g, (g.c.key == r.c.group_key) & (g.c.generation == r.c.group_generation))
        .where(*of_open_group)
    )
    rows: Sequence[Row[Any]]
    ref_rows: Sequence[Row[Any]]
    if keys is not None:
        rows = _where_in(conn, incidents, i.c.group_key, sorted(set(keys)))
        ref_rows = _where_in(conn, refs, r.c.group_key, sorted(set(keys)))
    elif models is None:
        rows = conn.execute(incidents).all()
        ref_rows = conn.execute(refs).all()
    else:
        rows = _where_in(conn, incidents, i.c.model, list(dict.fromkeys(models)))
        ref_rows = _where_in(conn, refs, r.c.group_key, sorted({row.group_key for row in rows}))
    members: dict[tuple[str, int], list[WatchedMember]] = {}
    for row in rows:
        member = WatchedMember(row.id, int(row.generation), row.model)
        members.setdefault((row.group_key, int(row.group_generation)), []).append(member)
    sink_refs: dict[tuple[str, int], dict[SinkName, SinkRef]] = {}
    for row in ref_rows:
        sink_refs.setdefault((row.group_key, int(row.group_generation)), {})[row.sink] = SinkRef(
            sink=row.sink, key=row.ref, url=row.url, data=dict(row.data)
        )
    return [
        WatchedGroup(
            key,
            generation,
            sink_refs.get((key, generation), {}),
            tuple(sorted(members[key, generation], key=lambda x: x.id)),
        )
        for key, generation in sorted(members)
    ]


def _where_in(
    conn: Connection, query: Select[Any], column: ColumnElement[Any], values: list[str]
) -> list[Row[Any]]:
    """``query``'s rows whose ``column`` is one of ``values`` (a statement a chunk of them)."""
    rows: list[Row[Any]] = []
    for chunk in chunks(values):
        rows += conn.execute(query.where(one_of(conn, column, chunk))).all()
    return rows


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
        .where(of_sinks(r.c.sink, [sink]))
        .order_by(i.c.id, i.c.generation, r.c.sink)
    )
    return {
        (row.id, int(row.generation)): SinkRef(
            sink=row.sink, key=row.ref, url=row.url, data=dict(row.data)
        )
        for row in rows
    }


def incident_targets(
    conn: Connection, ids: Sequence[str]
) -> dict[tuple[str, int], tuple[str, ...]]:
    """Where each occurrence of the incidents ``ids`` is told: its group's targets.

    By ``(id, generation)``; occurrences not in a group yet (none planned) are absent.
    """
    i, g = t.incidents, t.notify_groups
    query = select(i.c.id, i.c.generation, g.c.sinks).join(
        g, (g.c.key == i.c.group_key) & (g.c.generation == i.c.group_generation)
    )
    # Read a chunk at a time, each id the caller's string and each list of targets one tuple
    # for all the groups naming it: a first scan of an estate asks of 282,022 incidents, and
    # its rows held at once took the scan from 990 MB after its commit to 1,055, above the
    # commit's own peak of 1,029 (stage probe).
    given = {incident_id: incident_id for incident_id in ids}
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    found: dict[tuple[str, int], tuple[str, ...]] = {}
    for chunk in chunks(sorted(given)):
        rows = conn.execute(query.where(one_of(conn, i.c.id, chunk)))
        for incident_id, generation, sinks in rows:
            targets = tuple(sinks)
            found[(given[incident_id], int(generation))] = shared.setdefault(targets, targets)
    return found
