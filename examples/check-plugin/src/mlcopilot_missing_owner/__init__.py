"""``missing_owner``: an mlcopilot check shipped as its own package, through an entry point."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from mlcopilot.config import PluginConfig
from mlcopilot.model import NOT_IN_CATALOG, CheckInfo, CheckOutcome, EntityType, Node, Severity
from mlcopilot.protocols import CheckContext

__all__ = ["MissingOwner", "MissingOwnerConfig"]


class MissingOwnerConfig(PluginConfig):
    """Settings of the ``missing_owner`` check (``[checks.missing_owner]``)."""

    entity_types: list[EntityType] = Field(
        default_factory=lambda: [EntityType.DATASET, EntityType.ML_FEATURE], min_length=1
    )
    """The upstream entity types that must have an owner (DataHub's names, e.g. ``dataset``,
    ``mlFeature``, ``mlFeatureTable``, ``dataJob``)."""


class MissingOwner:
    """An upstream dataset or feature feeding the model has no owner in DataHub.

    What it flags: each upstream entity of the configured types (by default datasets and
    ML features) that has no `ownership` aspect in DataHub, or one that lists no owners.
    Severity is low: nothing is broken yet. Entities that lineage references but the
    catalog does not hold are reported as unknown.

    Why it matters: when the data a model depends on breaks, somebody has to be told and
    fix it. Without an owner the incident has nobody to go to, and a deprecation or schema
    change upstream is decided by nobody who knows the model needs it.

    How to fix: add an owner (a user or a group) to the entity in DataHub, on its Owners
    panel or in the ingestion recipe. Configure which entity types need one with
    `[checks.missing_owner] entity_types = ["dataset", "mlFeature", "mlFeatureTable"]`.
    """

    name: ClassVar[str] = "missing_owner"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="missing_owner",
        title="Missing owner",
        tag="urn:li:tag:mlcopilot-missing-owner",
        tag_description="An upstream dataset or feature of an ML model has no owner.",
        incident_type="CUSTOM",
        custom_incident_type="MISSING_OWNER",
        why=(
            "Nobody owns data these models depend on: when it breaks or changes, there is "
            "no one to tell and no one to fix it."
        ),
        action=(
            "Add an owner (a user or a group) to the entity in DataHub, on its Owners panel "
            "or in the ingestion recipe that produces it."
        ),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = MissingOwnerConfig

    def __init__(self, config: MissingOwnerConfig) -> None:
        self.config = config
        self._types = frozenset(config.entity_types)

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """A finding when the node is of a covered type and nobody owns it."""
        if node.entity_type not in self._types or node.urn == ctx.model.urn:
            return CheckOutcome()
        if not node.exists:
            return NOT_IN_CATALOG
        if node.owners:
            return CheckOutcome()
        # Every backend reads `ownership`, so no aspect means DataHub records no owner.
        if node.owners is None:
            message, ownership = "has no owner in DataHub (no ownership aspect)", "absent"
        else:
            message, ownership = "has no owner in DataHub (its ownership lists nobody)", "empty"
        finding = ctx.finding(
            self.name,
            Severity.LOW,
            node,
            None,
            f"{node.entity_type.value} `{node.name}` {message} but feeds the model",
            evidence={"ownership": ownership},
        )
        return CheckOutcome(findings=(finding,))
