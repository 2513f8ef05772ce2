"""Regenerate the README's picture of the HTML report: docs/images/html-report.png.

Runs the demo in a temporary folder, writes its report (`mlcopilot report`, the incidents'
whole history), opens it in headless Debian Chromium with the network shut, selects the PII
finding so its path is lit, and saves a full-page screenshot. Needs the dev install and
Debian's chromium (`make test` installs it as root):

    .venv/bin/python -m scripts.screenshot_report [OUTPUT.png]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from testing.browser import build_demo_report, chromium, find_chromium, why_no_chromium

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "images" / "html-report.png"
VIEWPORT = (1200, 800)


def main(argv: list[str]) -> int:
    """Write the screenshot to ``argv[0]`` (default: docs/images/html-report.png)."""
    output = Path(argv[0]) if argv else OUTPUT
    executable = find_chromium()
    if executable is None:
        print(f"error: {why_no_chromium()}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mlcopilot-screenshot-") as folder:
        report = build_demo_report(Path(folder))
        with (
            chromium(executable) as browser,
            browser.open(report.history, viewport=VIEWPORT) as page,
        ):
            page.page.locator("tr.finding", has_text="pii_exposure").locator("td").first.click()
            png = page.screenshot()
            if page.traffic.foreign or page.traffic.page_errors:
                print(f"error: the report fetched or failed: {page.traffic}", file=sys.stderr)
                return 1
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(png)
    print(f"Wrote {output} ({len(png):,} bytes).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
