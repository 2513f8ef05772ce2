"""Schema baselines in SQL: each distinct schema stored once, the baselines naming its digest.

An estate's models share their upstream datasets: the estate of 10,000 models over 100,000
datasets keeps 1.45 million baselines of at most 100,000 schemas (one a dataset; fewer
where datasets share a shape). Stored in every row, a first scan wrote 1.4 GB of JSON,
mostly repeated, and a second scan fetched all of it back.
Now a baseline is a short row naming its schema's digest (:func:`~mlcopilot.model.schema_digest`),
and a read of stored baselines hands over the scan's current schemas: a stored digest equal
to its dataset's current one is that very schema, neither fetched nor decoded; only the
others' texts are read, each distinct one once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Row,
    Select,
    Text,
    bindparam,
    cast,
    delete,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect

from mlcopilot.errors import StoreError
from mlcopilot.incidents.payload import problems
from mlcopilot.model import (
    Baseline,
    ChosenBaselines,
    CurrentSchemas,
    Schema,
    Urn,
    schema_digest,
    schema_text,
)
from mlcopilot.store import schema as t
from mlcopilot.store.chunks import WRITE_CHUNK, chunks, one_of
from mlcopilot.store.rows import Times, raw_time, require_aware

_SCHEMA: Final = TypeAdapter(Schema)
_NONE: Final = CurrentSchemas({})
_MODELS_A_READ: Final = 50
"""Models whose baseline rows are held at once, to find which schemas to read: an estate's
model has about 150 (500 models' rows held at once were 33 MB of a second scan's walk)."""


def select_baselines() -> Select[Any]:
    """Baselines with their schemas, for reads of a few (:func:`baseline_from` each row)."""
    b, s = t.baselines, t.baseline_schemas
    return select(b.c.model, b.c.dataset, s.c.schema, b.c.source, b.c.captured_at).join_from(
        b, s, b.c.schema_digest == s.c.digest
    )


def baseline_from(row: Row[Any]) -> Baseline:
    """The baseline of a row selected by :func:`select_baselines`."""
    m = row._mapping
    return Baseline(
        model=m["model"],
        dataset=m["dataset"],
        schema=_decoded(m["schema"], m["dataset"], m["model"]),
        source=m["source"],
        captured_at=m["captured_at"],
    )


def read_baselines(
    conn: Connection, models: Sequence[Urn], current: CurrentSchemas | None
) -> dict[Urn, list[Baseline]]:
    """The stored baselines of each of ``models`` (every one a key), by dataset.

    A statement per :data:`_MODELS_A_READ` models for the rows, then one per chunk of the
    digests that are neither a dataset's current schema nor already read.
    """
    b = t.baselines
    found: dict[Urn, list[Baseline]] = {model: [] for model in models}
    stored = _StoredBaselines(conn, current or _NONE)
    columns = (b.c.model, b.c.dataset, b.c.schema_digest, b.c.source, raw_time(b.c.captured_at))
    for chunk in chunks(list(found), _MODELS_A_READ):
        query = select(*columns).where(one_of(conn, b.c.model, chunk))
        query = query.order_by(b.c.model, b.c.dataset)
        for baseline in stored.read(conn.execute(query).all()):
            found[baseline.model].append(baseline)
    return found


class _StoredBaselines:
    """Baselines read back sharing what their rows repeat.

    One schema per digest (the dataset's current one when the digests are equal, or when
    the decoded schemas are: a text stored by an older version may be written differently),
    one string per model and dataset urn, one timestamp per stored value.
    """

    def __init__(self, conn: Connection, current: CurrentSchemas) -> None:
        self._conn = conn
        self._current = current
        self._decoded: dict[str, Schema] = {}
        self._held: dict[tuple[str, Urn], Schema] = {}
        self._urns: dict[str, str] = {}
        self._times = Times(conn.dialect)

    def read(self, rows: Sequence[Sequence[Any]]) -> Iterator[Baseline]:
        """The baselines of ``rows`` (model, dataset, digest, source, raw capture time)."""
        self._fetch(rows)
        share = self._urns.setdefault
        for model, dataset, digest, source, captured in rows:
            model, dataset = share(model, model), share(dataset, dataset)
            at = self._times(captured)
            if at is None:  # pragma: no cover - the column is NOT NULL
                raise StoreError(f"a stored baseline has no capture time ({captured!r})")
            yield Baseline(model, dataset, self._schema(dataset, digest), source, at)

    def _schema(self, dataset: Urn, digest: str) -> Schema:
        if self._current.digest(dataset) == digest:
            now = self._current.get(dataset)
            assert now is not None  # it has a digest
            return now
        held = self._held.get((digest, dataset))
        if held is None:
            decoded = self._decoded[digest]
            now = self._current.get(dataset)
            held = self._held[(digest, dataset)] = now if now == decoded else decoded
        return held

    def _fetch(self, rows: Sequence[Sequence[Any]]) -> None:
        """Read and decode the schemas ``rows`` name that are not their datasets' current."""
        wanted: dict[str, tuple[Urn, Urn]] = {}
        digest_of = self._current.digest
        for model, dataset, digest, *_ in rows:
            if digest not in self._decoded and digest_of(dataset) != digest:
                wanted.setdefault(digest, (dataset, model))
        s = t.baseline_schemas
        text = cast(s.c.schema, Text)  # decoded here: PostgreSQL's json keeps it as written
        for chunk in chunks(list(wanted)):
            for digest, stored in self._conn.execute(
                select(s.c.digest, text).where(one_of(self._conn, s.c.digest, chunk))
            ):
                dataset, model = wanted[digest]
                self._decoded[digest] = _decoded(stored, dataset, model)
        if missing := wanted.keys() - self._decoded.keys():  # pragma: no cover - a foreign key
            raise StoreError(f"stored baselines name schemas not stored: {sorted(missing)}")


def _decoded(stored: Any, dataset: Urn, model: Urn) -> Schema:
    """A stored schema (its JSON text, or the JSON the driver decoded) as a :class:`Schema`."""
    try:
        return _SCHEMA.validate_python(json.loads(stored) if isinstance(stored, str) else stored)
    except (ValueError, ValidationError) as exc:
        why = problems(exc) if isinstance(exc, ValidationError) else f"not JSON: {exc}"
        raise StoreError(
            f"the stored baseline of {dataset} for {model} is unreadable (schema {why}); "
            "accept a new one with `mlcopilot baseline accept`"
        ) from exc


def upsert_baselines(conn: Connection, baselines: ChosenBaselines) -> None:
    """Insert or replace ``baselines``.

    Written :data:`WRITE_CHUNK` rows a statement in (model, dataset) order, after the schemas
    they name (:func:`_store_schemas`).
    """
    if not baselines:
        return
    stmt = _insert(conn, t.baselines)
    stmt = stmt.on_conflict_do_update(
        index_elements=[t.baselines.c.model, t.baselines.c.dataset],
        set_={
            "schema_digest": stmt.excluded.schema_digest,
            "source": stmt.excluded.source,
            "captured_at": stmt.excluded.captured_at,
        },
    )
    digests = _store_schemas(conn, baselines)
    rows: list[dict[str, Any]] = []
    for run in baselines.runs():
        require_aware("captured_at", run.captured_at)
        for dataset, schema in zip(run.datasets, run.schemas, strict=True):
            rows.append(
                {
                    "model": run.model,
                    "dataset": dataset,
                    "schema_digest": digests[id(schema)],
                    "source": run.source,
                    "captured_at": run.captured_at,
                }
            )
            if len(rows) == WRITE_CHUNK:
                conn.execute(stmt, rows)
                rows = []
    if rows:
        conn.execute(stmt, rows)


def _store_schemas(conn: Connection, baselines: ChosenBaselines) -> dict[int, str]:
    """The digest of each schema object ``baselines`` hold, by ``id``, storing each first.

    Each object is encoded once (the models sharing a dataset share its :class:`Schema`) and
    the new texts written :data:`WRITE_CHUNK` a statement in the order of the least dataset
    urn holding them, so that two scans storing the same schemas take them in the same order.
    """
    first: dict[int, tuple[Urn, Schema]] = {}
    for run in baselines.runs():
        for dataset, schema in zip(run.datasets, run.schemas, strict=True):
            held = first.get(id(schema))
            if held is None or dataset < held[0]:
                first[id(schema)] = (dataset, schema)
    s = t.baseline_schemas
    stmt = _insert(conn, s).values(schema=_json_text("text", conn.dialect))
    stmt = stmt.on_conflict_do_nothing(index_elements=[s.c.digest])
    digests: dict[int, str] = {}
    new: list[dict[str, str]] = []
    seen: set[str] = set()
    for _, schema in sorted(first.values(), key=itemgetter(0)):
        text = schema_text(schema)
        digest = digests[id(schema)] = schema_digest(text)
        if digest not in seen:
            seen.add(digest)
            new.append({"digest": digest, "text": text})
            if len(new) == WRITE_CHUNK:
                conn.execute(stmt, new)
                new = []
    if new:
        conn.execute(stmt, new)
    return digests


def replaced_digests(conn: Connection, baselines: ChosenBaselines) -> set[str]:
    """The digests the stored baselines of ``baselines``' (model, dataset) pairs name now."""
    b = t.baselines
    pairs = {(x.model, x.dataset) for x in baselines}
    found: set[str] = set()
    for chunk in chunks(sorted({model for model, _ in pairs})):
        query = select(b.c.model, b.c.dataset, b.c.schema_digest).where(b.c.model.in_(chunk))
        rows = conn.execute(query)
        found.update(digest for model, dataset, digest in rows if (model, dataset) in pairs)
    return found


def drop_unused_schemas(conn: Connection, digests: set[str]) -> None:
    """Delete those of ``digests``' schemas that no baseline names any more."""
    b, s = t.baselines, t.baseline_schemas
    for chunk in chunks(sorted(digests)):
        used = select(b.c.schema_digest).where(b.c.schema_digest.in_(chunk))
        conn.execute(delete(s).where(s.c.digest.in_(chunk), s.c.digest.not_in(used)))


def _insert(conn: Connection, table: Any) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def _json_text(name: str, dialect: Dialect) -> ColumnElement[Any]:
    """A bound parameter giving a JSON column text already encoded.

    PostgreSQL's ``json`` takes text only through a cast; SQLite's column is text (a cast
    there would be to a numeric affinity).
    """
    text = bindparam(name, type_=Text)
    return cast(text, JSON) if dialect.name == "postgresql" else text
