"""``python -m benchmarks.signals``: what DataHub's quality signals cost a ``lite:`` scan.

The one-10000 benchmark catalog (one model, 10,000 upstream entities) is copied and given what
a dbt- and GE-tested estate holds: two assertions per upstream dataset (a dbt test on a
column, a GE expectation on the rows), five runs of each written out of time order, the
latest failing for one dataset in ten, and an incident on one dataset in fifty (half of them
resolved). Timed, best of three, each on a fresh catalog (nothing cached):

- the walk of the model's lineage on the plain copy and on the one with signals (the
  difference is the assertion and incident index and their translation);
- the two checks that read them (``failing_assertion``, ``upstream_incident``) over the walked
  lineage.

The figures are per 10,000 upstream entities and replace the part of ``benchmarks/RESULTS.md``
between this module's markers.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from datahub.metadata import schema_classes as sc

from benchmarks.catalogs import ensure
from benchmarks.generate import Shape
from benchmarks.results_md import replace_block
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks.failing_assertion import FailingAssertion, FailingAssertionConfig
from mlcopilot.checks.upstream_incident import UpstreamIncident, UpstreamIncidentConfig
from mlcopilot.model import EntityType, Lineage
from mlcopilot.protocols import WalkLimits

N = 10_000
LIMITS = WalkLimits(max_hops=50, max_nodes=250_000)
NOW = datetime(2036, 1, 1, tzinfo=UTC)
T0 = 1_767_225_600_000  # 2026-01-01, epoch ms
HOUR = 3_600_000
RUNS = 5
START, END = "<!-- generated: python -m benchmarks.signals -->", "<!-- end generated: signals -->"


def best_of(runs: int, step: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``runs`` timings of ``step``, and its last result."""
    best, result = float("inf"), None
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        result = step()
        best = min(best, time.perf_counter() - started)
    return best, result


def walk(path: Path) -> Lineage:
    """The model's lineage, read from a fresh catalog."""
    with LiteCatalog(path) as catalog:
        (model,) = catalog.models()
        return catalog.lineage(model, LIMITS)


def add_signals(path: Path, lineage: Lineage) -> dict[str, int]:
    """Write the assertions, runs and incidents described above; return what was written."""
    datasets = [
        n for n in lineage.nodes.values() if n.entity_type is EntityType.DATASET and n.exists
    ]
    written = {"datasets": len(datasets), "assertions": 0, "runs": 0, "incidents": 0}
    with LiteCatalog(path) as catalog, catalog.writing() as writer:
        for i, node in enumerate(datasets):
            column = node.schema.fields[0].path if node.schema and node.schema.fields else None
            failing = i % 10 == 0
            for kind, info in (("dbt", _dbt_test(node.urn, column)), ("ge", _ge(node.urn))):
                urn = f"urn:li:assertion:{kind}-{i}"
                writer.put(urn, "assertionInfo", info, None)
                platform = {"platform": f"urn:li:dataPlatform:{kind}"}
                writer.put(urn, "dataPlatformInstance", platform, None)
                written["assertions"] += 1
                # Newest first, as a backfill writes them: write order is not time order.
                for run in reversed(range(RUNS)):
                    result = (
                        "FAILURE" if failing and kind == "dbt" and run == RUNS - 1 else "SUCCESS"
                    )
                    writer.put(urn, ax.ASSERTION_RUN_EVENT, _run(urn, node.urn, run, result), None)
                    written["runs"] += 1
            if i % 50 == 0:
                active = i % 100 == 0
                writer.put(
                    f"urn:li:incident:ops-{i}", "incidentInfo", _incident(node.urn, active), None
                )
                written["incidents"] += 1
    return written


def _dbt_test(dataset: str, column: str | None) -> dict[str, Any]:
    field = f"urn:li:schemaField:({dataset},{column})" if column else None
    return ax.to_json(
        sc.AssertionInfoClass(
            type=sc.AssertionTypeClass.CUSTOM,
            source=sc.AssertionSourceClass(type=sc.AssertionSourceTypeClass.EXTERNAL),
            customAssertion=sc.CustomAssertionInfoClass(
                type="dbt",
                entity=dataset,
                field=field,
                fields=[field] if field else None,
                nativeType=f"not_null_{column}",
            ),
        )
    )


def _ge(dataset: str) -> dict[str, Any]:
    return ax.to_json(
        sc.AssertionInfoClass(
            type=sc.AssertionTypeClass.DATASET,
            datasetAssertion=sc.DatasetAssertionInfoClass(
                dataset=dataset,
                scope=sc.DatasetAssertionScopeClass.DATASET_ROWS,
                operator=sc.AssertionStdOperatorClass.GREATER_THAN,
                nativeType="expect_table_row_count_to_be_between",
            ),
        )
    )


def _run(assertion: str, dataset: str, run: int, result: str) -> dict[str, Any]:
    return ax.to_json(
        sc.AssertionRunEventClass(
            timestampMillis=T0 + run * HOUR,
            runId=f"run-{run}",
            asserteeUrn=dataset,
            assertionUrn=assertion,
            status=sc.AssertionRunStatusClass.COMPLETE,
            result=sc.AssertionResultClass(type=result, nativeResults={"rows": str(1000 + run)}),
        )
    )


def _incident(dataset: str, active: bool) -> dict[str, Any]:
    stamp = sc.AuditStampClass(time=T0, actor="urn:li:corpuser:ops")
    return ax.to_json(
        sc.IncidentInfoClass(
            type="OPERATIONAL",
            title="Late load",
            entities=[dataset],
            priority=1,
            status=sc.IncidentStatusClass(
                state="ACTIVE" if active else "RESOLVED", lastUpdated=stamp
            ),
            source=sc.IncidentSourceClass(type="MANUAL"),
            created=stamp,
        )
    )


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and (unless ``--no-write``) update RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else "")
    parser.add_argument("--no-write", action="store_true", help="only print the figures")
    args = parser.parse_args(argv)
    base = ensure(f"one-{N}", Shape.one_model(N))
    gc.set_threshold(20_000, 10, 10)  # as a scan runs (mlcopilot.scan)
    from mlcopilot.protocols import Check
    from mlcopilot.scan import checking

    checks: list[Check] = [
        FailingAssertion(FailingAssertionConfig()),
        UpstreamIncident(UpstreamIncidentConfig()),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        signals = Path(tmp) / "signals.db"
        shutil.copy(base, signals)
        plain_s, plain = best_of(3, lambda: walk(base))
        written = add_signals(signals, plain)
        signals_s, lineage = best_of(3, lambda: walk(signals))
        checks_s, (report, _) = best_of(3, lambda: checking.check_model(checks, lineage, {}, NOW))
    entities = len(lineage.nodes) - 1
    per = N / entities
    added = signals_s - plain_s
    findings = len(report.findings)
    lines = [
        START,
        "",
        f"One model, {entities:,} upstream entities ({written['datasets']:,} datasets), with "
        f"{written['assertions']:,} assertions, {written['runs']:,} runs (written newest "
        f"first) and {written['incidents']:,} incidents (half active); `lite:`, best of 3:",
        "",
        "| step | seconds | per 10,000 upstream entities |",
        "|---|--:|--:|",
        f"| walk, no signals | {plain_s:.2f} | {plain_s * per:.2f} s |",
        f"| walk, with signals | {signals_s:.2f} | {signals_s * per:.2f} s |",
        f"| **added by reading the signals** | {added:.2f} | **{added * per:.2f} s** |",
        f"| `failing_assertion` + `upstream_incident` ({findings:,} findings) | "
        f"{checks_s:.2f} | **{checks_s * per:.2f} s** |",
        "",
        END,
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        replace_block(text, start=START, end=END, heading="DataHub's quality signals")


if __name__ == "__main__":
    main()
