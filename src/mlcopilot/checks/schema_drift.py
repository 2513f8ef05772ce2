"""Schema drift: columns removed, renamed, retyped or added since the model was trained."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import ClassVar

from pydantic import Field

from mlcopilot.checks.column_types import platform_of, same_type
from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    JSON,
    NOT_IN_CATALOG,
    ChangeKind,
    CheckInfo,
    CheckOutcome,
    EntityType,
    Finding,
    Node,
    Schema,
    SchemaField,
    Severity,
)
from mlcopilot.protocols import CheckContext

# How much each signal counts towards the confidence that a removed column and an added
# column are one column renamed. Matching type, native type and position alone add up to
# 0.5, below the default threshold: a column dropped and an unrelated one added in its
# place is not a rename unless the names or descriptions also agree.
_WEIGHT_TYPE = 0.2
_WEIGHT_NATIVE_TYPE = 0.15
_WEIGHT_POSITION = 0.15
_WEIGHT_DESCRIPTION = 0.2
_WEIGHT_NAME = 0.3


_NOTHING = CheckOutcome()
"""Nothing found, nothing unknown: one object for every node a check has nothing on."""


class SchemaDriftConfig(PluginConfig):
    """Settings of the ``schema_drift`` check."""

    rename_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    """How sure (0 to 1) a removed and an added column must be to be reported as a rename."""


@dataclass(frozen=True, slots=True)
class _Rename:
    old: SchemaField
    new: SchemaField
    confidence: float


class SchemaDrift:
    """A dataset feeding the model no longer has the schema the model was trained on.

    What it flags: every difference between the dataset's current schema and its baseline,
    the schema as it stood when the model was trained (or, when the catalog keeps no
    history, as the first scan saw it). Columns are matched by field path:

    - removed: a baseline column that is gone;
    - renamed: a removed and an added column that look like one column under a new name.
      Each pair is scored from 0 to 1 on the same logical type, the same native type, the
      same position, the same description and the similarity of the names; the best pairs
      scoring at least `rename_confidence` (default 0.6) are reported as renames, the
      others stay removed plus added;
    - type_changed: a column whose type changed. Two spellings of one type on the dataset's
      platform are not a change (Hive's `long` and `bigint`, `string` and `STRING`,
      Snowflake's `INT` and `NUMBER(38,0)`; nor a string's length): native types are read
      into their families (`mlcopilot.checks.column_types`, the README's table), and only a
      change of family, or of a decimal's precision and scale, counts;
    - added: a column the baseline did not have.

    Why it matters: a model reads its features by column name and type. A removed or
    renamed column breaks the feature pipeline or silently turns into nulls; a retyped
    one can change values (truncated numbers, timestamps read as strings) without an error.

    Severity follows the impact on the model, from column-level lineage: a removed or
    renamed column that feeds the model is critical, a retyped one high; a column that
    lineage proves unused is low; when lineage cannot tell, medium. Added columns are low.
    A column is judged under its baseline name (the old name of a renamed column), the one
    the model was trained on; a column proven unused is still reported (low), as an added
    one is, because the schema no longer is the one the model was trained on.

    How to fix: restore or alias the column upstream, or update the feature pipeline to
    the new schema and retrain. Once the model works with the new schema, accept it as the
    new baseline so the drift stops being reported.
    """

    name: ClassVar[str] = "schema_drift"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="schema_drift",
        title="Schema drift",
        tag="urn:li:tag:mlcopilot-schema-drift",
        tag_description="An upstream schema changed since a model was trained on it.",
        incident_type="DATA_SCHEMA",
        why=(
            "The upstream schema no longer matches what these models were trained on: a "
            "feature pipeline may now read nulls, defaults or the wrong column without "
            "failing."
        ),
        action=(
            "Check whether the model's feature pipeline still reads this column correctly. "
            "If the change is intended, update the pipeline and retrain, then run "
            "`mlcopilot baseline accept MODEL` to accept the new schema."
        ),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = SchemaDriftConfig

    def __init__(self, config: SchemaDriftConfig) -> None:
        self.config = config

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """Findings for each column that differs from the baseline schema."""
        if node.entity_type is not EntityType.DATASET:
            return _NOTHING
        if not node.exists:
            return NOT_IN_CATALOG
        if node.schema is None:
            return CheckOutcome(unknown="no schemaMetadata")
        if ctx.baseline is None:
            return CheckOutcome(unknown="no baseline schema yet")
        if ctx.baseline.fields == node.schema.fields and _unique_paths(node.schema):
            return _NOTHING  # the schema trained on, field for field (what a first scan keeps)

        before = ctx.baseline.by_path()
        after = node.schema.by_path()
        removed = [f for path, f in before.items() if path not in after]
        added = [f for path, f in after.items() if path not in before]
        platform = platform_of(node.urn)
        renames = self._renames(removed, added, platform)
        renamed_old = {r.old.path for r in renames}
        renamed_new = {r.new.path for r in renames}

        findings: list[Finding] = []
        for old in ctx.baseline.fields:
            if old.path in renamed_old:
                rename = next(r for r in renames if r.old.path == old.path)
                findings.append(self._renamed(node, ctx, rename, platform))
            elif old.path not in after:
                findings.append(self._removed(node, ctx, old))
            elif not same_type(old, after[old.path], platform):
                findings.append(self._type_changed(node, ctx, old, after[old.path]))
        for new in node.schema.fields:
            if new.path not in before and new.path not in renamed_new:
                findings.append(self._added(node, ctx, new))
        return CheckOutcome(findings=tuple(findings))

    def _renames(
        self, removed: list[SchemaField], added: list[SchemaField], platform: str | None
    ) -> list[_Rename]:
        """The likely renames among removed × added columns, best-scoring pairs first."""
        candidates = sorted(
            (
                _Rename(old, new, _rename_score(old, new, platform))
                for old in removed
                for new in added
            ),
            key=lambda r: (-r.confidence, r.old.position, r.new.position, r.old.path, r.new.path),
        )
        chosen: list[_Rename] = []
        used_old: set[str] = set()
        used_new: set[str] = set()
        for pair in candidates:
            if pair.confidence < self.config.rename_confidence:
                break
            if pair.old.path in used_old or pair.new.path in used_new:
                continue
            chosen.append(pair)
            used_old.add(pair.old.path)
            used_new.add(pair.new.path)
        return chosen

    def _removed(self, node: Node, ctx: CheckContext, old: SchemaField) -> Finding:
        feeds = ctx.usage.feeds(old.path)
        return ctx.finding(
            self.name,
            _severity("removed", feeds),
            node,
            old.path,
            f"column `{old.path}` ({_describe_type(old)}) was removed; {_impact(feeds)}",
            change="removed",
            evidence=_evidence(old, None, feeds),
        )

    def _renamed(
        self, node: Node, ctx: CheckContext, rename: _Rename, platform: str | None
    ) -> Finding:
        old, new = rename.old, rename.new
        feeds = ctx.usage.feeds(old.path)
        retyped = ""
        if not same_type(old, new, platform):
            retyped = f" and its type changed from {_type_change(old, new)}"
        # Judged by the old name, the one the model was trained on. Lineage that already reads
        # the new name is worth saying: the pipeline was moved to it.
        moved = ""
        if feeds is not True and ctx.usage.feeds(new.path) is True:
            moved = f"; under its new name `{new.path}` it feeds the model"
        message = (
            f"column `{old.path}` was renamed to `{new.path}` "
            f"(confidence {rename.confidence:.2f}){retyped}; {_impact(feeds)}{moved}"
        )
        evidence = _evidence(old, new, feeds)
        evidence["confidence"] = round(rename.confidence, 2)
        return ctx.finding(
            self.name,
            _severity("renamed", feeds),
            node,
            new.path,
            message,
            change="renamed",
            previous_field=old.path,
            evidence=evidence,
        )

    def _type_changed(
        self, node: Node, ctx: CheckContext, old: SchemaField, new: SchemaField
    ) -> Finding:
        feeds = ctx.usage.feeds(old.path)
        message = (
            f"column `{new.path}` changed type from {_type_change(old, new)}; {_impact(feeds)}"
        )
        return ctx.finding(
            self.name,
            _severity("type_changed", feeds),
            node,
            new.path,
            message,
            change="type_changed",
            evidence=_evidence(old, new, feeds),
        )

    def _added(self, node: Node, ctx: CheckContext, new: SchemaField) -> Finding:
        return ctx.finding(
            self.name,
            Severity.LOW,
            node,
            new.path,
            f"column `{new.path}` ({_describe_type(new)}) was added since the baseline",
            change="added",
            evidence=_evidence(None, new, None),
        )


def _unique_paths(schema: Schema) -> bool:
    """Whether no two fields share a path (else the comparison by path has more to say)."""
    last = _LAST_UNIQUE[0]
    if last is not None and last[0] is schema:
        return last[1]  # nodes of one table layout share the schema object: asked once
    unique = len({f.path for f in schema.fields}) == len(schema.fields)
    _LAST_UNIQUE[0] = (schema, unique)
    return unique


_LAST_UNIQUE: list[tuple[Schema, bool] | None] = [None]
"""The last schema :func:`_unique_paths` was asked about, and its answer."""


def _rename_score(old: SchemaField, new: SchemaField, platform: str | None) -> float:
    """How likely, from 0 to 1, that ``new`` is ``old`` under another name."""
    score = 0.0
    if old.type == new.type:
        score += _WEIGHT_TYPE
    if old.native_type and new.native_type and same_type(old, new, platform):
        score += _WEIGHT_NATIVE_TYPE
    if old.position == new.position:
        score += _WEIGHT_POSITION
    if old.description.strip() and old.description.strip() == new.description.strip():
        score += _WEIGHT_DESCRIPTION
    similarity = difflib.SequenceMatcher(
        None, _plain_name(old.path).lower(), _plain_name(new.path).lower()
    ).ratio()
    return score + _WEIGHT_NAME * similarity


def _plain_name(path: str) -> str:
    """A field path without DataHub's v2 ``[version=2.0].[type=...]`` annotations."""
    return ".".join(part for part in path.split(".") if not part.startswith("["))


def _severity(kind: ChangeKind, feeds: bool | None) -> Severity:
    """The severity of a change to a column, from whether the column feeds the model."""
    if feeds is None:
        return Severity.MEDIUM
    if not feeds:
        return Severity.LOW
    return Severity.HIGH if kind == "type_changed" else Severity.CRITICAL


def _impact(feeds: bool | None) -> str:
    """The end of a message: what lineage says about the column reaching the model."""
    if feeds is None:
        return "lineage cannot tell whether it feeds the model"
    if feeds:
        return "it feeds the model"
    return "column-level lineage shows it does not feed the model"


def _describe_type(field: SchemaField) -> str:
    """The native type users know (``bigint``), else the logical one (``NumberType``)."""
    return field.native_type or field.type


def _type_change(old: SchemaField, new: SchemaField) -> str:
    """``bigint to varchar``; the logical types when the native ones do not show the change."""
    if old.native_type and new.native_type and old.native_type != new.native_type:
        return f"{old.native_type} to {new.native_type}"
    return f"{old.type} to {new.type}"


def _evidence(
    old: SchemaField | None, new: SchemaField | None, feeds: bool | None
) -> dict[str, JSON]:
    evidence: dict[str, JSON] = {}
    if old is not None:
        evidence["baseline_type"] = old.type
        evidence["baseline_native_type"] = old.native_type
        evidence["baseline_position"] = old.position
    if new is not None:
        evidence["current_type"] = new.type
        evidence["current_native_type"] = new.native_type
        evidence["current_position"] = new.position
    if old is not None:
        evidence["feeds_model"] = {True: "yes", False: "no", None: "unknown"}[feeds]
    return evidence
