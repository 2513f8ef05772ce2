"""What the checks find and what becomes of it: findings, incidents, baselines, reports.

A check describes itself with a :class:`CheckInfo`; its :class:`Finding` s are reconciled into
:class:`Incident` s that the store tracks over time.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from datetime import date, datetime
from enum import Enum, StrEnum
from typing import Literal, TypeAlias

from mlcopilot.model.catalog import TAG_PREFIX, Lineage, Schema, Urn
from mlcopilot.model.profiles import DatasetProfile

ChangeKind = Literal["added", "removed", "renamed", "type_changed"]

JSON: TypeAlias = "Mapping[str, JSON] | Sequence[JSON] | str | int | float | bool | None"
"""A value that is plain JSON data: what a finding's ``evidence`` holds, so every report and
the store can carry it as it is (no datetimes or sets: ISO strings and lists instead)."""


def plain_json(value: object) -> JSON:
    """``value`` as plain JSON data, for a check that put something else in its evidence.

    The type says JSON, but a third-party check is not type-checked: tuples become lists,
    sets sorted lists, datetimes and dates ISO strings, enums their values, NaN and the
    infinities (which JSON cannot write) and anything else their ``str``; keys become strings.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Enum):
        return plain_json(value.value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((plain_json(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return str(value)


class Severity(StrEnum):
    """How urgent a finding is; ordered by :attr:`rank` (critical is highest)."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """3 for critical down to 0 for low, so severities compare as numbers."""
        return _RANK[self]

    def at_least(self, other: Severity) -> bool:
        """True when this severity is ``other`` or more urgent."""
        return self.rank >= other.rank


_RANK = {Severity.LOW: 0, Severity.MEDIUM: 1, Severity.HIGH: 2, Severity.CRITICAL: 3}


IncidentType = Literal[
    "FRESHNESS", "VOLUME", "FIELD", "SQL", "DATA_SCHEMA", "OPERATIONAL", "CUSTOM"
]
"""DataHub's ``IncidentType`` enum (``incidentInfo.type``)."""


@dataclass(frozen=True, slots=True)
class CheckInfo:
    """What a check is, as everything downstream of its findings needs to know it.

    Each check carries its own (``Check.info``), as sqlfluff's rules carry their name and
    documentation: the write-back, the notifications and ``datahub setup`` read it, so a
    third-party check needs no entry in any table of the product.
    """

    name: str
    """The check's name, e.g. ``schema_drift`` (its entry-point name for a plugin)."""
    title: str
    """What a person calls the risk, e.g. ``Schema drift``."""
    tag: Urn
    """The tag the write-back puts on an entity with an open finding of this check."""
    tag_description: str
    """One sentence on what the tag means (``datahub setup`` writes it in the tag)."""
    incident_type: IncidentType
    """The DataHub incident type of its incidents."""
    why: str
    """Why the risk matters, as notifications say it."""
    action: str
    """What to do about a finding, as the incident document and notifications say it."""
    custom_incident_type: str | None = None
    """``incidentInfo.customType``: required when ``incident_type`` is ``CUSTOM``."""
    folds_in: frozenset[str] = frozenset()
    """Checks whose findings at an entity with an open finding of this one are its symptoms:
    they join this check's notification group instead of notifying on their own (Alertmanager's
    inhibition). Deprecation folds in schema drift and staleness."""
    docs: str = ""
    """The user documentation; empty means the check class's docstring."""

    def __post_init__(self) -> None:
        # A plugin's malformed info fails when its module is imported, so the registry
        # skips it with this message instead of the scan failing on its first finding.
        if not self.name or not self.title:
            raise ValueError(f"check info {self.name!r}: name and title must not be empty")
        if not self.tag.startswith(TAG_PREFIX) or self.tag == TAG_PREFIX:
            raise ValueError(
                f"check info {self.name!r}: tag {self.tag!r} is not a tag urn (urn:li:tag:...)"
            )
        if (self.incident_type == "CUSTOM") != bool(self.custom_incident_type):
            raise ValueError(
                f"check info {self.name!r}: custom_incident_type is required with "
                f"incident_type CUSTOM and only then (got {self.custom_incident_type!r})"
            )

    @classmethod
    def generic(cls, name: str) -> CheckInfo:
        """What is known of a check that is no longer installed: only its name.

        Its stored incidents still need a tag and a wording; they are derived from the name
        by the same convention the built-in checks follow (``mlcopilot-<name>`` tags).
        """
        return cls(
            name=name,
            title=name.replace("_", " ").capitalize(),
            tag=f"{TAG_PREFIX}mlcopilot-{name.replace('_', '-')}",
            tag_description=f"A finding of the check {name!r} upstream of an ML model.",
            incident_type="CUSTOM",
            custom_incident_type=name.upper(),
            why=f"Unknown: the check {name!r} is not installed here.",
            action=f"Reinstall the check {name!r} for its advice, or resolve the incident.",
        )


@dataclass(frozen=True, slots=True)
class Finding:
    """One risk found at one entity on one model's upstream path.

    ``id`` is stable across scans: a hash of model, check, entity and field only (no timestamps
    or text), so the same risk seen again is recognised as the same incident.
    """

    check: str
    """The name of the check that found it (a built-in or a plugin's)."""
    severity: Severity
    model: Urn
    entity: Urn
    field: str | None
    message: str
    path: tuple[Urn, ...]
    change: ChangeKind | None = None
    previous_field: str | None = None
    evidence: Mapping[str, JSON] = _field(default_factory=dict)
    """The facts behind ``message``, by name (a rename's ``confidence``, a freshness SLA's
    ``sla_hours`` and ``last_updated``, a ``decommission_time``...): what a script reads instead
    of parsing the text. Empty when the check records none."""

    @property
    def id(self) -> str:
        """The stable incident id of this finding."""
        return finding_id(self.model, self.check, self.entity, self.field)


def finding_id(model: Urn, check: str, entity: Urn, field_path: str | None) -> str:
    """A stable 16-hex-digit id from what identifies a risk, never from when or how it was seen."""
    key = "\x1f".join((model, check, entity, field_path or ""))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


_DIGEST_BITS = (1 << 63) - 1
"""A digest is a non-negative 63-bit number: it fits a signed 64-bit column and array."""


def content_digest(item: Finding | Incident) -> int:
    """A digest of what a scan writes of an incident beyond what identifies it.

    Its severity, change, previous field, message, path and evidence. A scan that finds an
    incident again as it is stored (a full rescan finds nearly all of its incidents so) only
    stamps it seen instead of rewriting its text and JSON (:class:`IncidentChanges`
    ``unchanged``). Of their ``repr``: for plain JSON data (what evidence holds) equal reprs
    are equal values, and it takes 3.8 us where JSON encoding took 8.2. Evidence whose
    ``repr`` differs from scan to scan (a set, an object's address) only costs a rewrite.
    """
    text = repr(
        (
            item.severity.value,
            item.change,
            item.previous_field,
            item.message,
            item.path,
            item.evidence,
        )
    )
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") & _DIGEST_BITS


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """What one check concluded about one node: findings, or why it could not tell."""

    findings: tuple[Finding, ...] = ()
    unknown: str | None = None
    """Why the node lacked the metadata this check needs; None when the check could decide."""
    undecided: frozenset[str | None] = frozenset()
    """When the check could decide at the node: the fields (None: the node itself) it still
    could not (a column its data no longer covers). Their incidents are neither refreshed nor
    resolved."""


NOT_IN_CATALOG = CheckOutcome(unknown="not in the catalog (referenced by lineage only)")
"""What every check concludes about an entity that lineage references but the catalog lacks."""


class IncidentState(StrEnum):
    """Where an incident is in its lifecycle."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Incident:
    """A finding tracked over time. ``generation`` counts recurrences after resolution."""

    id: str
    generation: int
    state: IncidentState
    check: str
    severity: Severity
    model: Urn
    entity: Urn
    field: str | None
    change: ChangeKind | None
    previous_field: str | None
    message: str
    path: tuple[Urn, ...]
    evidence: Mapping[str, object]
    opened_at: datetime
    updated_at: datetime
    resolved_at: datetime | None = None
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    resolution: str | None = None
    seen_at: datetime | None = None
    """The clock of the last scan that found it (opened or refreshed it); None when unknown.

    Only scans set it (acknowledging or resolving by hand sets ``updated_at``, at the
    wall-clock time): a scan that read DataHub earlier than the one that last found the
    incident, and commits after it, leaves the incident as that one left it
    (:func:`mlcopilot.incidents.lifecycle.reconcile`)."""

    @property
    def key(self) -> str:
        """``id`` plus generation: what names this occurrence in DataHub (incident and document)."""
        return f"{self.id}-{self.generation}"

    @property
    def is_open(self) -> bool:
        """True for open and acknowledged incidents."""
        return self.state is not IncidentState.RESOLVED


@dataclass(frozen=True, slots=True)
class IncidentChanges:
    """What one scan did to the incident set: new, still present (seen again), cleared."""

    opened: tuple[Incident, ...] = ()
    updated: tuple[Incident, ...] = ()
    resolved: tuple[Incident, ...] = ()
    unchanged: bytes = b""
    """One byte for each of ``updated``, in order: 1 when the scan found it as it is stored
    (its :func:`content_digest` the stored one), so the store only stamps it seen. Empty, or
    0, when not known: it is rewritten whole. A byte, not a set of ids: a second scan of an
    estate finds 282,022 incidents again."""

    def refreshed(self, *, unchanged: bool) -> list[Incident]:
        """The ``updated`` incidents found as stored (``unchanged``) or the others."""
        flags = self.unchanged
        return [
            inc
            for n, inc in enumerate(self.updated)
            if (n < len(flags) and flags[n] == 1) is unchanged
        ]


@dataclass(frozen=True, slots=True)
class CoverageGap:
    """An entity on a model's upstream path where lineage stops before reaching a dataset.

    Nothing beyond it could be checked, so the model is not covered there: a gap is reported
    as such, never as a clean result.
    """

    entity: Urn
    reason: str
    """What was missing, e.g. ``no upstream lineage recorded``."""


@dataclass(frozen=True, slots=True)
class ProfileReadiness:
    """What DataHub profiles of the data feeding one model: what profile drift can compare.

    ``columns`` counts the columns of its upstream datasets that feed the model, or that
    lineage cannot rule out; ``profiled`` those the newest profile has a column profile of,
    ``quantiles`` those with quantiles (numeric distributions). The datasets are listed by
    what their ingestion recipe lacks: ``unprofiled`` (no profile at all:
    ``profiling.enabled``), ``table_level`` (row counts only:
    ``profiling.profile_table_level_only: false``) and ``no_quantiles`` (numeric columns
    feeding the model profiled without quantiles: ``profiling.include_field_quantiles``).
    """

    columns: int = 0
    profiled: int = 0
    quantiles: int = 0
    datasets: int = 0
    """Upstream datasets in the catalog."""
    unprofiled: tuple[Urn, ...] = ()
    table_level: tuple[Urn, ...] = ()
    no_quantiles: tuple[Urn, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelReport:
    """The scan result for one model."""

    urn: Urn
    lineage: Lineage
    findings: tuple[Finding, ...]
    unknown: Mapping[Urn, tuple[str, ...]]
    """Nodes that lacked metadata some check needed, with the reasons."""
    errors: tuple[str, ...] = ()
    gaps: tuple[CoverageGap, ...] = ()
    """Where the model's lineage stops without reaching a dataset (see ``coverage.py``)."""
    profiles: ProfileReadiness | None = None
    """What DataHub profiles of its upstream data (None: not worked out, the profile_drift
    check did not run)."""


BaselineSource = Literal["history", "first_scan", "accepted"]
"""Where a baseline came from (see :class:`Baseline`)."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """The schema of one upstream dataset that one model is known to work with.

    ``source`` says where it came from: the catalog's aspect history as of the model's training
    time, the first scan that saw the dataset, or a user accepting the current schema.
    """

    model: Urn
    dataset: Urn
    schema: Schema
    source: BaselineSource
    captured_at: datetime


@dataclass(frozen=True, slots=True)
class ProfileBaseline:
    """The ``datasetProfile`` of one upstream dataset that one model's data is compared with.

    ``source``: ``history`` is the newest profile taken at or before the model's training
    time; ``first_scan`` the oldest profile DataHub held when a scan first read the dataset
    (none was taken by the training time, or the model's training time is unknown);
    ``accepted`` the profile that was current when a user accepted it. Stored when first used,
    so DataHub's timeseries retention cannot take it away.
    """

    model: Urn
    dataset: Urn
    profile: DatasetProfile
    source: BaselineSource
    captured_at: datetime
