"""Long ``IN (...)`` lists in slices: a watcher scans hundreds of models at once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection

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


def one_of(
    conn: Connection, column: ColumnElement[Any], values: Sequence[Any]
) -> ColumnElement[bool]:
    """``column IN (values...)``; on PostgreSQL ``column = ANY(:values)``, one array parameter.

    An ``IN`` list is a new statement text for every length of it: SQLAlchemy renders its
    parameters at each execution, psycopg converts the new text and PostgreSQL parses it (86
    statements in a profiled batch of a full rescan: benchmarks/RESULTS.md, session 28). One array
    parameter keeps one text, which both cache and psycopg prepares after a few runs.
    PostgreSQL plans ``= ANY`` of an array as it plans ``IN`` (an index scan).
    """
    if conn.dialect.name == "postgresql":
        return column == any_(bindparam(None, list(values), type_=ARRAY(column.type)))
    return column.in_(values)
