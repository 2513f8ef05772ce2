"""``python -m benchmarks.downstream``: what "which models read this table?" costs, per backend.

The question the impact preview and the watcher ask
(:func:`mlcopilot.lineage.downstream.models_downstream`).
A raw table, ``raw.events``, feeds 1,000 models: three in four through features (sourced from
the raw table or from ``clean.events``, which an ETL job derives from it; all in one feature
table), one in four only as training data (a hop DataHub's lineage index does not have). The
estate is either just those 1,000 models, or those plus 3,000 that read another table.

Each backend answers twice, each time on a fresh catalog (nothing cached): through its own
batched reverse walk (``downstream_models``) and through the fallback a catalog without it
gets (walk every model upstream, once, in a prefetched batch per level, and index what each
reached). Both answers must be the same 1,000 models. ``datahub:`` and ``mcp:`` talk to the
stand-in GMS in its own process (``benchmarks.serve``) with 20 ms added to every request; the
counts are the requests GMS received (for ``mcp:``, the MCP server's and the SDK's together).
Wall seconds, best of three. The figures replace the part of ``benchmarks/RESULTS.md`` between
this module's markers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from datahub.emitter.mcp import MetadataChangeProposalWrapper

from benchmarks.results_md import replace_block
from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.mcp.catalog import McpCatalog, McpOptions
from mlcopilot.lineage.downstream import build_index, models_downstream
from mlcopilot.model import Urn
from mlcopilot.protocols import Catalog, WalkLimits
from testing.builders import (
    data_job,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_feature_table,
    ml_model,
)

FED = 1_000
FEATURES = 100
RAW = dataset_urn("raw.events")
LIMITS = WalkLimits()
LATENCY = 0.02
RUNS = 3
START, END = (
    "<!-- generated: python -m benchmarks.downstream -->",
    "<!-- end generated: downstream -->",
)


def estate(others: int) -> list[MetadataChangeProposalWrapper]:
    """``raw.events`` feeding :data:`FED` models, and ``others`` models that it does not."""
    columns = [("user_id", "string"), ("amount", "double")]
    mcps = [
        *dataset("raw.events", fields=columns),
        *dataset("clean.events", fields=columns, upstreams=["raw.events"]),
        *data_job("nightly", "clean_events", inputs=["raw.events"], outputs=["clean.events"]),
        *dataset("raw.other", fields=columns),
    ]
    features = []
    for i in range(FEATURES):
        source = "raw.events" if i % 2 else "clean.events"
        mcps += ml_feature("events", f"f{i:03d}", sources=[source], source_column="user_id")
        features.append(f"f{i:03d}")
    mcps += ml_feature_table("events", features=features)
    for i in range(FED):
        if i % 4 == 0:
            mcps += ml_model(f"fed{i:04d}", training_data=["raw.events"])
        else:
            chosen = [feature_urn("events", features[(i * k) % FEATURES]) for k in (1, 3, 7)]
            mcps += ml_model(f"fed{i:04d}", features=chosen)
    mcps += ml_feature("other", "o", sources=["raw.other"])
    for i in range(others):
        mcps += ml_model(f"other{i:04d}", features=[feature_urn("other", "o")])
    return mcps


def capability(catalog: Catalog) -> list[Urn]:
    """The catalog's own reverse walk."""
    return models_downstream(catalog, RAW, LIMITS)


def fallback(catalog: Catalog) -> list[Urn]:
    """What ``models_downstream`` does on a catalog without the capability."""
    return sorted(build_index(catalog, (), LIMITS).downstream(RAW))


@contextmanager
def served(lite: Path) -> Iterator[dict[str, str]]:
    """The stand-in over ``lite`` in a process of its own, with :data:`LATENCY`."""
    command = [sys.executable, "-m", "benchmarks.serve", str(lite), "--latency", str(LATENCY)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield json.loads(process.stdout.readline())
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)


def _stats(control: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{control}/stats", timeout=30) as response:
        stats: dict[str, Any] = json.load(response)
    return stats


def _clear(control: str) -> None:
    request = urllib.request.Request(f"{control}/clear", method="POST", data=b"")
    urllib.request.urlopen(request, timeout=30).close()


def measure(
    make: Callable[[], Catalog], answer: Callable[[Catalog], list[Urn]], control: str | None
) -> dict[str, Any]:
    """Best wall time of :data:`RUNS` fresh catalogs, the requests of that run, the answer."""
    best: dict[str, Any] = {"seconds": float("inf")}
    for _ in range(RUNS):
        catalog = make()
        try:
            if isinstance(catalog, McpCatalog):
                catalog.session.start()  # spawning the MCP server is not the question's cost
            if control is not None:
                _clear(control)
            started = time.perf_counter()
            found = answer(catalog)
            seconds = time.perf_counter() - started
        finally:
            catalog.close()
        stats = _stats(control) if control is not None else {}
        if seconds < best["seconds"]:
            graphql = sum(
                n for op, n in stats.get("by_operation", {}).items() if op.startswith("mlcopilot")
            )
            best = {
                "seconds": seconds,
                "requests": stats.get("requests"),
                "handler_s": stats.get("handler_s"),
                "graphql": graphql if control is not None else None,
                "found": found,
            }
    return best


def run_estate(others: int, tmp: Path) -> list[dict[str, Any]]:
    """Every backend's two answers on one estate."""
    lite = tmp / f"estate-{others}.db"
    with LiteCatalog(lite, create=True) as catalog:
        catalog.ingest(estate(others))
    rows: list[dict[str, Any]] = []
    expected = sorted(
        f"urn:li:mlModel:(urn:li:dataPlatform:mlflow,fed{i:04d},PROD)" for i in range(FED)
    )
    with served(lite) as spec:
        settings = DataHubSettings(server=spec["url"])
        home = tmp / "home"
        home.mkdir(exist_ok=True)
        makers: dict[str, Callable[[], Catalog]] = {
            "lite": lambda: LiteCatalog(lite),
            "datahub": lambda: DataHubCatalog(settings),
            "mcp": lambda: McpCatalog(settings, McpOptions(server_env={"HOME": str(home)})),
        }
        for backend, make in makers.items():
            control = None if backend == "lite" else spec["control"]
            for way, answer in (("downstream_models", capability), ("fallback", fallback)):
                figures = measure(make, answer, control)
                if figures["found"] != expected:
                    raise SystemExit(f"{backend} {way}: found {len(figures['found'])} models")
                rows.append({"models": FED + others, "backend": backend, "way": way, **figures})
                print(f"{backend} {way} {FED + others}: {figures['seconds']:.2f} s", flush=True)
    return rows


def _cell(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    """The RESULTS.md block."""
    lines = [
        START,
        "",
        f"`raw.events` feeding {FED:,} models (3 in 4 through {FEATURES} features, directly or "
        "via a derived table and its job; 1 in 4 only as training data); best of "
        f"{RUNS} fresh catalogs; stand-in GMS in its own process, {LATENCY * 1000:.0f} ms per "
        "request. `downstream_models` is the backend's batched reverse walk; the fallback "
        "walks every model of the estate (prefetched a level per batch) and indexes what each "
        "reached. Both found the same 1,000 models in every row. GMS requests: all the stand-in "
        "received during the answer (for `mcp:`, the MCP server's and the SDK's); GraphQL: "
        "those that were mlcopilot's own GraphQL operations; GMS handler s: the stand-in's own "
        "time answering them, summed (it runs several at once; the 20 ms are not in it). The "
        "machine is shared: the same row's wall time varied up to threefold between runs.",
        "",
        "| models in the estate | backend | answered by | wall s | GMS requests | GraphQL "
        "| GMS handler s |",
        "|--:|---|---|--:|--:|--:|--:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['models']:,} | `{row['backend']}:` | {row['way']} | {row['seconds']:.2f} | "
            f"{_cell(row['requests'])} | {_cell(row['graphql'])} | {_seconds(row['handler_s'])} |"
        )
    lines += [
        "",
        "The reverse walk's cost follows what is downstream of the table (per level: one "
        "`relationships` query per 1,000 urns, then the readers' aspects; the models' training "
        "data once), the fallback's the whole estate (every model listed and walked). "
        "`mcp:` lists the estate's models through the MCP `search` tool, 50 a call.",
        "",
        END,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and (unless ``--no-write``) update RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else "")
    parser.add_argument("--no-write", action="store_true", help="only print the figures")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mlcopilot-bench-downstream-") as tmp:
        for others in (0, 3 * FED):
            rows += run_estate(others, Path(tmp))
    text = table(rows)
    print(text)
    if not args.no_write:
        replace_block(text, start=START, end=END, heading="Downstream: which models read a table")


if __name__ == "__main__":
    main()
