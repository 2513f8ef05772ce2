"""The write side's fast paths give exactly what the slow, obvious code gave.

Incident and document aspects are built as plain dicts instead of through the SDK classes;
write intents are encoded field by field instead of with ``dataclasses.asdict``; open risks
are grouped by model once. Each is compared here with the reference it replaces, on
representative and hostile values.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from datahub.metadata.schema_classes import TagPropertiesClass

from mlcopilot.catalog import aspects as ax
from mlcopilot.checks import builtin_infos
from mlcopilot.errors import CatalogError
from mlcopilot.incidents.writeback import OPEN_RISKS_PROPERTY, plan_writeback
from mlcopilot.model import (
    DocumentWrite,
    Incident,
    IncidentState,
    IncidentWrite,
    PropertyWrite,
    Severity,
    TagWrite,
    Write,
)
from mlcopilot.notify.sinks import datahub as datahub_sink
from mlcopilot.notify.sinks.datahub import EncodedWrites, decode_writes, encode_writes

T0 = datetime(2026, 11, 1, 8, 30, 15, 123456, tzinfo=UTC)
RAW = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
WRITTEN_BY = "Set by ML Incident Copilot."

HOSTILE = [
    "",
    "plain",
    'quotes " and \\ backslashes',
    "line\nbreaks\r\tand\x00nul and \x1b[31m escapes",
    "unicode: café ✓ 数据 🚀",
    "lone surrogate \ud800 here",
    "com.linkedin.pegasus2avro.looks.like.a.union",
    "com.linkedin.also",
    '{"json": [1, 2]}',
    "x" * 20_000,
]


def _json(value: Any) -> str:
    """Order-sensitive, so a key order change would show."""
    return json.dumps(value, ensure_ascii=False)


def _incident_write(value: str, **changes: Any) -> IncidentWrite:
    write = IncidentWrite(
        urn="urn:li:incident:mlcopilot-aaaa-1",
        incident_type="CUSTOM",
        custom_type="PII_EXPOSURE",
        title=f"[mlcopilot] {value}",
        description=value,
        priority=1,
        entities=(RAW, MODEL, f"urn:li:dataset:(urn:li:dataPlatform:hive,{value[:50]},PROD)"),
        active=True,
        created_at=T0,
        status_changed_at=T0 + timedelta(hours=3),
    )
    return replace(write, **changes)


def _document_write(value: str, **changes: Any) -> DocumentWrite:
    write = DocumentWrite(
        urn="urn:li:document:mlcopilot-aaaa-1",
        title=value,
        text=f"# {value}\n\n{value}\n",
        related_assets=(RAW, MODEL, value),
        created_at=T0,
        modified_at=T0 + timedelta(days=1),
    )
    return replace(write, **changes)


STORED_INCIDENT = {
    "type": "CUSTOM",
    "customType": "PII_EXPOSURE",
    "title": "old",
    "entities": [RAW],
    "assignees": [
        {
            "actor": "urn:li:corpuser:alice",
            "assignedAt": {"time": 5, "actor": "urn:li:corpuser:bob"},
        }
    ],
    "status": {"state": "ACTIVE", "lastUpdated": {"time": 1, "actor": "urn:li:corpuser:x"}},
    "created": {"time": 1, "actor": "urn:li:corpuser:x"},
}

STORED_DOCUMENTS: list[dict[str, Any]] = [
    {
        "title": "old",
        "contents": {"text": "old"},
        "created": {"time": 1, "actor": "urn:li:corpuser:x"},
        "lastModified": {"time": 1, "actor": "urn:li:corpuser:x"},
        "status": {"state": "PUBLISHED"},
    },
    {
        "customProperties": {"com.linkedin.pegasus2avro.only": "one key", "team": "ml"},
        "title": "old",
        "contents": {"text": "old"},
        "created": {"time": 1, "actor": "urn:li:corpuser:x"},
        "lastModified": {"time": 1, "actor": "urn:li:corpuser:x"},
        "status": {"state": "PUBLISHED"},
        "parentDocument": {"document": "urn:li:document:folder"},
        "relatedDocuments": [{"document": "urn:li:document:other"}],
    },
    {
        "customProperties": {"com.linkedin.only": "a single key that looks like a union"},
        "contents": {"text": "old"},
        "created": {"time": 1, "actor": "urn:li:corpuser:x"},
        "lastModified": {"time": 1, "actor": "urn:li:corpuser:x"},
        "status": {"state": "PUBLISHED"},
    },
]


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("stored", [None, STORED_INCIDENT])
def test_incident_json_equals_the_sdk_classes_json(text: str, stored: ax.JsonObject | None) -> None:
    kept = None if stored is None else ax.normalized("incidentInfo", stored)
    variants = [
        _incident_write(text),
        _incident_write(text, incident_type="DATA_SCHEMA", custom_type=None, active=False),
        _incident_write(text, priority=0, entities=(), created_at=T0.replace(tzinfo=None)),
        _incident_write(text, priority=2**31 - 1, custom_type=text),
    ]
    for write in variants:
        fast = ax._incident(write, kept)
        assert _json(fast) == _json(ax._incident_sdk(write, kept))
        # The stored form of what is written compares equal: a rescan writes nothing.
        assert ax.aspects_for_write(write, {"incidentInfo": fast}) == {}


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("stored", [None, *STORED_DOCUMENTS])
def test_document_json_equals_the_sdk_classes_json(text: str, stored: ax.JsonObject | None) -> None:
    kept = None if stored is None else ax.normalized("documentInfo", stored)
    variants = [
        _document_write(text),
        _document_write(text, related_assets=(), modified_at=T0.replace(tzinfo=None)),
    ]
    for write in variants:
        fast = ax._document(write, kept)
        assert _json(fast) == _json(ax._document_sdk(write, kept))
        assert ax.aspects_for_write(write, {"documentInfo": fast}) == {}


def test_what_people_set_in_datahub_is_kept() -> None:
    write = _incident_write("t")
    (info,) = ax.aspects_for_write(write, {"incidentInfo": STORED_INCIDENT}).values()
    assert info["assignees"] == STORED_INCIDENT["assignees"]
    document = _document_write("t")
    (doc,) = ax.aspects_for_write(document, {"documentInfo": STORED_DOCUMENTS[1]}).values()
    for name in ("customProperties", "parentDocument", "relatedDocuments"):
        assert doc[name] == STORED_DOCUMENTS[1][name]


@pytest.mark.parametrize(
    "write",
    [
        _incident_write("t", incident_type="NOT_A_TYPE"),
        _incident_write("t", priority=2**31),
        _incident_write("t", title=3),
        _incident_write("t", entities=(RAW, 7)),
        _document_write("t", text=None),
        _document_write("t", related_assets=(RAW, 7)),
    ],
)
def test_intents_the_schema_refuses_are_still_refused(write: Write) -> None:
    with pytest.raises(ValueError, match="does not fit DataHub's schema"):
        ax.aspects_for_write(write, {})
    with pytest.raises(CatalogError):
        ax.write_updates(write, {})


def test_a_value_the_sdk_accepts_goes_through_it() -> None:
    # bool is an int to Avro: the dict path leaves such values to the SDK, which decides.
    write = _incident_write("t", priority=True)
    assert ax._incident(write, None) == ax._incident_sdk(write, None)


def _writes() -> list[Write]:
    return [
        TagWrite(RAW, "urn:li:tag:mlcopilot-pii-exposure", present=True),
        TagWrite(RAW, "urn:li:tag:mlcopilot-stale-source", present=False),
        PropertyWrite(MODEL, OPEN_RISKS_PROPERTY, ("pii_exposure: 1 open, worst high",)),
        PropertyWrite(MODEL, "urn:li:structuredProperty:x", (1.5, "two", 3)),
        PropertyWrite(MODEL, OPEN_RISKS_PROPERTY, ()),
        *(_incident_write(text) for text in HOSTILE[:8]),
        *(_document_write(text) for text in HOSTILE[:8]),
        _incident_write("naive", created_at=T0.replace(tzinfo=None), custom_type=None),
        # The same instant as T0 in another zone is written with its own offset.
        _incident_write("zone", created_at=T0.astimezone(timezone(timedelta(hours=2)))),
    ]


def _asdict_encoding(writes: list[Write]) -> list[dict[str, Any]]:
    """What ``encode_writes`` did before: ``dataclasses.asdict``."""
    kinds = {TagWrite: "tag", PropertyWrite: "property", IncidentWrite: "incident"}
    encoded = []
    for write in writes:
        data = asdict(write)
        for name in ("created_at", "status_changed_at", "modified_at"):
            if name in data:
                data[name] = data[name].isoformat()
        encoded.append({"kind": kinds.get(type(write), "document"), **data})
    return encoded


def test_encoded_writes_equal_the_asdict_encoding() -> None:
    writes = _writes()
    encoded = encode_writes(writes)
    reference = _asdict_encoding(writes)
    assert encoded == reference
    assert [list(e) for e in encoded] == [list(r) for r in reference]  # key order too
    assert _json(encoded) == _json(reference)
    assert decode_writes(json.loads(_json(encoded))) == writes


def test_writes_encoded_as_read_equal_the_encoded_list(monkeypatch: pytest.MonkeyPatch) -> None:
    writes = _writes()
    encoded = encode_writes(writes)
    monkeypatch.setattr(datahub_sink, "ENCODED_SLICE", 3)  # iterated across several slices
    lazy = EncodedWrites(writes)
    assert len(lazy) == len(encoded)
    assert list(lazy) == encoded
    assert [list(e) for e in lazy] == [list(e) for e in encoded]  # key order too
    assert [lazy[i] for i in range(len(writes))] == encoded
    assert lazy[-1] == encoded[-1]
    assert lazy[2:7] == encoded[2:7]
    assert lazy == encoded
    assert encoded == lazy
    assert lazy != encoded[:-1]
    assert _json(list(lazy)) == _json(encoded)
    assert EncodedWrites([]) == []
    assert not EncodedWrites([])


def _incident(model: str, n: int, check: str, severity: Severity, state: IncidentState) -> Incident:
    return Incident(
        id=f"{model[-12:]}-{n}",
        generation=1,
        state=state,
        check=check,
        severity=severity,
        model=model,
        entity=f"urn:li:dataset:(urn:li:dataPlatform:hive,t{n % 7},PROD)",
        field=f"c{n}",
        change=None,
        previous_field=None,
        message="m",
        path=(model,),
        evidence={},
        opened_at=T0,
        updated_at=T0,
        resolved_at=T0 if state is IncidentState.RESOLVED else None,
    )


def test_open_risks_are_counted_per_model_among_many() -> None:
    m0, m1, m2, m3 = (f"urn:li:mlModel:(urn:li:dataPlatform:mlflow,m{k},PROD)" for k in range(4))
    open_, acked, resolved = IncidentState.OPEN, IncidentState.ACKNOWLEDGED, IncidentState.RESOLVED
    incidents = [
        _incident(m0, 1, "schema_drift", Severity.HIGH, open_),
        _incident(m1, 2, "stale_source", Severity.LOW, open_),
        _incident(m0, 3, "schema_drift", Severity.CRITICAL, acked),  # acknowledged is open
        _incident(m0, 4, "pii_exposure", Severity.CRITICAL, resolved),
        _incident(m1, 5, "pii_exposure", Severity.MEDIUM, open_),
        _incident(m2, 6, "deprecated_source", Severity.HIGH, resolved),
        _incident(m1, 7, "stale_source", Severity.HIGH, open_),
    ]
    plan = plan_writeback(
        incidents, models=[m0, m1, m2, m3], everything=incidents, infos=builtin_infos()
    )
    risks = {w.entity: w.values for w in plan if isinstance(w, PropertyWrite)}
    assert risks == {
        m0: ("schema_drift: 2 open, worst critical",),
        m1: ("pii_exposure: 1 open, worst medium", "stale_source: 2 open, worst high"),
        m2: ("none",),  # only a resolved incident
        m3: ("none",),  # no incident at all
    }


def test_prerequisites_are_the_sdk_json_and_each_call_gets_its_own_copy() -> None:
    tag = TagWrite(RAW, "urn:li:tag:mlcopilot-pii-exposure", present=True)
    first = ax.prerequisites(tag)
    props = TagPropertiesClass(name="mlcopilot-pii-exposure", description=WRITTEN_BY)
    assert _json(first) == _json({tag.tag: {"tagProperties": ax.to_json(props)}})
    first[tag.tag]["tagProperties"]["description"] = "edited by the caller"
    assert ax.prerequisites(tag)[tag.tag]["tagProperties"]["description"] == WRITTEN_BY

    for values in (("a",), (1.5, 2)):
        prop = PropertyWrite(MODEL, "urn:li:structuredProperty:io.x", values)
        found = ax.prerequisites(prop)[prop.property]["propertyDefinition"]
        kind = "string" if values == ("a",) else "number"
        assert found["valueType"] == f"urn:li:dataType:datahub.{kind}"
        found["entityTypes"].clear()
        assert ax.prerequisites(prop)[prop.property]["propertyDefinition"]["entityTypes"]
    assert ax.prerequisites(TagWrite(RAW, tag.tag, present=False)) == {}


def test_an_invalid_tag_urn_is_refused_every_time() -> None:
    bad = TagWrite(RAW, "not a tag urn", present=True)
    for _ in range(2):
        with pytest.raises(CatalogError):
            ax.write_prerequisites(bad)
