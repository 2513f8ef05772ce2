"""One headless Chromium and one demo report for the browser tests.

They skip, saying why, where Chromium cannot be found; the report is built as a user builds
it (``mlcopilot demo``, then ``mlcopilot scan --format html``) once per session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.model import Lineage
from mlcopilot.protocols import WalkLimits
from testing.browser import (
    DEMO_MODEL,
    Chromium,
    DemoReport,
    build_demo_report,
    chromium,
    find_chromium,
    why_no_chromium,
)


# Package, not session: while Playwright's sync API is started, its event loop counts as
# running in the main thread, and every later test that runs a loop of its own (DataHub's
# ingestion, the MCP client) would fail with "This event loop is already running".
@pytest.fixture(scope="package")
def browser() -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        pytest.skip(why_no_chromium())
    with chromium(executable) as launched:
        yield launched


@dataclass(frozen=True, slots=True)
class Demo:
    """The demo's HTML report, the same scan's JSON report, and the lineage it walked."""

    files: DemoReport
    report: dict[str, Any]
    lineage: Lineage

    @property
    def html(self) -> Path:
        return self.files.html

    @property
    def findings(self) -> list[dict[str, Any]]:
        (model,) = self.report["models"]
        found: list[dict[str, Any]] = model["findings"]
        return found


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    files = build_demo_report(tmp_path_factory.mktemp("demo-report"))
    report = json.loads(files.json.read_text(encoding="utf-8"))
    # The oracle for the drawing: the catalog walked again, apart from the report's code.
    with LiteCatalog(files.home / "catalog.db") as catalog:
        lineage = catalog.lineage(DEMO_MODEL, WalkLimits())
    return Demo(files=files, report=report, lineage=lineage)
