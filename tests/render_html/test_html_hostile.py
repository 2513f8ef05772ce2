"""Hostile catalog text in the HTML report comes out as text: no element, attribute, script
break-out or reordering from a dataset name, a column name or a deprecation note.

Through the installed command, and parsed with :mod:`html.parser`: only the page's own two
scripts exist, no attribute starts with ``on``, the embedded JSON still parses and holds the
names (less their invisible characters), and no bidi or control character is left anywhere.
"""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from mlcopilot.report.html import inert, script_json
from testing.builders import dataset_urn
from testing.hostile_names import COLUMNS, ENTITY, SCRIPTED, STYLE, TABLE, hostile_report
from tests.render_html.dom import parse

INVISIBLE = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return hostile_report(tmp_path_factory.mktemp("hostile")).read_text(encoding="utf-8")


def test_only_the_pages_own_scripts_and_no_event_handler(page: str) -> None:
    tree = parse(page)
    scripts = tree.find("script")
    assert [s.attrs for s in scripts] == [{"type": "application/json", "id": "report-data"}, {}]
    assert "window.ran" not in scripts[1].text  # the code is the page's, no name got into it
    for element in tree.walk():
        assert not any(name.startswith("on") for name in element.attrs), element.attrs
        assert element.tag not in {"img", "style", "link", "iframe"} or (
            element.tag == "style" and element.parent is not None and element.parent.tag == "head"
        )
    [style] = tree.find("style")
    assert "url(" not in style.text  # the note's CSS is text in a table cell, not style
    assert all("style" not in e.attrs for e in tree.walk())
    assert all("evil.example" not in value for e in tree.walk() for value in e.attrs.values())
    [cell] = [td for td in tree.find("td") if "evil.example" in td.text]
    assert STYLE in cell.text


def test_the_names_are_shown_as_text_where_they_belong(page: str) -> None:
    tree = parse(page)
    columns = {c.attrs["data-column"] for c in tree.find("text", "column")}
    assert columns == {inert(name) for name in COLUMNS}
    shown = " ".join(row.text for row in tree.find("tr", "finding"))
    for name in (*SCRIPTED, ENTITY):
        assert name in shown  # the characters as they are: nothing decoded or dropped
    assert "amountgnp.exex" in shown  # invisible and direction-changing ones removed
    nodes = {n.attrs["data-urn"] for n in tree.find("g", "node")}
    assert dataset_urn(TABLE) in nodes


def test_the_embedded_json_cannot_end_its_script_and_still_reads_back(page: str) -> None:
    tree = parse(page)
    data = json.loads(tree.find("script")[0].text)
    entities = {f["entity"] for m in data["models"] for f in m["findings"]}
    assert dataset_urn(TABLE) in entities
    block = page.split('<script type="application/json" id="report-data">', 1)[1]
    block = block.split("</script>", 1)[0]
    assert "<" not in block
    assert ">" not in block
    assert "&" not in block


def test_no_invisible_or_direction_changing_character_is_left(page: str) -> None:
    found = sorted({unicodedata.name(c, hex(ord(c))) for c in INVISIBLE.findall(page)})
    assert not found, found


def test_script_json_escapes_what_could_close_a_script() -> None:
    text = script_json({"a": "</script><!-- & -->", "b": ["\u2028"]})
    assert "<" not in text
    assert ">" not in text
    assert "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & -->", "b": ["\u2028"]}
