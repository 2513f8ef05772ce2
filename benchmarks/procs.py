"""Where a benchmark's CPU goes: CPU seconds and resident memory per process, from ``/proc``.

A :class:`ProcessSampler` is given the processes of a run by role (the watcher, each relay
lane, the DataHub stand-in, the broker...) and samples each one's user + system CPU time
(``/proc/PID/stat``) and resident set (``VmRSS`` in ``/proc/PID/status``), with the machine's
busy CPU time (``/proc/stat``), whenever :meth:`ProcessSampler.sample` is called. A role's
figure over a span is the difference of its first and last samples: CPU seconds, the share
of one CPU that is, and the largest RSS seen. Linux only; elsewhere every figure is absent.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from testing.broker import proc_stat

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
"""Clock ticks a second: the unit of ``/proc``'s CPU times."""
MACHINE = "the whole machine"


def peak_rss_mb() -> float:
    """This process's own peak resident memory in MB: ``VmHWM``, where Linux has it.

    Not ``ru_maxrss``: Linux keeps the largest RSS from before ``exec`` in it, so a process
    started by a large parent reports at least the parent's size at the fork. A
    ``benchmarks.run`` that built its catalogs in-process gave every scan measured after it
    built the one of 10,000 entities a "peak" of 377 MB, and 764 after the one of 100,000.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s(pid: int) -> float | None:
    fields = proc_stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def _machine_busy_s() -> float | None:
    try:
        first = Path("/proc/stat").read_text(encoding="utf-8").splitlines()[0]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first.split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICKS


class ProcessSampler:
    """Samples the processes ``roles()`` names (pid → role; asked at every sample)."""

    def __init__(self, roles: Callable[[], Mapping[int, str]]) -> None:
        self._roles = roles
        self.samples: list[dict[str, Any]] = []

    def sample(self) -> None:
        """One sample: each role's CPU seconds (summed over its pids) and RSS, and the time."""
        cpu: dict[str, float] = {}
        rss: dict[str, float] = {}
        for pid, role in self._roles().items():
            seconds, mb = _cpu_s(pid), _rss_mb(pid)
            if seconds is None or mb is None:
                continue  # gone between the listing and the read
            cpu[role] = cpu.get(role, 0.0) + seconds
            rss[role] = rss.get(role, 0.0) + mb
        busy = _machine_busy_s()
        if busy is not None:
            cpu[MACHINE] = busy
        self.samples.append({"t": time.time(), "cpu_s": cpu, "rss_mb": rss})

    def summary(self, start: float, end: float) -> dict[str, dict[str, float]]:
        """Per role over the samples from ``start`` to ``end`` (epoch seconds).

        ``cpu_s`` (CPU seconds used), ``cpus`` (that over the span: 1.0 is one CPU busy),
        ``rss_mb`` (the largest resident set seen, for the machine absent).
        """
        span = [s for s in self.samples if start <= s["t"] <= end]
        if len(span) < 2:
            return {}
        first, last = span[0], span[-1]
        wall = last["t"] - first["t"]
        found: dict[str, dict[str, float]] = {}
        for role, used in last["cpu_s"].items():
            if role not in first["cpu_s"]:
                continue  # started during the span: its CPU before the first sample is unknown
            cpu_s = used - first["cpu_s"][role]
            found[role] = {"cpu_s": cpu_s, "cpus": cpu_s / wall if wall > 0 else 0.0}
            peaks = [s["rss_mb"][role] for s in span if role in s["rss_mb"]]
            if peaks:
                found[role]["rss_mb"] = max(peaks)
        return found


def named(command: str) -> list[int]:
    """The pids whose command name (``/proc/PID/comm``) is ``command``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if entry.joinpath("comm").read_text(encoding="utf-8").strip() == command:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def cmdline(pid: int) -> str:
    """The command line of ``pid`` (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
