"""PII exposure: personal or sensitive data reaching a model that has no justification for it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import ClassVar

from pydantic import Field, model_validator

from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    NOT_IN_CATALOG,
    CheckInfo,
    CheckOutcome,
    EntityType,
    Finding,
    Node,
    Severity,
    Urn,
)
from mlcopilot.protocols import CheckContext

JUSTIFICATION = "io.mlcopilot.piiJustification"
"""The model's structured property whose non-empty value justifies its use of PII."""
JUSTIFICATION_EXPIRES = "io.mlcopilot.piiJustificationExpires"
"""The model's structured property saying when the justification stops counting."""

_TAG_PREFIX = "urn:li:tag:"
_TERM_PREFIX = "urn:li:glossaryTerm:"
_PROPERTY_PREFIX = "urn:li:structuredProperty:"

_APPLIES_TO = frozenset(
    {
        EntityType.DATASET,
        EntityType.ML_FEATURE,
        EntityType.ML_FEATURE_TABLE,
        EntityType.ML_PRIMARY_KEY,
    }
)
_KIND = {
    EntityType.DATASET: "dataset",
    EntityType.ML_FEATURE: "ML feature",
    EntityType.ML_FEATURE_TABLE: "ML feature table",
    EntityType.ML_PRIMARY_KEY: "ML primary key",
}


DEFAULT_TAGS = ("PII", "Sensitive")
"""The tags that mark PII unless the config replaces them."""
DEFAULT_TERMS = (
    "Classification.PII",
    "Classification.Sensitive",
    "Classification.Confidential",
    "Classification.HighlyConfidential",
)
"""The glossary terms that mark PII unless the config replaces them."""


class PiiExposureConfig(PluginConfig):
    """Settings of the ``pii_exposure`` check (``[checks.pii_exposure]``)."""

    tags: list[str] = Field(default_factory=list)
    """More tag names (as DataHub shows them, e.g. ``security:pii``) or full tag urns that
    mark PII; matched case-insensitively."""
    terms: list[str] = Field(default_factory=list)
    """More glossary term names (e.g. ``Classification.Restricted``) or full term urns."""
    replace_defaults: bool = False
    """True: only ``tags`` and ``terms`` mark PII, not the built-in ones."""

    @model_validator(mode="after")
    def _finds_something(self) -> PiiExposureConfig:
        # Replacing the defaults with nothing would report every model as clean, forever.
        if self.replace_defaults and not (self.tags or self.terms):
            raise ValueError("replace_defaults = true needs at least one of tags or terms")
        return self

    def marker_tags(self) -> tuple[str, ...]:
        """Every tag that marks PII under this config."""
        return tuple(self.tags) if self.replace_defaults else (*DEFAULT_TAGS, *self.tags)

    def marker_terms(self) -> tuple[str, ...]:
        """Every glossary term that marks PII under this config."""
        return tuple(self.terms) if self.replace_defaults else (*DEFAULT_TERMS, *self.terms)


class PiiExposure:
    """Data classified as PII or sensitive reaches the model, which has no justification for it.

    What it flags: upstream datasets, ML features, feature tables and primary keys that
    carry a PII tag (by default `PII` or `Sensitive`) or glossary term (by default
    `Classification.PII`, `.Sensitive`, `.Confidential` or `.HighlyConfidential`),
    on the entity itself or on one of its columns, when the model has no PII justification.
    `[checks.pii_exposure]` adds tags and terms (`tags`, `terms`, by name as DataHub shows
    it or by full urn); with `replace_defaults = true` they replace the built-in ones.

    - A tagged entity is high severity: it is consumed by the model's lineage as a whole.
    - A tagged column is high when column-level lineage shows it feeds the model, medium
      when lineage cannot tell (it may reach the model), and not reported when column-level
      lineage proves it does not reach the model. PII propagates only along column-level
      lineage where that exists.
    - A dataset without schema metadata is reported as unknown: its columns cannot be
      checked.

    Why it matters: a model trained on personal data can memorise and leak it, and using it
    needs a legal basis (consent, purpose limitation, retention) that someone must own.

    How to fix: drop or mask the column upstream of the feature pipeline, or record why the
    model may use it: set the structured property `io.mlcopilot.piiJustification` on the
    model (for example a DPIA reference) and, optionally,
    `io.mlcopilot.piiJustificationExpires` (an ISO-8601 date) to have it reviewed again.
    A justification covers all PII exposure of that model until it expires.
    """

    name: ClassVar[str] = "pii_exposure"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="pii_exposure",
        title="PII exposure",
        tag="urn:li:tag:mlcopilot-pii-exposure",
        tag_description="Personal data reaches an ML model without a justification.",
        incident_type="CUSTOM",
        custom_incident_type="PII_EXPOSURE",
        why=(
            "Personal data reaches these models without a documented justification: a "
            "privacy and compliance risk that travels into every prediction and retraining."
        ),
        action=(
            "Remove the sensitive column from the model's inputs, or document why the model "
            "may use it: set the structured property `io.mlcopilot.piiJustification` on the "
            "model (and optionally `io.mlcopilot.piiJustificationExpires`)."
        ),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = PiiExposureConfig

    def __init__(self, config: PiiExposureConfig) -> None:
        self.config = config
        self._tags = {_strip(value, _TAG_PREFIX).lower() for value in config.marker_tags()}
        self._terms = {_strip(value, _TERM_PREFIX).lower() for value in config.marker_terms()}

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """Findings for the node and each of its columns classified as PII."""
        if node.entity_type not in _APPLIES_TO:
            return CheckOutcome()
        justified, unjustified = _justification(ctx.model, ctx.now)
        if justified:
            return CheckOutcome()
        if not node.exists:
            return NOT_IN_CATALOG

        findings: list[Finding] = []
        tags, terms = self._matching(node.tags, node.terms)
        if tags or terms:
            message = (
                f"{_KIND[node.entity_type]} `{node.name}` {_classification(tags, terms)} "
                f"and is upstream of the model; {unjustified}"
            )
            findings.append(
                ctx.finding(
                    self.name,
                    Severity.HIGH,
                    node,
                    None,
                    message,
                    evidence={"tags": tags, "terms": terms},
                )
            )

        if node.schema is None:
            unknown = None
            if node.entity_type is EntityType.DATASET:
                unknown = "no schemaMetadata: field-level PII cannot be checked"
            return CheckOutcome(findings=tuple(findings), unknown=unknown)

        for column in node.schema.fields:
            tags, terms = self._matching(column.tags, column.terms)
            if not (tags or terms):
                continue
            feeds = ctx.usage.feeds(column.path)
            if feeds is False:
                continue
            reach = "feeds the model" if feeds else "may reach the model (lineage cannot tell)"
            message = (
                f"column `{column.path}` {_classification(tags, terms)} and {reach}; {unjustified}"
            )
            findings.append(
                ctx.finding(
                    self.name,
                    Severity.HIGH if feeds else Severity.MEDIUM,
                    node,
                    column.path,
                    message,
                    evidence={
                        "tags": tags,
                        "terms": terms,
                        "feeds_model": "yes" if feeds else "unknown",
                    },
                )
            )
        return CheckOutcome(findings=tuple(findings))

    def _matching(self, tags: Iterable[Urn], terms: Iterable[Urn]) -> tuple[list[Urn], list[Urn]]:
        """The tag and term urns among ``tags`` and ``terms`` that mark PII, sorted."""
        return (
            sorted(t for t in tags if _is_named(t, _TAG_PREFIX, self._tags)),
            sorted(t for t in terms if _is_named(t, _TERM_PREFIX, self._terms)),
        )


def _justification(model: Node, now: datetime) -> tuple[bool, str]:
    """Whether the model justifies its PII use; if not, the end of a message saying why."""
    reason = _first(model, JUSTIFICATION)
    if reason is None or not str(reason).strip():
        return False, "the model has no PII justification"
    raw_expiry = _first(model, JUSTIFICATION_EXPIRES)
    if raw_expiry is None or (isinstance(raw_expiry, str) and not raw_expiry.strip()):
        return True, ""
    expiry = _parse_instant(raw_expiry)
    if expiry is None:
        # Fail closed: an expiry nobody can read is not a justification anyone reviewed.
        return False, f"the model's PII justification has an unreadable expiry {raw_expiry!r}"
    if expiry < now:
        return False, f"the model's PII justification expired on {_format_instant(expiry)}"
    return True, ""


def _first(node: Node, qualified_name: str) -> str | float | None:
    """The first value of a structured property, keyed by qualified name or by urn."""
    values = node.structured_properties.get(qualified_name)
    if values is None:
        values = node.structured_properties.get(_PROPERTY_PREFIX + qualified_name)
    return values[0] if values else None


def _parse_instant(value: str | float) -> datetime | None:
    """An ISO-8601 date or datetime, or epoch milliseconds, as an aware UTC datetime."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC)
    try:
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _format_instant(when: datetime) -> str:
    """``2026-12-31``, or ``2026-12-31 12:00 UTC`` when the time of day matters."""
    if when.time() == datetime.min.time():
        return date.isoformat(when.date())
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _strip(value: str, prefix: str) -> str:
    """The name in a configured value, which may be a bare name or a full urn."""
    return value[len(prefix) :] if value.lower().startswith(prefix.lower()) else value


def _is_named(urn: Urn, prefix: str, names: set[str]) -> bool:
    """Whether ``urn`` is a ``prefix`` urn whose id is one of ``names`` (lower-cased)."""
    return urn.startswith(prefix) and urn[len(prefix) :].lower() in names


def _classification(tags: list[Urn], terms: list[Urn]) -> str:
    """``is tagged PII, Sensitive and has glossary term Classification.Confidential``."""
    parts = []
    if tags:
        parts.append("is tagged " + ", ".join(t[len(_TAG_PREFIX) :] for t in tags))
    if terms:
        label = "glossary terms" if len(terms) > 1 else "glossary term"
        parts.append(f"has {label} " + ", ".join(t[len(_TERM_PREFIX) :] for t in terms))
    return " and ".join(parts)
