"""Long ``IN (...)`` lists in slices: a watcher scans hundreds of models at once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TypeVar

T = TypeVar("T")

IN_CHUNK = 500
"""Values bound per ``IN`` list: well under SQLite's and PostgreSQL's limits on parameters."""

WRITE_CHUNK = 5_000
"""Rows written per statement where a scan writes many: their parameters are made a part at a
time, not all at once (a first scan of an estate saves a million baselines)."""


def chunks(values: Sequence[T], size: int = IN_CHUNK) -> Iterator[list[T]]:
    """``values`` in order, ``size`` at a time."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def batches(values: Iterable[T], size: int = WRITE_CHUNK) -> Iterator[list[T]]:
    """``values`` in order, ``size`` at a time, taken as they come (not listed whole first)."""
    them = iter(values)
    while batch := list(islice(them, size)):
        yield batch
