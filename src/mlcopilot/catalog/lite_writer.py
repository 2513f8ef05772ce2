"""Write aspects into a DataHub Lite file inside one transaction, in Lite's own row format.

``SqliteLite.write`` commits once per aspect (and its browse-edge hooks once per edge), so a load
interrupted half-way left half a catalog, and its per-aspect SDK round trip made a large file
take minutes. :class:`LiteWriter` writes the very rows ``write`` writes, by the same rules,
inside the transaction :meth:`~mlcopilot.catalog.lite.LiteCatalog.writing` opens:

- v0 mirrors the latest version and v1..N are the history; a value equal to the stored one
  makes no version (only v0's ``lastObserved`` moves); ``systemMetadata.properties.sysVersion``
  holds N; ``createdon`` is the record's ``lastObserved`` (else the time of writing) and v0
  keeps the ``createdon`` of its first write, as Lite does.
- Timeseries aspects (``ASPECT_TYPE == "timeseries"``) keep every distinct event as a version;
  v0 is the event with the greatest ``timestampMillis`` (not the last one written), and its
  ``sysVersion`` is still the highest version, so Lite's own ``write`` can carry on after us.
- Lite's browse index (``metadata_edge_v2``, what ``datahub lite ls`` reads) is kept by calling
  Lite's own hooks: ``post_update_hook`` per new version and ``global_post_update_hook`` per
  entity that is new or whose container, subTypes or dataPlatformInstance changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from datahub.emitter.aspect import ASPECT_MAP
from datahub.lite.sqlite_lite import SqliteLite
from datahub.metadata.schema_classes import (
    ChartInfoClass,
    ContainerClass,
    ContainerPropertiesClass,
    DashboardInfoClass,
    DataPlatformInstanceClass,
    DatasetPropertiesClass,
    SubTypesClass,
    SystemMetadataClass,
    TagPropertiesClass,
    _Aspect,
)

from mlcopilot.catalog.aspect_json import dumps

_HOOKED = (
    DatasetPropertiesClass,
    ContainerPropertiesClass,
    DataPlatformInstanceClass,
    ChartInfoClass,
    DashboardInfoClass,
    TagPropertiesClass,
)
"""The aspect classes Lite's ``post_update_hook`` makes browse edges from."""
_HOOKED_NAMES = frozenset(c.ASPECT_NAME for c in _HOOKED)
_PLACEMENT = {c.ASPECT_NAME: c for c in (ContainerClass, SubTypesClass, DataPlatformInstanceClass)}
"""The aspects ``global_post_update_hook`` places an entity in the browse tree by."""
TIMESERIES = frozenset(n for n, c in ASPECT_MAP.items() if c.ASPECT_TYPE == "timeseries")
_DEFAULT_SYSTEM = SystemMetadataClass(lastObserved=0, properties={}).to_obj()
"""Lite's systemMetadata for a record that carries none (``lastObserved`` set per write)."""

_V0 = (
    "SELECT metadata, system_metadata FROM metadata_aspect_v2 "
    "WHERE urn = ? AND aspect_name = ? AND version = 0"
)
_MAX_VERSION = "SELECT MAX(version) FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ?"
_INSERT = "INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, ?, ?)"
_INSERT_FIRST = "INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, ?, ?), (?, ?, 0, ?, ?, ?)"
"""A new aspect's v1 and its v0 copy, in one statement."""
_UPDATE_V0 = (
    "UPDATE metadata_aspect_v2 SET metadata = ?, system_metadata = ? "
    "WHERE urn = ? AND aspect_name = ? AND version = 0"
)
_UPDATE_V0_SYSTEM = (
    "UPDATE metadata_aspect_v2 SET system_metadata = ? "
    "WHERE urn = ? AND aspect_name = ? AND version = 0"
)
_SAME_TIME_EVENTS = (
    "SELECT metadata FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ? AND version > 0 "
    "AND json_extract(metadata, '$.timestampMillis') IS ?"
)
_ENTITY_EXISTS = "SELECT 1 FROM metadata_aspect_v2 WHERE urn = ? LIMIT 1"
_ANY_ASPECT = "SELECT 1 FROM metadata_aspect_v2 LIMIT 1"
_MAX_REMEMBERED = 1_000_000
"""At most this many aspects (about 60 MB) are remembered instead of looked up."""
_PLACEMENT_ROWS = (
    "SELECT aspect_name, metadata FROM metadata_aspect_v2 WHERE urn = ? AND version = 0 "
    f"AND aspect_name IN ({', '.join(repr(n) for n in sorted(_PLACEMENT))})"
)
_UPSERT_EDGE = (
    "INSERT INTO metadata_edge_v2 VALUES (?, ?, ?, ?) ON CONFLICT (src_id, relnship, dst_id) "
    "DO UPDATE SET dst_label = excluded.dst_label WHERE dst_label IS NOT excluded.dst_label"
)
"""Lite's ``add_edge`` without ``remove_existing``: the edge, its label updated if it differs."""
_NAMED_BY_ID = frozenset({"dataFlow", "dataJob"})
"""Entity types the placement hook also names by their own id: never replayed."""

_EdgeCall = tuple[str, str, str, str | None, bool]
"""(src, relationship, dst, dst label, remove_existing): one ``add_edge`` call."""


@dataclass(frozen=True, slots=True)
class _Template:
    urn: str
    calls: list[_EdgeCall]


class Outcome(Enum):
    """What :meth:`LiteWriter.put` did with one aspect."""

    NEW_VERSION = "new version"
    UNCHANGED = "unchanged"
    """Equal to what is stored (an already stored event, for timeseries): no new version."""
    EXISTS = "exists"
    """A create-only write (CREATE, CREATE_ENTITY) found the aspect or entity already there."""


class TransactionalLite(SqliteLite):
    """DataHub Lite whose commits wait for the load's single commit while :attr:`deferring`.

    Lite's edge hooks commit after every edge; deferring them keeps a load one transaction.
    While deferring, an edge call identical to the last one for the same edge is skipped:
    thousands of datasets on one platform repeat the same platform edges, each a read and a
    write otherwise.
    """

    deferring: bool = False

    def _commit(self) -> None:
        if not self.deferring:
            super()._commit()

    _recorded: list[_EdgeCall] | None = None

    def start_recording(self) -> None:
        """Remember every ``add_edge`` call from now on (see :meth:`LiteWriter.finish`)."""
        self._recorded = []

    def stop_recording(self) -> list[_EdgeCall]:
        """The calls made since :meth:`start_recording`."""
        recorded, self._recorded = self._recorded or [], None
        return recorded

    def start_deferring(self) -> None:
        """Hold commits (and remember edge calls) until :meth:`stop_deferring`."""
        self.deferring = True
        self._edges_set: dict[tuple[str, str], tuple[str, str | None]] = {}
        self._edges_added: set[tuple[str, str, str, str | None]] = set()

    def stop_deferring(self) -> None:
        """Commit normally again; forget the edge calls remembered."""
        self.deferring = False
        self._edges_set = {}
        self._edges_added = set()

    def add_edge(
        self,
        src: Any,
        relnship: str,
        dst: Any,
        dst_label: str | None = None,
        remove_existing: bool = False,
    ) -> None:
        """Lite's ``add_edge``, skipping a call that cannot change anything while deferring."""
        if not self.deferring:
            super().add_edge(src, relnship, dst, dst_label, remove_existing)
            return
        if self._recorded is not None:
            self._recorded.append((str(src), relnship, str(dst), dst_label, remove_existing))
        edge = (str(src), relnship)
        if remove_existing:
            if self._edges_set.get(edge) == (str(dst), dst_label):
                return
            self._edges_set[edge] = (str(dst), dst_label)
        else:
            added = (*edge, str(dst), dst_label)
            if added in self._edges_added:
                return
            self._edges_added.add(added)
            # Lite's add_edge looks the edge up, then inserts it or updates its label: the
            # same, in one statement (a new edge per entity placed: a first load's finish).
            self.sqlite_client.execute(_UPSERT_EDGE, added)
            return
        super().add_edge(src, relnship, dst, dst_label, remove_existing)


class LiteWriter:
    """Aspect writes into an open transaction of a :class:`TransactionalLite`."""

    def __init__(self, lite: TransactionalLite) -> None:
        self._lite = lite
        self._db = lite.sqlite_client
        self._place: set[str] = set()
        """Entities to (re)place in the browse tree when the load finishes."""
        self._fresh = self._db.execute(_ANY_ASPECT).fetchone() is None
        """The catalog held no aspect when this transaction began: an aspect or entity this
        load has not written is not there, and need not be looked up (a first load into a
        new catalog looks nothing up). Every entity this load writes is in :attr:`_place`
        then, and :attr:`_written` knows the aspects."""
        self._written: set[int] = set()
        """``hash((urn, aspect name))`` of each aspect written while :attr:`_fresh` (a
        collision only costs a look-up)."""
        self._placed_aspects: set[str] = set()
        """Entities given a placement aspect (container...) by this load."""
        self._last_versioned: tuple[dict[str, Any], int, str] | None = None
        """The last :meth:`_versioned`: its systemMetadata, version and text."""

    def current(self, urn: str, aspect_name: str) -> dict[str, Any] | None:
        """The aspect's latest value as stored now (this transaction's writes included)."""
        row = self._db.execute(_V0, (urn, aspect_name)).fetchone()
        if row is None:
            return None
        value = json.loads(row[0])
        return value if isinstance(value, dict) else None

    def entity_exists(self, urn: str) -> bool:
        """Whether the catalog holds any aspect of ``urn`` now."""
        if self._fresh:
            return urn in self._place
        return self._db.execute(_ENTITY_EXISTS, (urn,)).fetchone() is not None

    def _v0(self, urn: str, aspect_name: str) -> tuple[str, str] | None:
        """(metadata, system_metadata) of the aspect's v0 row, if there is one."""
        if self._fresh:
            key = hash((urn, aspect_name))
            if key not in self._written:
                if len(self._written) >= _MAX_REMEMBERED:
                    self._fresh = False  # memory stays bounded; look-ups from now on
                else:
                    self._written.add(key)  # written next, whatever the caller decides
                    return None
        row: tuple[str, str] | None = self._db.execute(_V0, (urn, aspect_name)).fetchone()
        return row

    def put(
        self,
        urn: str,
        aspect_name: str,
        value: Mapping[str, Any] | None,
        system: Mapping[str, Any] | None,
        *,
        text: str | None = None,
        create_only: bool = False,
    ) -> Outcome:
        """Write one validated aspect (its JSON as the SDK serialises it) as Lite would.

        Args:
            urn: The entity.
            aspect_name: The aspect.
            value: The aspect's JSON, in the form the SDK's ``to_obj`` gives; or None with
                ``text``.
            system: The record's systemMetadata in the same form, or None.
            text: ``json.dumps(value)``, when the caller has it already (then ``value`` is
                parsed from it only when needed).
            create_only: Leave an aspect that already exists alone (CREATE).
        """
        if text is None:
            assert value is not None, (urn, aspect_name)
            text = json.dumps(value)
        if aspect_name in TIMESERIES:
            return self._put_event(urn, aspect_name, _parsed(value, text), text, system)
        row = self._v0(urn, aspect_name)
        if row is not None and create_only:
            return Outcome.EXISTS
        if row is None and urn not in self._place and not self.entity_exists(urn):
            self._place.add(urn)
        created_on, stored_system, observed = _system(system)
        if row is None:
            version = 1
        else:
            if text == row[0] or _parsed(value, text) == json.loads(row[0]):
                self._touch(urn, aspect_name, json.loads(row[1]), observed)
                return Outcome.UNCHANGED
            version = self._version_of(urn, aspect_name, row[1]) + 1
        system_text = self._versioned(stored_system, version)
        if row is None:
            first = (urn, aspect_name, version, text, system_text, created_on)
            self._db.execute(
                _INSERT_FIRST, (*first, urn, aspect_name, text, system_text, created_on)
            )
        else:
            self._db.execute(_INSERT, (urn, aspect_name, version, text, system_text, created_on))
            self._db.execute(_UPDATE_V0, (text, system_text, urn, aspect_name))
        self._after_new_version(urn, aspect_name, value, text)
        return Outcome.NEW_VERSION

    def finish(self) -> None:
        """Place new and moved entities in Lite's browse tree (before the commit).

        Lite's ``global_post_update_hook`` costs about half a millisecond per entity, almost
        all of it spent re-deriving edges every entity of the same platform and type shares.
        So it runs once per placement (entity type, the urn's first part, container, subTypes,
        dataPlatformInstance: all the hook reads), its edge calls are recorded, and other
        entities with that placement replay them with their own urn.
        """
        templates: dict[tuple[str, str, tuple[tuple[str, str], ...]], _Template] = {}
        for urn in sorted(self._place):
            if self._fresh and urn not in self._placed_aspects:
                rows: tuple[tuple[str, str], ...] = ()  # none written, none there before
            else:
                rows = tuple(sorted(self._db.execute(_PLACEMENT_ROWS, (urn,)).fetchall()))
            entity_type, first_part = _urn_head(urn)
            key = (entity_type, first_part, rows)
            template = templates.get(key)
            if template is not None and entity_type not in _NAMED_BY_ID:
                for call in template.calls:
                    self._lite.add_edge(*_replayed(call, template.urn, urn))
                continue
            found: dict[str, _Aspect] = {
                name: _PLACEMENT[name]._construct(json.loads(text)) for name, text in rows
            }
            self._lite.start_recording()
            self._lite.global_post_update_hook(urn, found)
            templates[key] = _Template(urn, self._lite.stop_recording())
        self._place = set()

    def _put_event(
        self,
        urn: str,
        aspect_name: str,
        value: Mapping[str, Any],
        text: str,
        system: Mapping[str, Any] | None,
    ) -> Outcome:
        """One timeseries event: kept once, v0 the newest by ``timestampMillis``."""
        stamp = value.get("timestampMillis")  # required by every timeseries aspect's schema
        row = self._v0(urn, aspect_name)
        created_on, stored_system, observed = _system(system)
        if row is not None:
            if text == row[0] or value == json.loads(row[0]):
                self._touch(urn, aspect_name, json.loads(row[1]), observed)
                return Outcome.UNCHANGED
            same_time = self._db.execute(_SAME_TIME_EVENTS, (urn, aspect_name, stamp))
            if any(value == json.loads(event) for (event,) in same_time):
                return Outcome.UNCHANGED  # an older event, loaded again
        elif urn not in self._place and not self.entity_exists(urn):
            self._place.add(urn)
        if row is None and self._fresh:
            version = 1  # no version of it anywhere
        else:
            (highest,) = self._db.execute(_MAX_VERSION, (urn, aspect_name)).fetchone()
            version = int(highest or 0) + 1
        system_text = self._versioned(stored_system, version)
        if row is None:
            first = (urn, aspect_name, version, text, system_text, created_on)
            self._db.execute(
                _INSERT_FIRST, (*first, urn, aspect_name, text, system_text, created_on)
            )
            return Outcome.NEW_VERSION
        self._db.execute(_INSERT, (urn, aspect_name, version, text, system_text, created_on))
        latest = json.loads(row[0])
        if _stamp(value) >= _stamp(latest):
            self._db.execute(_UPDATE_V0, (text, system_text, urn, aspect_name))
        else:
            # An older event: history only. v0 keeps the newest event but must still name the
            # highest version, which Lite's own write() numbers the next version from.
            kept = _with_version(json.loads(row[1]), version)
            self._db.execute(_UPDATE_V0_SYSTEM, (json.dumps(kept), urn, aspect_name))
        return Outcome.NEW_VERSION

    def _versioned(self, system: dict[str, Any], version: int) -> str:
        """The systemMetadata text stored with a new version: ``system`` naming ``version``.

        Records of one file mostly carry the same systemMetadata and make version 1: the
        text of the last one is kept and used again while they do.
        """
        last = self._last_versioned
        if last is not None and last[1] == version and last[0] == system:
            return last[2]
        text = dumps(SystemMetadataClass, _with_version(system, version))
        self._last_versioned = (system, version, text)
        return text

    def _touch(self, urn: str, aspect_name: str, stored: Any, observed: int) -> None:
        """Lite's rule for an unchanged value: only v0's ``lastObserved`` moves."""
        if not stored:
            stored = {"lastObserved": observed}
        else:
            stored["lastObserved"] = observed
        self._db.execute(_UPDATE_V0_SYSTEM, (json.dumps(stored), urn, aspect_name))

    def _version_of(self, urn: str, aspect_name: str, system_text: str) -> int:
        """The latest version number: v0's ``sysVersion``, else the highest row (as Lite)."""
        stored = json.loads(system_text) or {}
        version = (stored.get("properties") or {}).get("sysVersion")
        if version is None:
            (version,) = self._db.execute(_MAX_VERSION, (urn, aspect_name)).fetchone()
        return int(version)

    def _after_new_version(
        self, urn: str, aspect_name: str, value: Mapping[str, Any] | None, text: str
    ) -> None:
        if aspect_name in _HOOKED_NAMES:
            parsed = _parsed(value, text)
            # datasetProperties makes an edge only when it has a name: no wrapping otherwise.
            if aspect_name != DatasetPropertiesClass.ASPECT_NAME or parsed.get("name"):
                # The value is validated already; the hooks read only its top-level fields,
                # so wrap it as the SDK class without a second (slow) parse.
                aspect = ASPECT_MAP[aspect_name]._construct(dict(parsed))
                self._lite.post_update_hook(urn, aspect_name, aspect)
        if aspect_name in _PLACEMENT:
            self._place.add(urn)
            self._placed_aspects.add(urn)


def _parsed(value: Mapping[str, Any] | None, text: str) -> Mapping[str, Any]:
    parsed: Mapping[str, Any] = json.loads(text) if value is None else value
    return parsed


def _urn_head(urn: str) -> tuple[str, str]:
    """(entity type, first part of the entity id) of a urn, as Lite's Urn class splits it."""
    _, _, rest = urn.partition("urn:li:")
    entity_type, _, entity_id = rest.partition(":")
    if not entity_id.startswith("("):
        return entity_type, entity_id
    comma = entity_id.find(",")
    if comma > 0 and "(" not in entity_id[1:comma] and ")" not in entity_id[1:comma]:
        return entity_type, entity_id[1:comma]  # the first comma is at depth 1
    depth = 0
    for index, char in enumerate(entity_id):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 1:
            return entity_type, entity_id[1:index]
    return entity_type, entity_id


def _replayed(call: _EdgeCall, template_urn: str, urn: str) -> _EdgeCall:
    src, relationship, dst, label, remove_existing = call
    return (
        urn if src == template_urn else src,
        relationship,
        urn if dst == template_urn else dst,
        label,
        remove_existing,
    )


def _system(system: Mapping[str, Any] | None) -> tuple[int, dict[str, Any], int]:
    """(createdon, the systemMetadata Lite stores, the lastObserved it records) for a write.

    As ``SqliteLite.write``: ``createdon`` is the record's ``lastObserved`` when set (and not
    0), else now; a record without systemMetadata gets Lite's default one; a record whose
    systemMetadata has no ``lastObserved`` is stored without one.
    """
    observed = system.get("lastObserved") if system is not None else None
    created_on = int(observed) if observed else int(time.time() * 1000.0)
    if system is None:
        return created_on, {**_DEFAULT_SYSTEM, "lastObserved": created_on}, created_on
    return created_on, dict(system), created_on if observed is None else int(observed)


def _with_version(system: dict[str, Any], version: int) -> dict[str, Any]:
    stored = dict(system)
    stored["properties"] = {**(stored.get("properties") or {}), "sysVersion": str(version)}
    return stored


def _stamp(value: Mapping[str, Any]) -> int:
    stamp = value.get("timestampMillis")
    return stamp if isinstance(stamp, int) else 0
