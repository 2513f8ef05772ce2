"""What DataHub's ``datasetProfile`` timeseries aspect says about a dataset's data.

The types keep the statistics as DataHub holds them: ``min``, ``max``, ``mean``, ``median``,
``stdev`` and the quantile points are *strings* in the aspect (``DatasetFieldProfile.pdl``);
they are parsed where they are compared (:mod:`mlcopilot.checks.profile_stats`), so a stored
baseline round-trips exactly. :func:`profile_from_json` reads the aspect's JSON (DataHub Lite,
REST, and GraphQL's ``Dataset.datasetProfiles``, which share the field names);
:func:`profile_to_json` writes the same shape back, which is how the state store keeps a
baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

LOW_P = 0.05
"""The lowest quantile profile drift reads (below it, a few extreme rows decide)."""
HIGH_P = 0.95
"""The highest quantile profile drift reads."""
MIN_QUANTILES = 3
"""Quantile points in ``[LOW_P, HIGH_P]`` a column profile needs for its distribution."""
_P_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class FieldProfile:
    """One column's statistics in a profile (DataHub's ``DatasetFieldProfile``).

    None means the profile does not say. ``unique_proportion`` is DataHub's: distinct values
    over non-null rows; ``null_proportion`` is null rows over all rows. ``quantiles`` are the
    ``(quantile, value)`` pairs as written (``("0.25", "17.5")``), in the order given.
    """

    path: str
    unique_count: int | None = None
    unique_proportion: float | None = None
    null_count: int | None = None
    null_proportion: float | None = None
    min: str | None = None
    max: str | None = None
    mean: str | None = None
    median: str | None = None
    stdev: str | None = None
    quantiles: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DatasetProfile:
    """One ``datasetProfile`` event: table-level counts and the profiled columns.

    ``at`` is the event's ``timestampMillis`` (when the profile was taken), which is what
    orders profiles; never the order they were written in.
    """

    at: datetime
    row_count: int | None = None
    column_count: int | None = None
    size_in_bytes: int | None = None
    fields: tuple[FieldProfile, ...] = ()

    def field(self, path: str) -> FieldProfile | None:
        """The profile of column ``path``, or None when this profile has none."""
        for candidate in self.fields:
            if candidate.path == path:
                return candidate
        return None


def profile_from_json(
    value: Mapping[str, Any], simplify: Callable[[str], str] | None = None
) -> DatasetProfile | None:
    """A profile from the aspect's JSON; None when it has no usable ``timestampMillis``.

    Args:
        value: The ``datasetProfile`` JSON (or a GraphQL ``DatasetProfile`` object).
        simplify: Applied to each ``fieldPath`` (the catalog passes DataHub's v2-path
            simplification, so profile columns match schema columns).
    """
    stamp = _int(value.get("timestampMillis"))
    if stamp is None:
        return None
    fields: list[FieldProfile] = []
    seen: set[str] = set()
    for raw in value.get("fieldProfiles") or ():
        if not isinstance(raw, Mapping) or not isinstance(raw.get("fieldPath"), str):
            continue
        path = simplify(raw["fieldPath"]) if simplify is not None else raw["fieldPath"]
        if path in seen:  # two v2 paths simplifying alike: the first wins, as in schemas
            continue
        seen.add(path)
        fields.append(
            FieldProfile(
                path=path,
                unique_count=_int(raw.get("uniqueCount")),
                unique_proportion=_float(raw.get("uniqueProportion")),
                null_count=_int(raw.get("nullCount")),
                null_proportion=_float(raw.get("nullProportion")),
                min=_text(raw.get("min")),
                max=_text(raw.get("max")),
                mean=_text(raw.get("mean")),
                median=_text(raw.get("median")),
                stdev=_text(raw.get("stdev")),
                quantiles=tuple(
                    (str(q["quantile"]), str(q["value"]))
                    for q in raw.get("quantiles") or ()
                    if isinstance(q, Mapping)
                    and q.get("quantile") is not None
                    and q.get("value") is not None
                ),
            )
        )
    return DatasetProfile(
        at=_EPOCH + timedelta(milliseconds=stamp),
        row_count=_int(value.get("rowCount")),
        column_count=_int(value.get("columnCount")),
        size_in_bytes=_int(value.get("sizeInBytes")),
        fields=tuple(fields),
    )


def profile_to_json(profile: DatasetProfile) -> dict[str, Any]:
    """The profile in the aspect's own JSON shape (what :func:`profile_from_json` reads)."""
    out: dict[str, Any] = {"timestampMillis": profile_millis(profile)}
    for key, number in (
        ("rowCount", profile.row_count),
        ("columnCount", profile.column_count),
        ("sizeInBytes", profile.size_in_bytes),
    ):
        if number is not None:
            out[key] = number
    out["fieldProfiles"] = [_field_json(f) for f in profile.fields]
    return out


def profile_millis(profile: DatasetProfile) -> int:
    """The profile's ``timestampMillis``."""
    return (profile.at - _EPOCH) // timedelta(milliseconds=1)


FIELD_STATISTICS: tuple[tuple[str, str], ...] = (
    ("unique_count", "uniqueCount"),
    ("unique_proportion", "uniqueProportion"),
    ("null_count", "nullCount"),
    ("null_proportion", "nullProportion"),
    ("min", "min"),
    ("max", "max"),
    ("mean", "mean"),
    ("median", "median"),
    ("stdev", "stdev"),
)
"""A column profile's scalar statistics: our attribute name and DataHub's field name."""


def field_statistics(field: FieldProfile) -> dict[str, int | float | str]:
    """The column's scalar statistics that are set, by attribute name, as DataHub wrote them."""
    values = ((name, getattr(field, name)) for name, _ in FIELD_STATISTICS)
    return {name: value for name, value in values if value is not None}


def _field_json(field: FieldProfile) -> dict[str, Any]:
    out: dict[str, Any] = {"fieldPath": field.path}
    datahub = dict(FIELD_STATISTICS)
    out.update((datahub[name], value) for name, value in field_statistics(field).items())
    if field.quantiles:
        out["quantiles"] = [{"quantile": q, "value": v} for q, v in field.quantiles]
    return out


def _unwrap(value: object) -> object:
    """The value of a one-key Avro union wrapper (``{"long": 5}``), else ``value``."""
    if isinstance(value, Mapping) and len(value) == 1:
        return next(iter(value.values()))
    return value


def _int(value: object) -> int | None:
    value = _unwrap(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


def _float(value: object) -> float | None:
    value = _unwrap(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text(value: object) -> str | None:
    value = _unwrap(value)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # a producer that wrote a number where DataHub has a string
    return None


def statistic(text: str | None) -> float | None:
    """A statistic DataHub wrote as a string, as a finite float; None when it is not one.

    ``"12.5"`` and ``"1e3"`` parse; ``"NaN"``, ``"inf"``, ``""``, ``"None"`` and dates
    (``"2021-03-01"``, a date column's min) do not.
    """
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def interior_quantiles(profile: FieldProfile) -> list[tuple[float, float]]:
    """The ``(p, value)`` points with ``p`` in ``[LOW_P, HIGH_P]``, by ``p``; unparsable left out.

    Of two points at the same ``p`` the first written is kept.
    """
    points: dict[float, float] = {}
    for quantile, value in profile.quantiles:
        p, x = statistic(quantile), statistic(value)
        if p is None or x is None or not (LOW_P - _P_EPS <= p <= HIGH_P + _P_EPS):
            continue
        points.setdefault(min(max(p, LOW_P), HIGH_P), x)
    return sorted(points.items())


def has_distribution(profile: FieldProfile) -> bool:
    """Whether the column profile has enough quantiles for the distribution distance."""
    return len(interior_quantiles(profile)) >= MIN_QUANTILES
