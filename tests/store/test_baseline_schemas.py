"""Baseline schemas kept once each, on SQLite and PostgreSQL (store migration 0008).

The models sharing a dataset share its stored schema; a stored schema that is its dataset's
current one is that very object and its text is not read; a schema no baseline names any
more is let go when a baseline is accepted over it; a 0007 database upgrades with its
baselines unchanged, and downgrades back.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Engine, create_engine, text

from mlcopilot.errors import StoreError
from mlcopilot.model import Baseline, CurrentSchemas, Schema, SchemaField
from mlcopilot.store import SqlStore, open_store
from testing.migrations import migrate
from tests.store.test_store_contract import DS, DS2, MODEL, ODD_FIELDS, OTHER_MODEL, T0, T1, count

ID = Schema(fields=(SchemaField(path="id", type="NUMBER"),))


def test_models_sharing_a_dataset_store_its_schema_once(store: SqlStore, raw: Engine) -> None:
    store.save_baselines(
        [
            Baseline(MODEL, DS, Schema(fields=ODD_FIELDS), "history", T0),
            Baseline(OTHER_MODEL, DS, Schema(fields=ODD_FIELDS), "first_scan", T1),
            Baseline(OTHER_MODEL, DS2, ID, "accepted", T1),
        ]
    )
    assert count(raw, "baselines") == 3
    assert count(raw, "baseline_schemas") == 2
    assert store.baselines(OTHER_MODEL) == [
        Baseline(OTHER_MODEL, DS, Schema(fields=ODD_FIELDS), "first_scan", T1),
        Baseline(OTHER_MODEL, DS2, ID, "accepted", T1),
    ]


def test_a_stored_schema_that_is_the_current_one_is_that_schema_and_is_not_read(
    store: SqlStore, raw: Engine
) -> None:
    store.save_baselines(
        [
            Baseline(MODEL, DS, Schema(fields=ODD_FIELDS), "history", T0),
            Baseline(MODEL, DS2, ID, "history", T0),
        ]
    )
    now = Schema(fields=ODD_FIELDS)  # equal to DS's stored schema, another object
    drifted = Schema(fields=(SchemaField(path="id", type="STRING"),))
    current = CurrentSchemas({DS: now, DS2: drifted})

    at_ds, at_ds2 = store.baselines_of([MODEL], current=current)[MODEL]
    assert at_ds.schema is now
    assert at_ds2.schema == ID  # read, as stored: the baseline the drift is measured from

    # Damage DS's stored text: a read that needs it fails, one given DS's schema never reads it.
    with raw.begin() as conn:
        conn.execute(
            text(
                "UPDATE baseline_schemas SET schema = :bad WHERE digest IN "
                "(SELECT schema_digest FROM baselines WHERE dataset = :ds)"
            ),
            {"bad": '{"columns": []}', "ds": DS},
        )
    assert store.baselines_of([MODEL], current=current)[MODEL][0].schema is now
    with pytest.raises(StoreError, match=re.escape(f"baseline of {DS} for {MODEL} is unreadable")):
        store.baselines_of([MODEL])


def test_accepting_a_baseline_lets_go_of_the_schema_no_baseline_names(
    store: SqlStore, raw: Engine
) -> None:
    old = Schema(fields=ODD_FIELDS)
    store.save_baselines(
        [Baseline(MODEL, DS, old, "history", T0), Baseline(OTHER_MODEL, DS, old, "history", T0)]
    )
    store.save_baselines([Baseline(MODEL, DS, ID, "accepted", T1)])
    assert count(raw, "baseline_schemas") == 2  # OTHER_MODEL still names the old one
    store.save_baselines([Baseline(OTHER_MODEL, DS, ID, "accepted", T1)])
    assert count(raw, "baseline_schemas") == 1
    assert [b.schema for m in (MODEL, OTHER_MODEL) for b in store.baselines(m)] == [ID, ID]


def test_a_0007_database_upgrades_with_its_baselines_and_downgrades_back(store_url: str) -> None:
    migrate(store_url, "0007")
    # As 0007's store wrote them: the schema in each row, an older text (keys in another
    # order) for one of them.
    canonical = (
        '{"fields": [{"path": "id", "type": "NUMBER", "native_type": "", "description": "", '
        '"position": 0, "tags": [], "terms": []}]}'
    )
    older = '{"fields": [{"type": "NUMBER", "path": "id"}]}'
    rows = [(MODEL, DS, canonical), (OTHER_MODEL, DS, canonical), (OTHER_MODEL, DS2, older)]
    engine = create_engine(store_url)
    with engine.begin() as conn:
        for model, dataset, stored in rows:
            conn.execute(
                text(
                    "INSERT INTO baselines (model, dataset, schema, source, captured_at) "
                    "VALUES (:m, :d, :s, 'history', :t)"
                ),
                {"m": model, "d": dataset, "s": stored, "t": T0},
            )
    with open_store(store_url) as store:  # upgrades to head
        found = store.baselines_of([MODEL, OTHER_MODEL], current=CurrentSchemas({DS: ID, DS2: ID}))
        assert found == {
            MODEL: [Baseline(MODEL, DS, ID, "history", T0)],
            OTHER_MODEL: [
                Baseline(OTHER_MODEL, DS, ID, "history", T0),
                Baseline(OTHER_MODEL, DS2, ID, "history", T0),
            ],
        }
        # The older text is kept as it was, and still read as the current schema it equals.
        assert all(b.schema is ID for bs in found.values() for b in bs)
    assert count(engine, "baseline_schemas") == 2

    migrate(store_url, "0007", down=True)
    with engine.connect() as conn:
        back = conn.execute(
            text(
                "SELECT model, dataset, CAST(schema AS TEXT) FROM baselines ORDER BY model, dataset"
            )
        ).all()
    assert sorted(tuple(r) for r in back) == sorted(rows)
    engine.dispose()
