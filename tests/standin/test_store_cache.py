"""The stand-in's Lite store caches what it read, and forgets an entity it writes or deletes."""

from __future__ import annotations

from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata import schema_classes as sc

from standin import store as store_module
from standin.store import LiteStore

DS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
OTHER = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.orders,PROD)"


def described(urn: str, text: str) -> MetadataChangeProposalWrapper:
    return MetadataChangeProposalWrapper(
        entityUrn=urn, aspect=sc.DatasetPropertiesClass(description=text)
    )


def removed(urn: str, flag: bool) -> MetadataChangeProposalWrapper:
    return MetadataChangeProposalWrapper(entityUrn=urn, aspect=sc.StatusClass(removed=flag))


@pytest.fixture
def store(tmp_path: Path) -> LiteStore:
    return LiteStore(tmp_path / "lite.db", durable=False)


def description(store: LiteStore, urn: str) -> str | None:
    """What both reads say (``latest`` caches the entity; ``get`` reads the cache or one row)."""
    row = store.latest(urn, ["datasetProperties"]).get("datasetProperties")
    assert store.get(urn, "datasetProperties") == row
    return None if row is None else row.value.get("description")


def test_a_write_is_read_back_after_the_entity_was_read(store: LiteStore) -> None:
    store.write([described(DS, "first"), removed(DS, False), described(OTHER, "other")])
    assert description(store, DS) == "first"
    assert [r.value["description"] for r in store.history(DS, "datasetProperties")] == ["first"]
    assert set(store.latest(DS)) == {"datasetProperties", "status"}

    store.write([described(DS, "second")])
    assert description(store, DS) == "second"
    assert [r.value["description"] for r in store.history(DS, "datasetProperties")] == [
        "first",
        "second",
    ]
    assert store.latest(DS, ["status", "nope"])["status"].value == {"removed": False}
    assert description(store, OTHER) == "other"


def test_a_deleted_aspect_or_entity_is_gone_from_what_is_read(store: LiteStore) -> None:
    store.write([described(DS, "first"), removed(DS, False)])
    assert set(store.latest(DS)) == {"datasetProperties", "status"}
    store.delete(DS, "status")
    assert set(store.latest(DS)) == {"datasetProperties"}
    assert store.history(DS, "status") == []
    store.delete(DS)
    assert store.latest(DS) == {}
    assert description(store, DS) is None


def test_entities_read_past_the_cache_s_size_are_read_again(
    store: LiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "CACHED_READS", 2)
    urns = [DS.replace("customers", f"t{n}") for n in range(5)]
    store.write([described(u, u) for u in urns])
    for _ in range(2):
        assert [description(store, u) for u in urns] == urns
    store.write([described(urns[0], "changed")])
    assert description(store, urns[0]) == "changed"
