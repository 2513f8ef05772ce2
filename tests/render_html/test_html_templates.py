"""The HTML report's templates and static files: shipped in the wheel, inlined whole, and safe
by construction (autoescape, every value inert, no undefined name, nothing marked safe).
"""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest
from jinja2 import TemplateAssertionError, UndefinedError

from mlcopilot.report import html
from testing.synthetic_lineage import big_scan
from tests.render_html.dom import parse

REPO = Path(__file__).resolve().parents[2]
REPORT = resources.files("mlcopilot.report")


def _shipped(folder: str) -> list[str]:
    return sorted(f"report/{folder}/{p.name}" for p in REPORT.joinpath(folder).iterdir())


def test_the_templates_and_static_files_ship_as_package_data() -> None:
    files = _shipped("templates") + _shipped("static")
    assert {Path(f).name for f in files} >= {"page.html.j2", "report.css", "report.js"}
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["mlcopilot"]
    # A wheel carries each of them: a package-data glob names it.
    assert [f for f in files if not any(fnmatch(f, g) for g in globs)] == []


def test_the_page_inlines_the_packages_css_and_js_whole() -> None:
    page = html.render_html(big_scan(20))
    tree = parse(page)
    [style] = tree.find("style")
    css = REPORT.joinpath("static", "report.css").read_text(encoding="utf-8")
    assert style.text == css.strip()
    js = REPORT.joinpath("static", "report.js").read_text(encoding="utf-8")
    assert tree.find("script")[1].text == js.strip()


def test_no_template_marks_anything_safe_or_joins_text_past_inert() -> None:
    """Unescaped text is a Markup made in html.py, never a template's choice."""
    with pytest.raises(TemplateAssertionError, match="safe"):
        html._environment().from_string("{{ a|safe }}")
    for name in _shipped("templates"):
        text = REPORT.joinpath(*name.split("/")[1:]).read_text(encoding="utf-8")
        # `join` escapes but makes Markup, which the environment writes without inert().
        assert not re.search(r"\{%-?\s*autoescape|\|\s*join\b", text), name


def test_every_value_is_made_inert_and_escaped() -> None:
    template = html._environment().from_string('<p title="{{ a }}">{{ a }}</p>')
    hostile = "x\u202e<script>\"'&\u200b\ny"
    assert template.render(a=hostile) == (
        '<p title="x&lt;script&gt;&#34;&#39;&amp; y">x&lt;script&gt;&#34;&#39;&amp; y</p>'
    )
    assert template.render(a=3) == '<p title="3">3</p>'


def test_a_missing_or_none_value_fails_the_render_instead_of_showing() -> None:
    template = html._environment().from_string("<p>{{ a.b }}</p>")
    with pytest.raises(UndefinedError):
        template.render(a=object())
    with pytest.raises(TypeError, match="None reached the page"):
        html._environment().from_string("<p>{{ a }}</p>").render(a=None)


def test_the_lines_filter_keeps_lines_and_makes_each_inert() -> None:
    template = html._environment().from_string("<pre>{{ lines|lines }}</pre>")
    assert template.render(lines=["a<b", "c\u202ed\te"]) == "<pre>a&lt;b\ncd e</pre>"
