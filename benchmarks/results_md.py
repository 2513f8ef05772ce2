"""Generated sections of benchmarks/RESULTS.md: each benchmark rewrites only its own block."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"


def replace_block(block: str, *, start: str, end: str, heading: str) -> None:
    """Put ``block`` (which begins with ``start`` and ends with ``end``) in RESULTS.md.

    The first time, it is appended under ``heading``.
    """
    current = RESULTS_MD.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(current):
        updated = pattern.sub(lambda _: block, current)
    else:
        updated = current.rstrip("\n") + f"\n\n## {heading}\n\n" + block + "\n"
    RESULTS_MD.write_text(updated, encoding="utf-8")
