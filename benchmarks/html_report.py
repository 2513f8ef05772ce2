"""``python -m benchmarks.html_report``: the HTML report's size and render time by graph size.

Renders synthetic scan results (``testing/synthetic_lineage.py``: one model, its features and
layers of datasets, each fed by two or three of the next) of 100, 300, 1,000 and 3,000 nodes,
each size in a fresh process, and prints a markdown table: nodes, edges, bytes, the first
render (cold: as ``scan --format html`` renders, urn parsing and imports included) and the best
of 3 more (warm caches). Layout included; the scan itself is not. Only measures: nothing here
is asserted.
"""

from __future__ import annotations

import subprocess
import sys
import time

from mlcopilot.report.html import render_html
from testing.synthetic_lineage import big_scan

SIZES = (100, 300, 1_000, 3_000)
RUNS = 3


def measure(size: int) -> str:
    """One table row for a graph of ``size`` nodes."""
    result = big_scan(size)
    edges = len(result.models[0].lineage.edges)
    started = time.perf_counter()
    page = render_html(result)
    first = time.perf_counter() - started
    best = float("inf")
    for _ in range(RUNS):
        started = time.perf_counter()
        render_html(result)
        best = min(best, time.perf_counter() - started)
    return f"| {size:,} | {edges:,} | {len(page.encode('utf-8')):,} | {first:.2f} | {best:.2f} |"


def main() -> int:
    """Print the table (or, with ``--size N``, one row of it)."""
    if len(sys.argv) == 3 and sys.argv[1] == "--size":
        print(measure(int(sys.argv[2])))
        return 0
    print("| nodes | edges | bytes | first render (s) | best of 3 after (s) |")
    print("|---:|---:|---:|---:|---:|")
    for size in SIZES:
        command = [sys.executable, "-m", "benchmarks.html_report", "--size", str(size)]
        row = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        print(row.strip(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
