"""Stored rows read back unchanged, and a damaged one says which it is and what is wrong.

``stored/baseline-schema.json`` is a baseline's ``schema`` column exactly as the store wrote
it (SQLite's JSON text) before the schema codec moved to pydantic; the schemas are kept in
``baseline_schemas`` since store migration 0008, and written by hand-made JSON since.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mlcopilot.errors import StoreError
from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.model import Baseline, NotifyPolicy, NotifyRequest, Schema, SchemaField
from mlcopilot.store import SqlStore, open_store
from tests.store.test_store_contract import DS, MODEL, finding

STORED = (Path(__file__).parent / "stored" / "baseline-schema.json").read_text().rstrip("\n")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[SqlStore, Path]]:
    path = tmp_path / "state.db"
    with open_store(f"sqlite:///{path}") as store:
        yield store, path


def _stored_schema(path: Path, text: str | None = None) -> str:
    """The raw ``schema`` text the baseline names, after replacing it with ``text`` if given.

    A text replaced in place no longer matches its digest: as a text written by an older
    version, or damaged, would not.
    """
    named = "digest = (SELECT schema_digest FROM baselines)"
    with sqlite3.connect(path) as conn:
        if text is not None:
            conn.execute(f"UPDATE baseline_schemas SET schema = ? WHERE {named}", (text,))
        (stored,) = conn.execute(f"SELECT schema FROM baseline_schemas WHERE {named}").fetchone()
    return str(stored)


def _save(store: SqlStore, schema: Schema) -> None:
    store.save_baselines(
        [Baseline(model=MODEL, dataset=DS, schema=schema, source="history", captured_at=T0)]
    )


def test_a_stored_baseline_reads_back_and_is_written_again_byte_for_byte(
    db: tuple[SqlStore, Path],
) -> None:
    store, path = db
    _save(store, Schema(fields=()))
    _stored_schema(path, STORED)

    baseline = store.baseline(MODEL, DS)
    assert baseline is not None
    ident, email = baseline.schema.fields
    assert ident == SchemaField(
        path="id",
        type="NUMBER",
        native_type="bigint",
        description="key",
        position=0,
        tags=frozenset({"urn:li:tag:a", "urn:li:tag:b"}),
        terms=frozenset({"urn:li:glossaryTerm:z"}),
    )
    assert email == SchemaField(path="email", type="STRING")

    _save(store, Schema(fields=()))
    _save(store, baseline.schema)
    assert _stored_schema(path) == STORED


def test_tags_are_stored_sorted_whatever_the_set_order(db: tuple[SqlStore, Path]) -> None:
    store, path = db
    tags = frozenset(f"urn:li:tag:t{i:02}" for i in range(20))
    _save(store, Schema(fields=(SchemaField(path="a", type="STRING", tags=tags),)))
    (field,) = json.loads(_stored_schema(path))["fields"]
    assert field["tags"] == sorted(tags)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ('{"fields": [{"path": "id"}]}', "fields.0.type: Field required"),
        ('{"fields": [{"path": "id", "type": "STRING", "position": "first"}]}', "(got 'first')"),
        ('{"columns": []}', "fields: Field required"),
    ],
)
def test_a_damaged_baseline_names_itself_and_what_is_wrong(
    db: tuple[SqlStore, Path], schema: str, says: str
) -> None:
    store, path = db
    _save(store, Schema(fields=()))
    _stored_schema(path, schema)
    for read in (lambda: store.baseline(MODEL, DS), lambda: store.baselines_of([MODEL])):
        with pytest.raises(StoreError) as raised:
            read()
        message = str(raised.value)
        assert f"baseline of {DS} for {MODEL} is unreadable" in message
        assert says in message
        assert "mlcopilot baseline accept" in message


def test_a_damaged_outbox_row_names_itself_and_what_is_wrong(db: tuple[SqlStore, Path]) -> None:
    store, path = db
    changes = reconcile([], [finding()], evaluated=lambda *_: True, now=T0)
    request = NotifyRequest(policy=NotifyPolicy(), sinks=("github",))
    store.record_scan(
        changes, started_at=T0, now=T0, catalog="c", models=[MODEL], findings=1, notify=request
    )
    (row,) = store.outbox()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE outbox SET action = 'shout' WHERE id = ?", (row.id,))
    with pytest.raises(StoreError) as raised:
        store.outbox()
    assert str(raised.value).startswith(f"outbox row {row.id} is unreadable: action: ")
    assert "(got 'shout')" in str(raised.value)
