"""The fast aspect check agrees with the SDK's own round trip, or steps aside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.aspect import ASPECT_MAP
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform

from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.aspect_json import NotFast, normalise

SAMPLES = Path(__file__).parents[2] / ".." / "shared" / "datahub-samples"
DEMO_DATA = Path(__file__).parents[2] / "src" / "mlcopilot" / "demo_data"
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no samples at {SAMPLES}")


def sdk_json(name: str, payload: Any) -> Any:
    """What the SDK makes of the payload: its JSON, or None when it refuses it."""
    try:
        aspect = ASPECT_MAP[name].from_obj(post_json_transform(payload))
    except ax.TranslationError:
        return None
    return pre_json_transform(aspect.to_obj()) if aspect.validate() else None


def file_aspects() -> list[tuple[str, str, Any]]:
    files = [*SAMPLES.glob("*.json"), *(SAMPLES / "golden").glob("*.json")]
    files += DEMO_DATA.glob("*.json")
    found = []
    for path in sorted(files):
        for record in json.loads(path.read_text(encoding="utf-8")):
            aspect = record.get("aspect") if isinstance(record, dict) else None
            name = record.get("aspectName") if isinstance(record, dict) else None
            if not isinstance(aspect, dict) or "json" not in aspect or name not in ASPECT_MAP:
                continue
            if record.get("changeType", "UPSERT") == "PATCH":
                continue
            found.append((path.name, name, aspect["json"]))
    return found


@needs_samples
def test_every_aspect_of_datahub_files_normalises_as_the_sdk_does() -> None:
    cases = file_aspects()
    fast = 0
    for where, name, payload in cases:
        expected = sdk_json(name, payload)
        try:
            got = normalise(ASPECT_MAP[name], payload)
        except NotFast:
            continue
        fast += 1
        assert expected is not None, f"{where} {name}: accepted what the SDK refuses"
        # Text equality: same fields, same order, same union wrapping as Lite would store.
        assert json.dumps(got) == json.dumps(expected), f"{where} {name}"
    assert len(cases) > 500
    assert fast >= 0.98 * len(cases)  # the rest take the SDK's path


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("status", {"removed": "yes"}),
        ("status", {"removed": 1}),
        ("globalTags", {"tags": [{"tag": 5}]}),
        ("globalTags", {"tags": {"tag": "urn:li:tag:x"}}),
        ("schemaMetadata", {"schemaName": "x", "version": 0, "hash": "", "fields": []}),
        (
            "operation",
            {"timestampMillis": 1, "operationType": "NOT_A_TYPE", "lastUpdatedTimestamp": 1},
        ),
        (
            "operation",
            {"timestampMillis": 2**64, "operationType": "UPDATE", "lastUpdatedTimestamp": 1},
        ),
        ("datasetProperties", {"customProperties": {"a": 1}}),
        ("datasetProperties", {"customProperties": {"a": None}}),
        ("status", ["removed"]),
    ],
)
def test_invalid_or_unusual_payloads_step_aside(name: str, payload: Any) -> None:
    with pytest.raises(NotFast):
        normalise(ASPECT_MAP[name], payload)


def test_defaults_are_filled_in_and_unknown_fields_dropped_as_the_sdk_does() -> None:
    payload = {"name": "orders", "unknown": 3, "description": None}
    got = normalise(ASPECT_MAP["datasetProperties"], payload)
    assert got == {"customProperties": {}, "name": "orders", "tags": []}
    assert json.dumps(got) == json.dumps(sdk_json("datasetProperties", payload))
    # A default is a fresh copy each time: a caller changing one result changes no other.
    got["customProperties"]["x"] = "1"
    assert normalise(ASPECT_MAP["datasetProperties"], payload)["customProperties"] == {}
