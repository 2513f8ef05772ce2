"""GMS's answers are decoded in C (msgspec), to exactly what the standard library gives.

GraphQL's ``RawAspect.payload`` is each aspect as a JSON string inside the JSON answer, so a
large walk decodes tens of megabytes twice; :func:`~mlcopilot.catalog.datahub.client.loads`
does both. Where msgspec is stricter than :func:`json.loads` (``NaN``, ``Infinity``, numbers
past a float's range, lone surrogates), the standard library decodes: the values never depend
on which decoder read them. (Whole scans through ``datahub:`` are compared byte for byte with
the code before this decoder by ``test_datahub_scan_identical``.)
"""

from __future__ import annotations

import json

import pytest

from mlcopilot.catalog.datahub.client import loads

TEXTS = [
    '{"a": 1, "a": 2}',  # the last of duplicate keys wins
    "123456789012345678901234567890",  # an integer past 64 bits
    "[1e400, -1e400, 1e-400]",  # past a float's range: infinities and zero
    "[1.5, -0.0, 5e-324, 0.1, 1.7976931348623157e308, 2.2250738585072014e-308]",
    '{"n": NaN, "i": Infinity, "m": -Infinity}',  # accepted by json.loads, not JSON
    '"\\ud83d\\ude00 \\u00e9 \\u0000 \\" \\\\ \\/"',
    '"\\ud800 alone"',  # a lone surrogate
    '{"nested": [{"deep": [[], {}, null, true, false, ""]}]}',
    '  {"spaces": 1}\n',
]


@pytest.mark.parametrize("text", TEXTS)
def test_loads_gives_what_json_loads_gives(text: str) -> None:
    for data in (text, text.encode("utf-8", "surrogatepass")):
        got, expected = loads(data), json.loads(data)
        # repr: NaN is not equal to itself, and -0.0 equals 0.0; repr tells both apart.
        assert repr(got) == repr(expected)
        assert type(got) is type(expected)


def test_an_aspect_payload_inside_an_answer_decodes_as_before() -> None:
    aspect = {"fields": [{"fieldPath": "c0", "nativeDataType": "string"}], "x": 1.25}
    answer = json.dumps({"data": {"entities": [{"payload": json.dumps(aspect)}]}}).encode()
    payload = loads(answer)["data"]["entities"][0]["payload"]
    assert isinstance(payload, str)
    assert loads(payload) == json.loads(payload) == aspect


@pytest.mark.parametrize("text", ["", "{", '{"a": 1,}', "[1] [2]", "nul", '"\\x"'])
def test_malformed_json_raises_what_json_loads_raises(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        loads(text)
    assert str(got.value) == str(expected.value)  # the standard library's message
