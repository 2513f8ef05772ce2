"""A benchmark process's peak memory is its own, however large the process that started it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PARENT = """
import json, subprocess, sys
held = bytearray(400 * 2**20)
held[:: 4096] = b"x" * len(held[:: 4096])  # touched: 400 MB resident
child = (
    "import json, resource; from benchmarks.procs import peak_rss_mb; "
    "print(json.dumps([peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))"
)
ran = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
print(ran.stdout)
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_a_process_started_by_a_large_one_reports_its_own_peak() -> None:
    root = Path(__file__).resolve().parents[1]
    ran = subprocess.run(
        [sys.executable, "-c", PARENT], capture_output=True, text=True, check=True, cwd=root
    )
    own, inherited = json.loads(ran.stdout)
    assert inherited >= 400  # what ru_maxrss says: the parent's size at the fork
    assert own < 300, own
