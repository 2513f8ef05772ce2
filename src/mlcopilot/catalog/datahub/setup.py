"""``mlcopilot datahub setup``: create the tags and structured properties mlcopilot uses.

The write-back creates a missing tag or property definition on first use, but with only
what it can infer (a property "for every entity type"); running setup once, as a user allowed
to manage tags and structured properties, creates them as intended and lets the scan's own
token do without those platform privileges. Setup is idempotent: what exists is left as it
is (a description edited in DataHub stays), so a second run creates nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mlcopilot.catalog.aspects import STRUCTURED_PROPERTY_PREFIX as _PROPERTY
from mlcopilot.catalog.datahub.catalog import (
    DataHubCatalog,
    Definition,
    PropertyDefinition,
    TagDefinition,
)
from mlcopilot.checks import available_infos
from mlcopilot.checks.pii_exposure import JUSTIFICATION, JUSTIFICATION_EXPIRES
from mlcopilot.checks.stale_source import SLA_PROPERTY
from mlcopilot.incidents.writeback import OPEN_RISKS_PROPERTY
from mlcopilot.model import TAG_PREFIX, CheckInfo, Urn


def definitions(infos: Iterable[CheckInfo] | None = None) -> list[Definition]:
    """Every tag and structured property definition mlcopilot reads or writes, in order.

    Args:
        infos: The checks whose tags to define; None: every installed check (built-in and
            third-party), so a plugin's tag exists before its first finding.
    """
    checks = sorted(infos if infos is not None else available_infos().values(), key=_by_name)
    tags: list[Definition] = [
        TagDefinition(
            urn=info.tag,
            name=info.tag.removeprefix(TAG_PREFIX),
            description=f"Set by ML Incident Copilot. {info.tag_description}",
        )
        for info in checks
    ]
    properties: list[Definition] = [
        PropertyDefinition(
            urn=OPEN_RISKS_PROPERTY,
            display_name="Open ML risks",
            value_type="string",
            cardinality="MULTIPLE",
            entity_types=("mlModel",),
            description="Set by ML Incident Copilot: one value per open risk kind, or none.",
        ),
        PropertyDefinition(
            urn=_PROPERTY + JUSTIFICATION,
            display_name="PII justification",
            value_type="string",
            cardinality="SINGLE",
            entity_types=("mlModel",),
            description="Why this model may use personal data; silences PII exposure findings.",
        ),
        PropertyDefinition(
            urn=_PROPERTY + JUSTIFICATION_EXPIRES,
            display_name="PII justification expires",
            value_type="date",
            cardinality="SINGLE",
            entity_types=("mlModel",),
            description="The date (YYYY-MM-DD) the PII justification must be reviewed by.",
        ),
        PropertyDefinition(
            urn=_PROPERTY + SLA_PROPERTY,
            display_name="Freshness SLA (hours)",
            value_type="number",
            cardinality="SINGLE",
            entity_types=("dataset",),
            description="Hours after which this dataset counts as stale for the models it feeds.",
        ),
    ]
    return tags + properties


def _by_name(info: CheckInfo) -> str:
    return info.name


@dataclass(frozen=True, slots=True)
class SetupResult:
    """What setup did: the definitions it created and the ones that were already there."""

    created: tuple[Urn, ...]
    existing: tuple[Urn, ...]


def setup_datahub(
    catalog: DataHubCatalog,
    *,
    dry_run: bool = False,
    only: Sequence[Definition] | None = None,
) -> SetupResult:
    """Create every missing definition of :func:`definitions` (or of ``only``) in DataHub.

    Args:
        catalog: The DataHub to set up.
        dry_run: Report what would be created without writing.
        only: The definitions to ensure instead of all of them.

    Raises:
        CatalogError: when DataHub refuses (e.g. the token may not manage tags or structured
            properties); CatalogUnavailable when it cannot be reached.
    """
    wanted = list(only) if only is not None else definitions()
    created = catalog.ensure_definitions(wanted, dry_run=dry_run)
    return SetupResult(
        created=tuple(created),
        existing=tuple(d.urn for d in wanted if d.urn not in set(created)),
    )
