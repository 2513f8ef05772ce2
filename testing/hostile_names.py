"""Catalog names built to break the HTML report, and the report a scan writes of them.

One corpus for the tests that read the page as parsed HTML (``tests/render_html``) and the
ones that open it in Chromium (``tests/browser``). Every name that would run script calls
``window.ran(what)``: a browser test installs that function first, so anything hostile that
runs says so; the parsed-HTML tests check no such call reached the page's own code.
"""

from __future__ import annotations

from pathlib import Path

from testing.builders import dataset, dataset_urn, ml_model, write_metadata_file
from testing.installed_cli import run_cli

TABLE = "raw.<script>window.ran('table')</script>"
"""A dataset name that is a script element."""
ATTRIBUTE = '" onmouseover="window.ran(\'attribute\')" x="'
"""A column name whose quote closes an attribute and opens an event handler."""
TAG = "<img src=x onerror=\"window.ran('img')\">"
BREAK_OUT = "</script><script>window.ran('break-out')</script>"
"""A column name that ends the page's embedded JSON script and starts one of its own."""
SVG = "<svg onload=\"window.ran('svg')\"></svg>"
BIDI = "amount\u202egnp.exe\u2066\u2069\u202a\u202c\u200b\x00\x07\x85x"
"""Direction-changing, zero-width and control characters: shown as ``amountgnp.exex``."""
ENTITY = "a&amp;b"
"""An HTML entity, to be shown as its characters, not decoded."""
SCRIPTED = (ATTRIBUTE, TAG, BREAK_OUT, SVG)
"""The column names that would run script if they reached the page as markup."""
COLUMNS = (*SCRIPTED, BIDI, ENTITY)
"""Every hostile column of :data:`TABLE`, each tagged PII (so each is a finding's row)."""
STYLE = "</style><style>body{background:url(https://evil.example/x)}</style>"
NOTE = f"see {STYLE} \u202eevil"
"""The deprecation note of ``legacy.feed``: a style break-out that would fetch, and a bidi
override."""
WATCH = "window.ran = (what) => { (window.hostile = window.hostile || []).push(what); };"
"""Installed before the page's own script in a browser: what hostile runs is listed here."""


def hostile_report(folder: Path) -> Path:
    """The HTML report (``folder/page.html``) of a dry-run scan of the hostile catalog.

    The catalog, loaded through the installed command: :data:`TABLE` with the
    :data:`COLUMNS`, a deprecated ``legacy.feed`` whose note is :data:`NOTE`, and a model
    trained on both.
    """
    mcps = [
        *dataset(
            TABLE,
            fields=[(name, "string") for name in COLUMNS],
            field_tags={name: ["PII"] for name in COLUMNS},
        ),
        *dataset("legacy.feed", fields=[("a", "string")], deprecated=True, deprecation_note=NOTE),
        *ml_model("model", training_data=[dataset_urn(TABLE), dataset_urn("legacy.feed")]),
    ]
    metadata = write_metadata_file(folder / "metadata.json", mcps)
    home = folder / "home"
    loaded = run_cli(home, "catalog", "load", str(metadata))
    assert loaded.code == 0, loaded.stderr
    out = folder / "page.html"
    ran = run_cli(home, "scan", "--dry-run", "--format", "html", "--output", str(out))
    assert ran.code == 0, ran.stderr
    return out
