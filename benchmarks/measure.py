"""One measurement in a fresh process: a scan through one backend, or the baseline walk.

Run by :mod:`benchmarks.run` as ``python -m benchmarks.measure SPEC_JSON``; prints one JSON
object. A fresh process per measurement makes its peak RSS (:func:`peak_rss_mb`) that
measurement's own.

What is timed (``wall_s``), for the product backends (``lite``, ``datahub``, ``mcp``): one
call of :func:`mlcopilot.scan.scan` with ``dry_run=True`` on a fresh SQLite state store — it
lists the models (when none are named), walks each model's lineage, runs the four built-in
checks on every upstream node, reads the training-time schema baselines, reconciles
incidents, plans the write-back and compares it with what the catalog holds (the dry run
writes nothing, so the cached catalog stays as generated). Catalog construction and closing
(for ``mcp:``, starting and stopping ``mcp-server-datahub``) are outside the timed span;
``walk_s`` is the part of it up to the last model's checks.

The baseline walks the way the product's original write-up did, through the real
``mcp-server-datahub`` with the official ``mcp`` client: breadth-first from the model, per
node one ``get_lineage`` (upstream, one hop, ``max_results=30``) and, per dataset, one
``list_schema_fields``. Where a node has more than 30 upstreams (``total`` says so), it asks
again with ``max_results`` raised to the total and ``offset=30`` — the original stopped at 30
and missed the rest; paging keeps the baseline's coverage equal to the product's, so the
ratio compares the same work. Calls are sequential, as the write-up's loop was.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.generate import NOW_MS
from benchmarks.procs import peak_rss_mb
from benchmarks.run import clear_stats, stats
from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.client import GmsClient
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.mcp.catalog import McpCatalog, McpOptions, find_server
from mlcopilot.checks import load_checks
from mlcopilot.protocols import Catalog, WalkLimits
from mlcopilot.scan import Delivery, ScanOptions, scan
from mlcopilot.store import open_store

NOW = datetime.fromtimestamp(NOW_MS / 1000, tz=UTC)
"""The scan's ``now``: the generator's fixed clock, so findings are reproducible."""


def _stats(control: str | None, before: float | None = None) -> dict[str, Any]:
    """The stand-in's figures for the requests since the clear (done by ``before``)."""
    return {} if control is None else stats(control, before)


def _clear(control: str | None) -> None:
    if control is not None:
        clear_stats(control)


def cpu_s() -> float:
    """CPU seconds this process has used (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _profiled(path: str | None) -> Iterator[None]:
    """Profile the block into ``path``: pyinstrument's text tree (``.txt``), else cProfile.

    pyinstrument samples, so its figures stay close to the unprofiled run; cProfile's
    per-call overhead inflates many small Python calls several times over.
    """
    if path is None:
        yield
        return
    if path.endswith(".txt"):
        from pyinstrument import Profiler

        sampler = Profiler(interval=0.001)
        sampler.start()
        try:
            yield
        finally:
            sampler.stop()
            text = sampler.output_text(unicode=True, color=False, show_all=False)
            # Paths relative to the repository, so a profile reads the same on any machine.
            text = text.replace(f"{Path(__file__).resolve().parent.parent}/", "")
            Path(path).write_text(text, encoding="utf-8")
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        profile.dump_stats(path)


def _catalog(spec: dict[str, Any], home: Path) -> Catalog:
    backend = spec["backend"]
    if backend == "lite":
        return LiteCatalog(spec["lite"])
    settings = DataHubSettings(server=spec["url"])
    if backend == "datahub":
        # A profile sees one thread: run the requests on it, so their parsing shows too.
        return (
            DataHubCatalog(settings, max_workers=1)
            if spec.get("profile")
            else DataHubCatalog(settings)
        )
    if backend == "mcp":
        return McpCatalog(settings, McpOptions(server_env={"HOME": str(home)}))
    raise ValueError(f"unknown backend {backend!r}")


class _Reads:
    """Counts the urns the DataHub client asks for, by kind (wraps :class:`GmsClient`)."""

    def __init__(self) -> None:
        self.entities = 0
        """Urns in ``entities`` queries and current-aspect ``batchGet`` items."""
        self.versions = 0
        """Items of ``batchGet`` calls for aspect versions (training-time schemas)."""
        graphql, batch_get = GmsClient.graphql, GmsClient.batch_get
        reads = self

        # Parameters named as the methods name them, so the wrappers have their signatures.
        def counted_graphql(
            self: GmsClient, operation: str, query: str, variables: Mapping[str, Any]
        ) -> dict[str, Any]:
            if operation == "mlcopilotEntities":
                reads.entities += len(variables.get("urns") or ())
            return graphql(self, operation, query, variables)

        def counted_batch_get(
            self: GmsClient,
            entity_type: str,
            items: Sequence[dict[str, Any]],
            *,
            system_metadata: bool = False,
        ) -> list[dict[str, Any]]:
            if system_metadata:
                reads.versions += len(items)
            else:
                reads.entities += len(items)
            return batch_get(self, entity_type, items, system_metadata=system_metadata)

        GmsClient.graphql = counted_graphql  # type: ignore[method-assign]
        GmsClient.batch_get = counted_batch_get  # type: ignore[method-assign]


def _first_scan(spec: dict[str, Any], home: Path, store: Any, limits: WalkLimits) -> dict[str, Any]:
    """A real (not dry-run) scan that stores baselines and incidents, writing nothing back.

    ``deliver=False`` commits the write-back and notifications to the outbox and stops: the
    catalog is not written, so the second scan sees the same catalog with a warm store. What
    it cost is returned too: it is the scan a user runs (the timed ones are dry runs), and
    the only one that stores an estate's million baselines and its write-back.
    """
    catalog = _catalog(spec, home)
    control = spec.get("control")
    _clear(control)
    cpu0, started = cpu_s(), time.perf_counter()
    try:
        result = scan(
            catalog,
            store,
            load_checks(),
            ScanOptions(now=NOW, limits=limits),
            delivery=Delivery(deliver=False),
        )
    finally:
        catalog.close()
    return {
        "first": True,
        "wall_s": time.perf_counter() - started,
        "cpu_s": cpu_s() - cpu0,
        "peak_rss_mb": peak_rss_mb(),
        "models": len(result.models),
        "findings": len(result.findings),
        "outbox_rows": len(result.notifications),
        "server": _stats(control),
    }


def measure_scan(spec: dict[str, Any]) -> dict[str, Any]:
    """Scan through one product backend; see the module docstring for what is timed.

    With ``"state"`` naming a state database, that store is used: with ``"first": true`` a
    stored scan runs (untimed) and nothing else; a later measurement with the same state is
    then the cost of every scan after the first, in a fresh process (its own peak RSS).
    """
    home = Path(tempfile.mkdtemp(prefix="mlcopilot-bench-home-"))
    os.environ["HOME"] = str(home)  # the SDK writes ~/.datahub; keep it out of the real home
    control = spec.get("control")
    limits = WalkLimits(max_hops=spec["max_hops"], max_nodes=spec["max_nodes"])
    store = open_store(f"sqlite:///{spec.get('state') or home / 'state.db'}")
    if spec.get("first"):
        recorded = _first_scan(spec, home, store, limits)
        store.close()
        return recorded
    reads = _Reads()
    catalog = _catalog(spec, home)
    checks = load_checks()
    walked: dict[str, Any] = {}
    lineage = catalog.lineage

    trail = Path(spec["trail"]) if spec.get("trail") else None

    def timed_lineage(root: str, limits: WalkLimits) -> Any:
        found = lineage(root, limits)
        walked["lineage_at"], walked["lineage_epoch"] = time.perf_counter(), time.time()
        walked["lineages"] = walked.get("lineages", 0) + 1
        if trail is not None:  # what a measurement stopped for taking too long still tells
            with trail.open("a", encoding="utf-8") as out:
                line = {
                    "lineage_s": walked["lineage_at"] - started,
                    "lineage_epoch": walked["lineage_epoch"],
                    "lineages": walked["lineages"],
                }
                out.write(json.dumps(line) + "\n")
        return found

    catalog.lineage = timed_lineage  # type: ignore[method-assign]

    def progress(done: int, total: int, model: str) -> None:
        if done == total:
            walked["at"], walked["epoch"] = time.perf_counter(), time.time()
            walked["rss"] = peak_rss_mb()
            walked["entities"] = reads.entities

    if spec["backend"] == "mcp":
        assert isinstance(catalog, McpCatalog)
        catalog.session.start()  # spawn the server outside the timed span
    _clear(control)
    cpu0, started = cpu_s(), time.perf_counter()
    with _profiled(spec.get("profile")):
        result = scan(
            catalog,
            store,
            checks,
            ScanOptions(now=NOW, dry_run=True, limits=limits),
            progress=progress,
        )
    wall = time.perf_counter() - started
    cpu = cpu_s() - cpu0
    served = _stats(control)
    walked["stats"] = _stats(control, walked["epoch"]) if "epoch" in walked else {}
    walked["lineage_stats"] = (
        _stats(control, walked["lineage_epoch"]) if "lineage_epoch" in walked else {}
    )
    catalog.close()
    store.close()
    models = result.models
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "walk_s": walked.get("at", started) - started,
        "lineage_s": walked.get("lineage_at", started) - started,
        "lineage_requests": (walked.get("lineage_stats") or {}).get("requests"),
        "lineage_busy_s": (walked.get("lineage_stats") or {}).get("handler_busy_s"),
        "walk_requests": (walked.get("stats") or {}).get("requests"),
        "walk_busy_s": (walked.get("stats") or {}).get("handler_busy_s"),
        "walk_injected_s": (walked.get("stats") or {}).get("injected_s"),
        "walk_peak_rss_mb": walked.get("rss"),
        "walk_entity_reads": walked.get("entities"),
        "entity_reads": reads.entities,
        "version_reads": reads.versions,
        "peak_rss_mb": peak_rss_mb(),
        "children_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "models": len(models),
        "upstream_checked": sum(len(m.lineage.nodes) - 1 for m in models),
        "unique_upstream": len(
            {u for m in models for u in m.lineage.nodes} - {m.urn for m in models}
        ),
        "truncated": sum(1 for m in models if m.lineage.truncated),
        "findings": len(result.findings),
        "writes": len(result.writes),
        "errors": sum(len(m.errors) for m in models),
        "server": served,
    }


# --- the baseline ------------------------------------------------------------------------------


def _tool_json(result: Any) -> Any:
    if result.structuredContent is not None:
        return result.structuredContent
    text = next((c.text for c in result.content if getattr(c, "text", None)), "")
    return json.loads(text) if text else {}


async def _baseline_walk(url: str, root: str, home: Path) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {"DATAHUB_GMS_URL": url, "DATAHUB_TELEMETRY_ENABLED": "false", "HOME": str(home)}
    command = find_server()
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    calls = {"get_lineage": 0, "list_schema_fields": 0}
    with open(home / "server.log", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            seen = {root}
            queue = deque([root])
            started = time.perf_counter()
            while queue:
                urn = queue.popleft()
                arguments = {"urn": urn, "upstream": True, "max_hops": 1, "max_results": 30}
                page = _tool_json(await session.call_tool("get_lineage", arguments))
                calls["get_lineage"] += 1
                upstreams = page.get("upstreams") or {}
                results = list(upstreams.get("searchResults") or [])
                total = int(upstreams.get("total") or 0)
                if total > len(results):
                    more = {**arguments, "max_results": total, "offset": len(results)}
                    rest = _tool_json(await session.call_tool("get_lineage", more))
                    calls["get_lineage"] += 1
                    results += (rest.get("upstreams") or {}).get("searchResults") or []
                for item in results:
                    found = (item.get("entity") or {}).get("urn")
                    if isinstance(found, str) and found not in seen:
                        seen.add(found)
                        queue.append(found)
                if urn.startswith("urn:li:dataset:"):
                    await session.call_tool("list_schema_fields", {"urn": urn})
                    calls["list_schema_fields"] += 1
            wall = time.perf_counter() - started
    return {"wall_s": wall, "reached": len(seen) - 1, "tool_calls": calls}


def measure_baseline(spec: dict[str, Any]) -> dict[str, Any]:
    """The original write-up's walk; see the module docstring."""
    home = Path(tempfile.mkdtemp(prefix="mlcopilot-bench-home-"))
    os.environ["HOME"] = str(home)
    control = spec.get("control")
    catalog = LiteCatalog(spec["lite"])
    (root,) = catalog.models()[:1]
    catalog.close()
    _clear(control)
    cpu0 = cpu_s()
    walked = asyncio.run(_baseline_walk(spec["url"], root, home))
    return {
        **walked,
        "cpu_s": cpu_s() - cpu0,
        "peak_rss_mb": peak_rss_mb(),
        "children_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "models": 1,
        "upstream_checked": walked["reached"],
        "server": _stats(control),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.measure SPEC_JSON``: print the measurement as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("spec", help="a JSON object: backend, lite, url, control, limits")
    args = parser.parse_args(argv)
    spec = json.loads(args.spec)
    os.environ["DATAHUB_TELEMETRY_ENABLED"] = "false"
    result = measure_baseline(spec) if spec["backend"] == "baseline" else measure_scan(spec)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
