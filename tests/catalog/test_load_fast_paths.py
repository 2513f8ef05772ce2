"""The fast paths of ``catalog load`` read and write exactly what the slow ones do.

- Files of one record a line are parsed a line at a time by msgspec; everything else, and
  every line msgspec might read otherwise, by ``ijson``, as before. The records read, their
  numbers and every error must be what ``ijson`` alone gives (:func:`ijson_records`, the
  reader as it was).
- Aspects are serialised by msgspec where it writes ``json.dumps``'s text, else by
  ``json.dumps``: the text must be ``json.dumps``'s for any value.
- The browse-tree helper ``_urn_head`` splits urns as its character loop did.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson  # type: ignore[import-untyped]
import pytest
from datahub.emitter.aspect import ASPECT_MAP
from datahub.metadata.schema_classes import StatusClass
from hypothesis import given, settings
from hypothesis import strategies as st

from mlcopilot.catalog import aspect_json, lite_writer, loader
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.errors import InputError

RECORD = {
    "entityType": "dataset",
    "entityUrn": "urn:li:dataset:(urn:li:dataPlatform:hive,db.t,PROD)",
    "changeType": "UPSERT",
    "aspectName": "status",
    "aspect": {"json": {"removed": False}},
}


def ijson_records(path: Path) -> list[tuple[int, object]]:
    """The records as the loader read every file before: ``ijson`` alone."""
    with path.open("rb") as file:
        if file.read(3) != b"\xef\xbb\xbf":
            file.seek(0)
        items = ijson.items(file, "item", use_float=True, buf_size=256 * 1024)
        return list(enumerate(items, start=1))


def read(path: Path) -> list[tuple[int, object]]:
    return list(loader._stream(path, None))


def outcome(reader: Any, path: Path) -> tuple[list[tuple[int, list[str]]], str]:
    """The records ``reader`` reads from ``path``, up to the error that stops it, if any."""
    got: list[tuple[int, list[str]]] = []
    try:
        for number, record in reader(path):
            got.append((number, tokens(record)))
    except (ijson.JSONError, UnicodeDecodeError, InputError):
        return got, "error"
    return got, "end"


def tokens(value: object) -> list[str]:
    """``value`` as a flat list of tokens, types included (``1`` is not ``1.0``), however
    deeply nested (no recursion)."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(f"{{{len(item)}")
            for key, inner in reversed(item.items()):
                stack += [inner, f"key:{key}"]
        elif isinstance(item, list):
            out.append(f"[{len(item)}")
            stack += reversed(item)
        else:
            out.append(f"{type(item).__name__}:{item!r}")
    return out


def lines(*records: str, end: str = "\n]\n") -> str:
    return "[\n" + ",\n".join(records) + end


GOOD = json.dumps(RECORD)
# Each text is a whole file; the reader's records (or its failure) must be ijson's.
TEXTS = {
    "one a line": lines(GOOD, GOOD, GOOD),
    "empty list": "[\n]\n",
    "blank lines and CRLF": "\r\n[\r\n\r\n" + GOOD + ",\r\n\r\n" + GOOD + "\r\n]\r\n",
    "indented": json.dumps([RECORD, RECORD], indent=4),
    "one line": json.dumps([RECORD, RECORD]),
    "indented after compact": lines(GOOD, json.dumps(RECORD, indent=2), GOOD),
    "two on one line": lines(GOOD, GOOD + ", " + GOOD, GOOD),
    "comma first": "[\n" + GOOD + "\n," + GOOD + "\n," + GOOD + "\n]\n",
    "no comma at the end of a line": "[\n" + GOOD + "\n" + GOOD + "\n]\n",
    "trailing comma": lines(GOOD, GOOD + ","),
    "no closing bracket": "[\n" + GOOD + ",\n" + GOOD + "\n",
    "closing bracket on the last line": "[\n" + GOOD + ",\n" + GOOD + "]\n",
    "text after the list": lines(GOOD, GOOD) + "x\n",
    "second list after the list": lines(GOOD) + "[]\n",
    "not JSON in the middle": lines(GOOD, "{bad}", GOOD),
    "no newline at the end": lines(GOOD, GOOD, end="\n]"),
    "last record without newline": "[\n" + GOOD + ",\n" + GOOD,
    "numbers and odd values": lines(GOOD, "1", '"text"', "[1, 2]", "null", "true", GOOD),
    "int past 64 bits": lines(GOOD, '{"n": 123456789012345678901234}', GOOD),
    "just past int64": lines(GOOD, '{"n": 9223372036854775808}', GOOD),
    "int64 at its limits": lines('{"a": 9223372036854775807, "b": -9223372036854775808}'),
    "19 digits in a string": lines(GOOD, '{"id": "q-1234567890123456789012"}', GOOD),
    "huge float": lines(GOOD, '{"x": 1.5e400}', GOOD),
    "tiny float": lines(GOOD, '{"x": 1e-400, "y": -2.5e-320}', GOOD),
    "floats": lines('{"x": [0.1, 1.0, 1e16, 1E-5, -0.0, 2.5e+3, 123456.789012]}'),
    "escapes": lines(r'{"s": "tab\tnew\nline \"q\" \\ \/ \u00e9 \ud83d\ude00 \u0000"}'),
    "lone surrogate": lines(GOOD, r'{"s": "\ud800"}', GOOD),
    "raw UTF-8": lines('{"s": "prénom 日付 ✓"}'),
    "invalid UTF-8": "[\n" + GOOD + ",\n" + '{"s": "\udcff"}' + "\n]\n",
    "duplicate keys": lines('{"a": 1, "a": 2}'),
    "bom": "\ufeff" + lines(GOOD, GOOD),
    "control character in a string": lines(GOOD, '{"s": "a\x01b"}', GOOD),
    "deep nesting": lines(GOOD, "[" * 3000 + "]" * 3000, GOOD),
    "file sink": lines(*[json.dumps(r, indent=4) for r in (RECORD, {}, RECORD)]),
    "file sink, CRLF": lines(json.dumps(RECORD, indent=4), json.dumps(RECORD, indent=2)).replace(
        "\n", "\r\n"
    ),
    "file sink then compact": lines(json.dumps(RECORD, indent=4), GOOD, GOOD),
    "file sink, comma first": "[\n" + json.dumps(RECORD, indent=4) + "\n," + GOOD + "\n]\n",
    "file sink, no indentation": lines(
        "{\n" + '"a": {\n"b": 1\n},\n"c": [\n1\n]\n}', json.dumps(RECORD, indent=4)
    ),
    "file sink, closing brace then more": lines("{\n" + '"a": 1\n} ', GOOD),
    "file sink, unclosed": "[\n" + json.dumps(RECORD, indent=4)[:-1],
    "file sink, last without newline": "[\n" + json.dumps(RECORD, indent=4) + "\n]",
    "file sink, bad record": lines(json.dumps(RECORD, indent=4), '{\n"a": tru\n}', GOOD),
}


def write_text(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_records_and_errors_are_ijsons(name: str, tmp_path: Path) -> None:
    path = write_text(tmp_path / "f.json", TEXTS[name])
    assert outcome(read, path) == outcome(ijson_records, path)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64])
def test_chunk_boundaries_change_nothing(
    chunk: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines and records cut by the reader's chunks anywhere, ends of lines included."""
    path = tmp_path / "f.json"
    expected = {}
    for name, text in TEXTS.items():
        write_text(path, text)
        expected[name] = outcome(ijson_records, path)
    monkeypatch.setattr(loader, "_CHUNK", chunk)
    for name, text in TEXTS.items():
        write_text(path, text)
        assert outcome(read, path) == expected[name], name


def test_lines_are_parsed_by_msgspec_until_one_is_not(tmp_path: Path) -> None:
    """The fast path is taken (and left) where it should be, not just agreed with."""
    fast: list[bytes] = []
    alone: list[bytes] = []
    streamed: list[int] = []
    real_fast, real_alone, real_streamed = (
        loader._fast_record,
        loader._one_record,
        loader._streamed,
    )

    def counted_fast(text: bytes) -> tuple[object] | None:
        found = real_fast(text)
        if found is not None:
            fast.append(text)
        return found

    def counted_alone(text: bytes) -> tuple[object] | None:
        alone.append(text)
        return real_alone(text)

    def counted_streamed(*args: Any) -> Iterator[tuple[int, object]]:
        for number, record in real_streamed(*args):
            streamed.append(number)
            yield number, record

    odd = '{"n": 1234567890123456789}'  # 19 digits: an int64, left to ijson all the same
    indented = json.dumps(RECORD, indent=4)  # as DataHub's file sink writes a record
    path = write_text(
        tmp_path / "f.json", lines(GOOD, odd, GOOD, indented, '{\n"a": 1}', GOOD, GOOD)
    )
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(loader, "_fast_record", counted_fast)
        patched.setattr(loader, "_one_record", counted_alone)
        patched.setattr(loader, "_streamed", counted_streamed)
        records = read(path)
    assert [number for number, _ in records] == [1, 2, 3, 4, 5, 6, 7]
    assert records[1][1] == {"n": 1234567890123456789}
    assert records[3][1] == records[0][1] == RECORD
    assert records[4][1] == {"a": 1}
    # msgspec read the one-line records and the indented one; ijson alone the long number;
    # the record over two lines but not at the margins stopped the fast path: ijson read on.
    assert len(fast) == 3
    assert alone == [odd.encode()]
    assert streamed == [5, 6, 7]


def test_a_line_too_long_is_left_to_ijson(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "_MAX_LINE", 300)
    monkeypatch.setattr(loader, "_CHUNK", 100)
    long = {**RECORD, "aspect": {"json": {"removed": False, "pad": "x" * 400}}}
    for text in (
        lines(GOOD, json.dumps(long), GOOD, GOOD),
        lines(GOOD, json.dumps(long, indent=4), GOOD, GOOD),
    ):
        path = write_text(tmp_path / "f.json", text)
        assert read(path) == ijson_records(path)
        assert len(read(path)) == 4


def test_progress_is_told_as_lines_are_read(tmp_path: Path) -> None:
    path = write_text(tmp_path / "f.json", lines(*[GOOD] * 4500))
    told: list[int] = []
    assert len(list(loader._stream(path, told.append))) == 4500
    assert len(told) == 2
    assert told == sorted(told)
    assert 0 < told[-1] < path.stat().st_size


@pytest.mark.parametrize("exact", [True, False])
def test_malformed_files_are_reported_alike_in_both_layouts(
    exact: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Line and column for small files; for large ones, the records read before the error."""
    if not exact:
        monkeypatch.setattr(loader, "_EXACT_ERRORS_UP_TO", 0)
    compact = write_text(tmp_path / "compact.json", lines(GOOD, GOOD, GOOD + ",", end="]\n"))
    with pytest.raises(InputError) as raised:
        load_metadata_files(tmp_path / "c.db", [compact])
    expected = (
        f"not valid JSON at line 4 column {len(GOOD) + 2}: Expecting value"
        if exact
        else "not valid JSON after record 3: parse error: unallowed token at this point"
    )
    assert str(raised.value).startswith(f"{compact}: {expected}")


def test_a_bad_record_on_a_line_is_named_by_its_number(tmp_path: Path) -> None:
    bad = json.dumps({**RECORD, "aspectName": "fooBar"})
    path = write_text(tmp_path / "f.json", lines(GOOD, GOOD, bad, GOOD))
    with pytest.raises(InputError, match=r": record 3: unknown aspect 'fooBar'$"):
        load_metadata_files(tmp_path / "c.db", [path])


# --- aspects serialised as json.dumps writes them -------------------------------------------

FLOAT_FREE = StatusClass
WITH_FLOATS = ASPECT_MAP["datasetProfile"]

# Mostly ASCII (msgspec's text is used only then): control characters, quotes, backslashes;
# now and then DEL or characters past ASCII (json.dumps writes the text then).
ascii_text = st.text(st.characters(max_codepoint=0x7E) | st.sampled_from('\x00\n\t"\\/'))
text = ascii_text | ascii_text | ascii_text | st.text(st.sampled_from("a\x7fé✓\U0001f600"))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | text
    | st.sampled_from(["0.0000", "1e5", "null", "e"])
)
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 1e-5, 1.5e-5, 9.99e-5, 1e-4, 1e15, 1e16, 1e22, 5e-324, 1.7976931348623157e308]
)


def json_values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=30,
    )


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(text, json_values(scalars), max_size=5))
def test_float_free_values_are_written_as_json_dumps_writes_them(value: dict[str, Any]) -> None:
    assert aspect_json.dumps(FLOAT_FREE, value) == json.dumps(value)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(text, json_values(scalars | floats | floats), max_size=5))
def test_values_with_floats_are_written_as_json_dumps_writes_them(value: dict[str, Any]) -> None:
    assert aspect_json.dumps(WITH_FLOATS, value) == json.dumps(value)


def test_plain_values_are_written_by_msgspec(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken, not just agreed with: json.dumps is not called."""
    value = {
        "fieldPath": 'a "quoted"\tname\\x',
        "nullable": False,
        "n": [0, -1, 2**63 - 1],
        "stats": {"mean": 0.5, "max": 12345.678, "ratio": 1e-4},
        "nested": [{"a": []}, {}],
    }
    expected = json.dumps(value)
    # Compiled first: compiling writes the schema's defaults with json.dumps (run alone, or
    # first on its worker, the test otherwise failed there, not where it means to look).
    aspect_json._compiled(WITH_FLOATS), aspect_json._compiled(FLOAT_FREE)
    monkeypatch.setattr(aspect_json, "json", None)  # any json.dumps would fail
    assert aspect_json.dumps(WITH_FLOATS, value) == expected
    del value["stats"]
    assert aspect_json.dumps(FLOAT_FREE, value) == json.dumps(value)


def test_a_float_msgspec_writes_otherwise_is_written_by_json_dumps() -> None:
    for number in (1e-5, 1e16, 1e22, 7.5e-05, math.ulp(0.0), math.nan, -math.inf):
        value = {"x": number, "s": "no digit then e here"}
        assert aspect_json.dumps(WITH_FLOATS, value) == json.dumps(value)
        assert aspect_json.dumps(WITH_FLOATS, {"x": [number]}) == json.dumps({"x": [number]})
        assert aspect_json.dumps(WITH_FLOATS, {"x": [1, number]}) == json.dumps({"x": [1, number]})
    assert not aspect_json._compiled(WITH_FLOATS).float_free
    assert aspect_json._compiled(FLOAT_FREE).float_free
    assert aspect_json._compiled(ASPECT_MAP["schemaMetadata"]).float_free


def test_a_lone_surrogate_is_written_by_json_dumps() -> None:
    value = {"s": "\ud800"}
    assert aspect_json.dumps(FLOAT_FREE, value) == json.dumps(value) == '{"s": "\\ud800"}'


# --- urns split as before --------------------------------------------------------------------


def old_urn_head(urn: str) -> tuple[str, str]:
    """``lite_writer._urn_head`` as it was: a loop over the characters."""
    _, _, rest = urn.partition("urn:li:")
    entity_type, _, entity_id = rest.partition(":")
    if not entity_id.startswith("("):
        return entity_type, entity_id
    depth = 0
    for index, char in enumerate(entity_id):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 1:
            return entity_type, entity_id[1:index]
    return entity_type, entity_id


URN_PARTS = st.text(alphabet="ab(),:.", max_size=12)


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(["urn:li:dataset:", "urn:li:x:", "", "urn:li:"]), URN_PARTS)
def test_urn_heads_are_split_as_before(prefix: str, rest: str) -> None:
    for urn in (prefix + rest, prefix + "(" + rest):
        assert lite_writer._urn_head(urn) == old_urn_head(urn)


def test_urn_heads_of_real_urns() -> None:
    urns = [
        "urn:li:dataset:(urn:li:dataPlatform:hive,db.t,PROD)",
        "urn:li:dataJob:(urn:li:dataFlow:(airflow,dag,PROD),task)",
        "urn:li:mlFeature:(customer_features,days)",
        "urn:li:schemaField:(urn:li:dataset:(urn:li:dataPlatform:hive,a,PROD),c)",
        "urn:li:tag:PII",
        "urn:li:dataset:(noclose",
    ]
    for urn in urns:
        assert lite_writer._urn_head(urn) == old_urn_head(urn)


# --- a first load into a new catalog looks nothing up --------------------------------------


def test_a_first_load_into_a_new_catalog_looks_up_no_aspect(tmp_path: Path) -> None:
    from mlcopilot.catalog.lite import open_lite_catalog

    other = {**RECORD, "entityUrn": "urn:li:dataset:(urn:li:dataPlatform:hive,db.u,PROD)"}
    event = {
        **RECORD,
        "aspectName": "operation",
        "aspect": {
            "json": {"timestampMillis": 5, "operationType": "UPDATE", "lastUpdatedTimestamp": 5}
        },
    }
    statements: list[str] = []
    catalog = open_lite_catalog(tmp_path / "c.db", create=True)
    with catalog, catalog.writing() as writer:
        writer._db.set_trace_callback(statements.append)
        for record in (RECORD, other, event, RECORD):
            loader._write(loader._prepare(record), writer, loader._Tally())
        writer._db.set_trace_callback(None)
    lookups = [s for s in statements if s.startswith("SELECT")]
    # Only the aspect written twice (the last record) is looked up; nothing else.
    assert len(lookups) == 1
    assert lookups[0].startswith("SELECT metadata, system_metadata FROM metadata_aspect_v2")
    assert sum(s.startswith("INSERT INTO metadata_aspect_v2") for s in statements) == 3
