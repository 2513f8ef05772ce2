"""The benchmark's per-process CPU and memory figures read ``/proc`` right."""

from __future__ import annotations

import os
import sys
import time

import pytest

from benchmarks.procs import MACHINE, ProcessSampler

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_process_s_cpu_seconds_and_memory_are_what_it_used() -> None:
    sampler = ProcessSampler(lambda: {os.getpid(): "me", 2**22 + 7: "no such process"})
    sampler.sample()
    started = time.time()
    burnt = time.process_time()
    ballast = bytearray(64 * 1024 * 1024)  # touched: resident, not just reserved
    ballast[::4096] = b"x" * len(ballast[::4096])
    while time.process_time() - burnt < 0.5:
        pass
    sampler.sample()
    figures = sampler.summary(started - 1, time.time() + 1)
    assert "no such process" not in figures
    me = figures["me"]
    assert 0.45 <= me["cpu_s"] <= 1.5  # our own CPU time (and a little for the sampling)
    assert me["rss_mb"] >= 64
    assert figures[MACHINE]["cpu_s"] >= me["cpu_s"] - 0.05
    del ballast
