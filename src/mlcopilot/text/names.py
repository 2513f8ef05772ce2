"""Readable names for urns: what a person calls an entity, for every entity type DataHub has.

Built on the SDK's urn classes (``datahub.metadata.urns``), so nested urns (a dataJob's
dataFlow, a schemaField's dataset) are parsed, never split on commas. The SDK's urn module is
loaded at the first name asked for, not on import: importing this module (``mlcopilot.model``
re-exports it) must not load the SDK, so commands that print no name (``mlcopilot --help``,
``mlcopilot checks``) start without it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datahub.metadata import urns as du

_URN_PREFIX = "urn:li:"


def short_name(urn: str) -> str:
    """A readable name for ``urn``: a dataset's name, ``flow.job`` for a dataJob, and so on.

    An urn that does not parse is returned whole: the name is never empty and never a
    fragment of the urn's punctuation.
    """
    return _cached(urn)


@lru_cache(maxsize=65_536)
def _cached(urn: str) -> str:
    # Called once per finding, incident and row rendered; an estate repeats the same few
    # thousand urns, so the parse is done once per urn (and so are these imports).
    from datahub.metadata import urns as du
    from datahub.utilities.urns.error import InvalidUrnError

    try:
        parsed = du.Urn.from_string(urn)
    except (InvalidUrnError, ValueError):
        return urn or "empty urn"
    name = _readable(parsed)
    return name if name.strip() else urn


def _readable(urn: du.Urn) -> str:
    from datahub.metadata import urns as du
    from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

    if isinstance(
        urn,
        du.DatasetUrn
        | du.MlModelUrn
        | du.MlModelGroupUrn
        | du.MlModelDeploymentUrn
        | du.MlFeatureTableUrn
        | du.DataProcessUrn,
    ):
        return urn.name  # (platform, name[, env]): the name is what people call it
    if isinstance(urn, du.MlFeatureUrn | du.MlPrimaryKeyUrn):
        return f"{urn.feature_namespace}.{urn.name}"
    if isinstance(urn, du.DataJobUrn):
        return f"{du.DataFlowUrn.from_string(urn.flow).flow_id}.{urn.job_id}"
    if isinstance(urn, du.SchemaFieldUrn):
        field = get_simple_field_path_from_v2_field_path(urn.field_path) or urn.field_path
        return f"{_nested(urn.parent)}.{field}"
    if isinstance(urn, du.DataFlowUrn):
        return urn.flow_id
    if isinstance(urn, du.ChartUrn):
        return urn.chart_id
    if isinstance(urn, du.DashboardUrn):
        return urn.dashboard_id
    if isinstance(urn, du.NotebookUrn):
        return urn.notebook_id
    if isinstance(urn, du.DataPlatformInstanceUrn):
        return urn.instance
    if isinstance(urn, du.MetricUrn | du.SemanticModelUrn | du.VersionSetUrn):
        return urn.id
    return _generic(urn)


def _nested(text: str) -> str:
    """The readable name of an id that is itself an urn (else the id)."""
    return _cached(text) if text.startswith(_URN_PREFIX) else text


def _generic(urn: du.Urn) -> str:
    # An entity type without a rule above: its ids that are not urns, nested ones readable.
    # Most such types have a single id (a tag's name, an incident's id, a user's name).
    ids = urn.entity_ids
    own = [i for i in ids if not i.startswith(_URN_PREFIX)]
    return ".".join(own) if own else ".".join(_nested(i) for i in ids)
