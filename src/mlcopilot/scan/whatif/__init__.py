"""The impact preview: what a proposed change to a dataset would break, before it lands.

``preview_change(catalog, store, checks, dataset, changes, now, limits) -> ImpactReport`` is
the library entry point (``mlcopilot impact`` and the agent's ``impact_of_change`` tool call
it). The changes come from :func:`parse_changes` (flags) or :func:`derive_changes` with
:func:`read_schema_file` (a proposed schema).
"""

from mlcopilot.scan.whatif.changes import (
    ChangeSet,
    ColumnChange,
    apply_to_schema,
    derive_changes,
    parse_changes,
)
from mlcopilot.scan.whatif.overlay import OverlayCatalog
from mlcopilot.scan.whatif.preview import (
    ImpactReport,
    ModelImpact,
    known_datasets,
    preview_change,
    resolve_dataset,
)
from mlcopilot.scan.whatif.schema_file import read_schema_file

__all__ = [
    "ChangeSet",
    "ColumnChange",
    "ImpactReport",
    "ModelImpact",
    "OverlayCatalog",
    "apply_to_schema",
    "derive_changes",
    "known_datasets",
    "parse_changes",
    "preview_change",
    "read_schema_file",
    "resolve_dataset",
]
