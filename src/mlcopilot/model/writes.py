"""Write-back intents: what the product wants the catalog to hold.

Catalog adapters turn them into DataHub aspects, compare with what is there and write only
the difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from mlcopilot.model.catalog import Urn


@dataclass(frozen=True, slots=True)
class TagWrite:
    """Tag ``tag`` should be present on (or absent from) ``entity``."""

    entity: Urn
    tag: Urn
    present: bool


@dataclass(frozen=True, slots=True)
class PropertyWrite:
    """Structured property ``property`` on ``entity`` should hold exactly ``values``.

    An empty ``values`` removes the property. Other properties on the entity are kept.
    """

    entity: Urn
    property: Urn
    values: tuple[str | float, ...]


@dataclass(frozen=True, slots=True)
class IncidentWrite:
    """A native DataHub incident (``incidentInfo``) on a deterministic urn."""

    urn: Urn
    incident_type: str
    custom_type: str | None
    title: str
    description: str
    priority: int
    entities: tuple[Urn, ...]
    active: bool
    created_at: datetime
    status_changed_at: datetime


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """A DataHub ``document`` entity holding an incident's full context in markdown."""

    urn: Urn
    title: str
    text: str
    related_assets: tuple[Urn, ...]
    created_at: datetime
    modified_at: datetime


Write = TagWrite | PropertyWrite | IncidentWrite | DocumentWrite
