"""Where one estate scan's time and memory go, stage by stage (not part of ``make bench``).

``python -m benchmarks.stages estate-10000x100000 [--state S.db] [--types]`` runs the dry run
that :mod:`benchmarks.measure` times, against the stand-in with its usual latency, and prints
a line as each stage ends: wall and CPU seconds since the scan started, RSS then and the peak
so far. With ``--state``, that stored state is scanned (a second scan; make one with
``--store S.db``, the stored first scan :mod:`benchmarks.run` makes before ``datahub-second``).
At the end of each stage, ``--types`` adds the largest object types by shallow size (slow at
the largest estate, and blind to what gc does not track: atomic-only dicts and tuples);
``--trace lineno|filename`` where the live memory was allocated (tracemalloc: use it on the
1,000-model estate); ``--trim`` the RSS once the C heap gave its free memory back (it gave
14 MB at the 10,000-model walk's end: the rest is live). A ``make bench`` run measures the
targets; this says which stage to look at when one moves.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.catalogs import ensure
from benchmarks.measure import NOW, cpu_s
from benchmarks.procs import peak_rss_mb
from benchmarks.run import CASES, LATENCY, LIMITS, serving
from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.checks import load_checks
from mlcopilot.protocols import WalkLimits
from mlcopilot.scan import Delivery, ScanOptions
from mlcopilot.store import open_store
from mlcopilot.store.sql import SqlStore

scan_module = sys.modules["mlcopilot.scan"]  # the package, whose `scan` attribute is a function


class _Stages:
    """Prints each wrapped stage's end: elapsed wall and CPU, RSS, peak RSS (and what is asked)."""

    def __init__(self, *, types: bool, trim: bool, trace: str) -> None:
        self.types = types
        self.trace = trace
        self.trim = trim
        self.start()

    def start(self) -> None:
        """Count from now."""
        self.started, self.cpu0 = time.perf_counter(), cpu_s()

    def line(self, label: str) -> None:
        peak = peak_rss_mb()
        wall, cpu = time.perf_counter() - self.started, cpu_s() - self.cpu0
        print(
            f"{label:<32} wall {wall:7.1f} s  cpu {cpu:7.1f} s  rss {_rss_mb():6.0f} MB  "
            f"peak {peak:6.0f} MB",
            flush=True,
        )
        if self.types:
            print(_largest_types(), flush=True)
        if self.trace:
            top = tracemalloc.take_snapshot().statistics(self.trace)[:15]
            traced = tracemalloc.get_traced_memory()[0] / 2**20
            print(f"    traced in all: {traced:.1f} MB", flush=True)
            print("\n".join(f"    {stat}" for stat in top), flush=True)
        if self.trim:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            print(f"{'':<32} after malloc_trim: rss {_rss_mb():6.0f} MB", flush=True)

    def wrap(self, owner: Any, name: str, label: str | None = None) -> None:
        """Replace ``owner.name`` by a wrapper printing a line when it returns."""
        inner: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            result = inner(*args, **kwargs)
            if isinstance(result, Iterator):
                result = list(result)  # a generator's work is the stage's
            self.line(label or name)
            return result

        setattr(owner, name, timed)


def _rss_mb() -> float:
    """This process's resident memory now (``ru_maxrss`` is only the peak)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def _largest_types(top: int = 12) -> str:
    """The ``top`` object types by shallow size; strings (untracked by gc) found by reference."""
    sizes: Counter[str] = Counter()
    tracked = gc.get_objects()
    for obj in tracked:
        sizes[type(obj).__name__] += sys.getsizeof(obj)
    strings = {id(o): sys.getsizeof(o) for o in gc.get_referents(*tracked) if type(o) is str}
    sizes["str"] = sum(strings.values())
    del tracked
    return "\n".join(f"    {n:<28} {b / 2**20:8.1f} MB" for n, b in sizes.most_common(top))


def main(argv: list[str] | None = None) -> int:
    """Run one scan of an estate with every stage wrapped; print a line as each ends."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("case", choices=[c.name for c in CASES if c.name.startswith("estate")])
    parser.add_argument("--state", type=Path, help="scan this stored state (a second scan)")
    parser.add_argument("--store", type=Path, help="run the stored first scan into this file")
    parser.add_argument("--types", action="store_true", help="largest object types per stage")
    parser.add_argument(
        "--trace",
        choices=["lineno", "filename"],
        help="where live memory was allocated, by line or file (slow: tracemalloc)",
    )
    parser.add_argument(
        "--trim", action="store_true", help="give free heap memory back (malloc_trim) per stage"
    )
    args = parser.parse_args(argv)
    case = next(c for c in CASES if c.name == args.case)
    path = ensure(case.name, case.shape, loader=case.loader)
    stages = _Stages(types=args.types, trim=args.trim, trace=args.trace or "")
    if args.trace:
        tracemalloc.start()
    for name in ("walk_and_check", "_reconcile_and_plan", "_previous", "reconcile"):
        stages.wrap(scan_module, name)
    stages.wrap(scan_module, "_plan_writeback")
    stages.wrap(SqlStore, "planned_notifications", "store.planned_notifications")
    stages.wrap(SqlStore, "record_scan", "store.record_scan")
    stages.wrap(DataHubCatalog, "apply", "catalog.apply")
    state = args.store or args.state
    with serving(path, LATENCY) as server:
        catalog = DataHubCatalog(DataHubSettings(server=server["url"]))
        # A file, as the measured scans have.
        fresh = Path(tempfile.mkdtemp(prefix="mlcopilot-stages-")) / "state.db"
        store = open_store(f"sqlite:///{state or fresh}")
        stages.start()
        try:
            scan_module.scan(
                catalog,
                store,
                load_checks(),
                ScanOptions(now=NOW, dry_run=args.store is None, limits=WalkLimits(**LIMITS)),
                delivery=Delivery(deliver=False) if args.store else None,
            )
        finally:
            catalog.close()
            store.close()
    stages.line("scan")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
