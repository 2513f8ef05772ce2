"""PII exposure: personal or sensitive data reaching a model that has no justification for it.

Classification arrives in many spellings: DataHub's connectors write ``key:value`` tags
(Snowflake's ``<db>.<schema>.security:pii``, Lake Formation's ``DataClassification:Sensitive``,
BigID's ``bigid.Classification:PII``, dbt's ``dbt:pii``), glossary terms in hierarchies
(``Classification.PII``), the terms dbt's meta mapping adds (``pii``) and the info types
DataHub's own classifier names (``Email_Address``). Markers are therefore patterns, compared
the way :func:`normalized` and :class:`Marker` describe, each at a level of a sensitivity
ranking that sets the finding's severity.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    JSON,
    NOT_IN_CATALOG,
    CheckInfo,
    CheckOutcome,
    EntityType,
    Finding,
    Node,
    SchemaField,
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

DEFAULT_RANKING = ("PII", "Sensitive", "Confidential")
"""The sensitivity levels, most sensitive first, unless the config replaces them."""

# DataHub's classifier (datahub-classify, `classification:` in a source recipe) names each
# column's glossary term after the info type it found, unless `info_type_to_term` renames it.
# Swift_Code is left out: it identifies a bank, not a person.
_CLASSIFIER_INFO_TYPES = (
    "Email_Address",
    "Phone_Number",
    "Street_Address",
    "Full_Name",
    "Age",
    "Gender",
    "Credit_Debit_Card_Number",
    "IBAN",
    "US_Social_Security_Number",
    "US_Driving_License_Number",
    "Vehicle_Identification_Number",
    "IP_Address_v4",
    "IP_Address_v6",
)

DEFAULT_TAGS: Mapping[str, tuple[str, ...]] = {
    "PII": (
        "PII",  # also dbt:pii, security:pii, DataClassification:PII, bigid.Classification:PII
        "security:pii",  # also Security_PII, which has no qualifier to end at
        "pii:true",  # a Snowflake tag PII with value TRUE: <db>.<schema>.pii:true
        "pii:yes",
        "has_pii",  # dbt meta mapping's own example
        "contains_pii",
        "privacy_category:identifier",  # Snowflake's classification: SNOWFLAKE.CORE.*
        "privacy_category:quasi_identifier",
    ),
    "Sensitive": ("Sensitive", "HighlyConfidential", "sensitivity:high"),
    "Confidential": ("Confidential",),
}
"""The tag patterns of each level that mark data unless the config replaces them."""
DEFAULT_TERMS: Mapping[str, tuple[str, ...]] = {
    "PII": ("PII", *_CLASSIFIER_INFO_TYPES),  # PII: also Classification.PII and dbt's pii
    "Sensitive": ("Sensitive", "HighlyConfidential"),
    "Confidential": ("Confidential",),
}
"""The glossary term patterns of each level that mark data unless the config replaces them."""

_SEVERITY_BY_RANK = (Severity.HIGH, Severity.MEDIUM, Severity.LOW)
_WORD = re.compile(r"[\W_]+")
_QUALIFIER = re.compile(r"[.:/]")
_WILDCARD = re.compile(r"([*?])")

Markers = list[str] | dict[str, list[str]]
"""Patterns: a list (at the most sensitive level) or a table of lists by level."""


_NOTHING = CheckOutcome()
"""Nothing found, nothing unknown: one object for every node a check has nothing on."""


def normalized(name: str) -> str:
    """``name`` as markers compare it: percent-decoded, case-folded, without separators.

    Every character that is not a letter or digit is dropped, so ``security:pii``,
    ``Security_PII``, ``SECURITY.PII`` and ``security pii`` are one name, as are
    ``DataClassification`` (Lake Formation) and ``dataclassification`` (Snowflake, which
    lower-cases its urns), and ``Email_Address`` and BigID's ``Email Address``.
    """
    return _WORD.sub("", urllib.parse.unquote(name).casefold())


@dataclass(frozen=True, slots=True)
class Marker:
    """One configured pattern: a tag or term name matching it marks data at ``level``.

    The pattern is compared with separators and case ignored (:func:`normalized`); ``*``
    matches any run of characters and ``?`` one. It matches a name as a whole or any tail of
    it that starts after a ``.``, ``:`` or ``/``: so ``security:pii`` also matches Snowflake's
    qualified ``prod.governance.security:pii``, ``PII`` matches ``Classification.PII`` and
    ``bigid.Classification:PII``, and ``Classification.*`` every term under Classification.
    A tail never starts inside a word: ``PII`` does not match ``no_pii``.
    """

    pattern: str
    level: int
    """The level's index in the ranking (0 = most sensitive)."""

    def compiled(self) -> re.Pattern[str]:
        """The pattern as a regular expression over normalized names."""
        parts = _WILDCARD.split(self.pattern.casefold())
        regex = "".join(
            ".*" if part == "*" else "." if part == "?" else re.escape(normalized(part))
            for part in parts
        )
        return re.compile(regex)


def _tails(name: str) -> list[str]:
    """The normalized name and each normalized tail after a qualifier (``.``, ``:``, ``/``)."""
    decoded = urllib.parse.unquote(name)
    tails = [normalized(decoded)]
    tails += [normalized(decoded[m.end() :]) for m in _QUALIFIER.finditer(decoded)]
    return [t for t in tails if t]


class PiiExposureConfig(PluginConfig):
    """Settings of the ``pii_exposure`` check (``[checks.pii_exposure]``)."""

    tags: Markers = Field(default_factory=list)
    """More tag patterns (e.g. ``security:restricted``, ``dbt:gdpr*``) or full tag urns: a
    list marks data at the most sensitive level, a table lists patterns by level
    (``[checks.pii_exposure.tags] Sensitive = ["finance:salary"]``)."""
    terms: Markers = Field(default_factory=list)
    """More glossary term patterns (``Classification.Restricted``, ``PersonalData.*``) or full
    term urns (for terms whose urn is an id, such as BigID's), as ``tags``."""
    replace_defaults: bool = False
    """True: only ``tags`` and ``terms`` mark data, not the built-in patterns."""
    ranking: list[str] = Field(default_factory=lambda: list(DEFAULT_RANKING), min_length=1)
    """The sensitivity levels, most sensitive first: data at the first level is high
    severity where it reaches the model, at the second medium, below that low. A built-in
    pattern of a level left out of the ranking marks nothing."""

    @field_validator("ranking")
    @classmethod
    def _distinct_levels(cls, ranking: list[str]) -> list[str]:
        seen: set[str] = set()
        for level in ranking:
            key = normalized(level)
            if not key:
                raise ValueError(f"ranking level {level!r} has no letters or digits")
            if key in seen:
                raise ValueError(f"ranking names level {level!r} twice")
            seen.add(key)
        return ranking

    @model_validator(mode="after")
    def _finds_something(self) -> PiiExposureConfig:
        for name, markers in (("tags", self.tags), ("terms", self.terms)):
            if isinstance(markers, dict):
                for level in markers:
                    if self._rank(level) is None:
                        raise ValueError(
                            f"{name} names level {level!r}, which is not in the ranking "
                            f"{self.ranking}"
                        )
        # Replacing the defaults with nothing would report every model as clean, forever.
        if self.replace_defaults and not (_patterns(self.tags) or _patterns(self.terms)):
            raise ValueError("replace_defaults = true needs at least one of tags or terms")
        return self

    def tag_markers(self) -> tuple[Marker, ...]:
        """Every tag pattern that marks data under this config, with its level."""
        return self._markers(DEFAULT_TAGS, self.tags)

    def term_markers(self) -> tuple[Marker, ...]:
        """Every glossary term pattern that marks data under this config, with its level."""
        return self._markers(DEFAULT_TERMS, self.terms)

    def _markers(self, defaults: Mapping[str, Sequence[str]], own: Markers) -> tuple[Marker, ...]:
        by_level: dict[str, Sequence[str]] = {} if self.replace_defaults else dict(defaults)
        found: list[Marker] = []
        for level, patterns in by_level.items():
            rank = self._rank(level)
            if rank is not None:
                found += [Marker(p, rank) for p in patterns]
        configured = {self.ranking[0]: own} if isinstance(own, list) else own
        for level, patterns in configured.items():
            rank = self._rank(level)
            assert rank is not None  # the validator refused any other
            found += [Marker(_strip(p), rank) for p in patterns]
        return tuple(found)

    def _rank(self, level: str) -> int | None:
        key = normalized(level)
        return next((i for i, name in enumerate(self.ranking) if normalized(name) == key), None)


def _patterns(markers: Markers) -> list[str]:
    return markers if isinstance(markers, list) else [p for ps in markers.values() for p in ps]


class _Matcher:
    """Which level, if any, the names of one prefix (tags or terms) are marked at."""

    def __init__(self, prefix: str, markers: Iterable[Marker]) -> None:
        self._prefix = prefix
        self._markers = [(m.compiled(), m.level) for m in markers]
        self._known: dict[Urn, int | None] = {}  # a catalog reuses few tags and terms

    def level(self, urn: Urn) -> int | None:
        """The most sensitive level ``urn`` is marked at; None when it marks nothing."""
        if urn in self._known:
            return self._known[urn]
        level = None
        if urn.startswith(self._prefix):
            tails = _tails(urn[len(self._prefix) :])
            levels = [
                rank
                for pattern, rank in self._markers
                if any(pattern.fullmatch(tail) for tail in tails)
            ]
            level = min(levels, default=None)
        self._known[urn] = level
        return level


class PiiExposure:
    """Data classified as PII or sensitive reaches the model, which has no justification for it.

    What it flags: upstream datasets, ML features, feature tables and primary keys that
    carry a classification tag or glossary term, on the entity itself or on one of its
    columns, when the model has no PII justification. A marker is a pattern at a level of
    the sensitivity ranking (by default PII > Sensitive > Confidential).

    Built-in markers, covering what DataHub's connectors write:

    - tags: PII: `PII` (so also `dbt:pii`, `security:pii`, `DataClassification:PII`,
      `bigid.Classification:PII`), `security:pii`, `pii:true`, `pii:yes`, `has_pii`,
      `contains_pii`, `privacy_category:identifier` and `:quasi_identifier` (Snowflake's
      classification); Sensitive: `Sensitive` (Lake Formation's
      `DataClassification:Sensitive`, BigID's `bigid.DataClass:Sensitive`),
      `HighlyConfidential`, `sensitivity:high`; Confidential: `Confidential`;
    - glossary terms: PII: `PII` (so `Classification.PII` and dbt meta's `pii`) and the info
      types DataHub's classifier assigns (`Email_Address`, `Phone_Number`, `Street_Address`,
      `Full_Name`, `Age`, `Gender`, `Credit_Debit_Card_Number`, `IBAN`,
      `US_Social_Security_Number`, `US_Driving_License_Number`,
      `Vehicle_Identification_Number`, `IP_Address_v4`, `IP_Address_v6`); Sensitive:
      `Sensitive`, `HighlyConfidential`; Confidential: `Confidential`.

    Matching ignores case and separators (`security:pii` is `Security_PII` is
    `SECURITY.PII`), and a pattern matches a qualified name's tail after a `.`, `:` or `/`
    (`security:pii` matches Snowflake's `prod.governance.security:pii`; `PII` matches
    `Classification.PII`, not `no_pii`). `*` and `?` are wildcards (`Classification.*`).
    A structured property counts as the tag `name:value` (Snowflake ingestion with
    `extract_tags_as_structured_properties` writes `snowflake.<db>.<schema>.security` =
    `pii`).
    `[checks.pii_exposure]` adds patterns (`tags`, `terms`: a list for the most sensitive
    level, or a table by level; full urns work too), replaces the built-in ones
    (`replace_defaults = true`) or the ranking (`ranking = ["PII", "Sensitive"]`).

    - A marked entity is consumed by the model's lineage as a whole: high severity at the
      first level of the ranking, medium at the second, low below.
    - A marked column that column-level lineage shows feeding the model is rated the same;
      one lineage cannot tell about is one step lower (it may reach the model); one
      column-level lineage proves does not reach the model is not reported. PII propagates
      only along column-level lineage where that exists.
    - Of a dataset without schema metadata, the columns `editableSchemaMetadata`
      annotates (BigID classifies such datasets) are checked, and the dataset is reported
      as unknown for the rest.

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
        self._ranking = tuple(config.ranking)
        self._tags = _Matcher(_TAG_PREFIX, config.tag_markers())
        self._terms = _Matcher(_TERM_PREFIX, config.term_markers())

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """Findings for the node and each of its columns classified as PII."""
        if node.entity_type not in _APPLIES_TO:
            return _NOTHING
        justified, unjustified = _justification(ctx.model, ctx.now)
        if justified:
            return _NOTHING
        if not node.exists:
            return NOT_IN_CATALOG

        findings: list[Finding] = []
        marked = self._marked(node.tags, node.terms)
        properties = self._marked_properties(node)
        if marked is not None or properties:
            level, tags, terms = marked if marked is not None else (len(self._ranking), [], [])
            level = min([level, *(rank for rank, _ in properties)])
            named = [text for _, text in properties]
            message = (
                f"{_KIND[node.entity_type]} `{node.name}` {_classification(tags, terms, named)} "
                f"(classified {self._ranking[level]}) and is upstream of the model; {unjustified}"
            )
            evidence: dict[str, JSON] = {
                "classification": self._ranking[level],
                "tags": tags,
                "terms": terms,
            }
            if named:
                evidence["properties"] = named
            findings.append(
                ctx.finding(self.name, _severity(level), node, None, message, evidence=evidence)
            )

        columns: Sequence[SchemaField] = ()
        unknown = None
        if node.schema is not None:
            columns = node.schema.fields
        elif node.entity_type is EntityType.DATASET:
            columns = node.annotated_columns
            unknown = (
                "no schemaMetadata: only the columns other aspects annotate were checked"
                if columns
                else "no schemaMetadata: field-level PII cannot be checked"
            )
        findings += self._columns(node, columns, ctx, unjustified)
        if not findings and unknown is None:
            return _NOTHING
        return CheckOutcome(findings=tuple(findings), unknown=unknown)

    def _columns(
        self, node: Node, columns: Iterable[SchemaField], ctx: CheckContext, unjustified: str
    ) -> list[Finding]:
        findings: list[Finding] = []
        for column in columns:
            if not (column.tags or column.terms):
                continue  # most columns: no lookup at all
            marked = self._marked(column.tags, column.terms)
            if marked is None:
                continue
            feeds = ctx.usage.feeds(column.path)
            if feeds is False:
                continue
            level, tags, terms = marked
            reach = "feeds the model" if feeds else "may reach the model (lineage cannot tell)"
            message = (
                f"column `{column.path}` {_classification(tags, terms)} "
                f"(classified {self._ranking[level]}) and {reach}; {unjustified}"
            )
            findings.append(
                ctx.finding(
                    self.name,
                    _severity(level if feeds else level + 1),
                    node,
                    column.path,
                    message,
                    evidence={
                        "classification": self._ranking[level],
                        "tags": tags,
                        "terms": terms,
                        "feeds_model": "yes" if feeds else "unknown",
                    },
                )
            )
        return findings

    def _marked_properties(self, node: Node) -> list[tuple[int, str]]:
        """Structured properties whose ``name:value`` a tag pattern marks, as ``name = value``.

        Snowflake ingestion with ``extract_tags_as_structured_properties`` writes a tag
        ``security`` = ``pii`` as the property ``snowflake.<db>.<schema>.security`` instead.
        """
        found: list[tuple[int, str]] = []
        if not node.structured_properties:
            return found
        for name, values in sorted(node.structured_properties.items()):
            qualified = name.removeprefix(_PROPERTY_PREFIX)
            for value in values:
                if not isinstance(value, str):
                    continue
                level = self._tags.level(f"{_TAG_PREFIX}{qualified}:{value}")
                if level is not None:
                    found.append((level, f"{qualified} = {value}"))
        return found

    def _marked(
        self, tags: Iterable[Urn], terms: Iterable[Urn]
    ) -> tuple[int, list[Urn], list[Urn]] | None:
        """The most sensitive level among ``tags`` and ``terms`` and the marking ones, sorted."""
        if not tags and not terms:
            return None
        tag_levels = {t: self._tags.level(t) for t in tags}
        term_levels = {t: self._terms.level(t) for t in terms}
        levels = [v for v in (*tag_levels.values(), *term_levels.values()) if v is not None]
        if not levels:
            return None
        return (
            min(levels),
            sorted(t for t, v in tag_levels.items() if v is not None),
            sorted(t for t, v in term_levels.items() if v is not None),
        )


def _severity(rank: int) -> Severity:
    """High for the most sensitive level, medium for the next, low for the rest."""
    return _SEVERITY_BY_RANK[min(rank, len(_SEVERITY_BY_RANK) - 1)]


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


def _strip(value: str) -> str:
    """The name in a configured value, which may be a bare name or a full tag or term urn."""
    for prefix in (_TAG_PREFIX, _TERM_PREFIX):
        if value.lower().startswith(prefix.lower()):
            return value[len(prefix) :]
    return value


def _classification(tags: list[Urn], terms: list[Urn], properties: Sequence[str] = ()) -> str:
    """``is tagged PII, Sensitive and has glossary term Classification.Confidential``."""
    parts = []
    if tags:
        parts.append("is tagged " + ", ".join(_display(t[len(_TAG_PREFIX) :]) for t in tags))
    if terms:
        label = "glossary terms" if len(terms) > 1 else "glossary term"
        parts.append(f"has {label} " + ", ".join(_display(t[len(_TERM_PREFIX) :]) for t in terms))
    if properties:
        label = "structured properties" if len(properties) > 1 else "structured property"
        parts.append(f"has {label} " + ", ".join(properties))
    return " and ".join(parts)


def _display(name: str) -> str:
    """A tag or term id as people read it (BigID percent-encodes spaces in its urns)."""
    return urllib.parse.unquote(name)
