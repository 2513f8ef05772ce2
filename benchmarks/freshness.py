"""``python -m benchmarks.freshness``: what learned freshness and classification cost a scan.

The one-10000 benchmark catalog (one model, 10,000 upstream entities) is copied and given what
a busy, classified estate holds: every upstream dataset twenty ``operation`` events (hourly,
written out of time order, one dataset in ten silent for a day) and a ``datasetProperties``
version, and classification as connectors write it on one dataset in five (a Snowflake
``<db>.<schema>.security:pii`` tag, a Lake Formation ``DataClassification:Sensitive`` tag on a
column, a DataHub classifier term). Timed, best of three, each on a fresh catalog:

- the walk of the model's lineage, on the plain copy and on the one with the history, each
  with the update history not read (the walk before this change) and read;
- ``stale_source`` (its cadence learned from that history) and ``pii_exposure`` (its marker
  patterns) over the walked lineage.

The figures are per 10,000 upstream entities and replace the part of ``benchmarks/RESULTS.md``
between this module's markers.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar
from unittest import mock

from datahub.metadata import schema_classes as sc

from benchmarks.catalogs import ensure
from benchmarks.generate import NOW_MS, Shape
from benchmarks.results_md import replace_block
from benchmarks.signals import N, walk
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks.pii_exposure import PiiExposure, PiiExposureConfig
from mlcopilot.checks.stale_source import StaleSource, StaleSourceConfig
from mlcopilot.model import EntityType, Lineage

HOUR = 3_600_000
T0 = NOW_MS + 24 * HOUR  # a day after the generated catalog's own operations
OPERATIONS = 20
NOW = datetime.fromtimestamp((T0 + OPERATIONS * HOUR) / 1000, tz=UTC)
"""The scan's clock: an hour after the newest operation."""
START, END = (
    "<!-- generated: python -m benchmarks.freshness -->",
    "<!-- end generated: freshness -->",
)
_T = TypeVar("_T")


def best_of(runs: int, step: Callable[[], _T]) -> tuple[float, _T]:
    """The least CPU time of ``runs`` runs of ``step``, and its last result.

    This process's CPU time, SQLite's included: the other processes of a busy machine do not
    count, as they would in wall-clock time.
    """
    best, result = float("inf"), None
    for _ in range(runs):
        gc.collect()
        started = time.process_time()
        result = step()
        best = min(best, time.process_time() - started)
    assert result is not None
    return best, result


def interleaved(path: Path, rounds: int = 7) -> tuple[float, float, Lineage]:
    """The fastest walk with the history unread and read, alternated (a busy machine drifts)."""
    before, after = float("inf"), float("inf")
    lineage = None
    for _ in range(rounds):
        with history_unread():
            before = min(before, best_of(1, lambda: walk(path))[0])
        seconds, lineage = best_of(1, lambda: walk(path))
        after = min(after, seconds)
    assert lineage is not None
    return before, after, lineage


@contextmanager
def history_unread() -> Iterator[None]:
    """The Lite backend as it was before it read update history."""
    with mock.patch.object(LiteCatalog, "_update_history", return_value={}):
        yield


def add_history(path: Path, lineage: Lineage) -> dict[str, int]:
    """Write the operations, properties versions and classification described above.

    Every dataset's newest operation is an hour before :data:`NOW`, so it is fresh by its
    hourly cadence; one in ten stopped a day earlier and is stale.
    """
    datasets = [
        n for n in lineage.nodes.values() if n.entity_type is EntityType.DATASET and n.exists
    ]
    written = {"datasets": len(datasets), "operations": 0, "classified": 0}
    shuffle = random.Random(13)
    with LiteCatalog(path) as catalog, catalog.writing() as writer:
        for i, node in enumerate(datasets):
            newest = T0 + (OPERATIONS - 1) * HOUR - (24 * HOUR if i % 10 == 0 else 0)
            times = [newest - k * HOUR for k in range(OPERATIONS)]
            shuffle.shuffle(times)
            for at in times:
                operation = sc.OperationClass(
                    timestampMillis=at, lastUpdatedTimestamp=at, operationType="INSERT"
                )
                writer.put(node.urn, "operation", ax.to_json(operation), None)
                written["operations"] += 1
            modified = sc.DatasetPropertiesClass(lastModified=sc.TimeStampClass(time=newest))
            writer.put(node.urn, "datasetProperties", ax.to_json(modified), None)
            if i % 5 == 0 and node.schema and node.schema.fields:
                column = node.schema.fields[0].path
                tags = sc.GlobalTagsClass(
                    tags=[sc.TagAssociationClass("urn:li:tag:prod.sales.security:pii")]
                )
                writer.put(node.urn, "globalTags", ax.to_json(tags), None)
                edits = sc.EditableSchemaMetadataClass(
                    editableSchemaFieldInfo=[
                        sc.EditableSchemaFieldInfoClass(
                            fieldPath=column,
                            globalTags=sc.GlobalTagsClass(
                                tags=[
                                    sc.TagAssociationClass(
                                        "urn:li:tag:DataClassification:Sensitive"
                                    )
                                ]
                            ),
                            glossaryTerms=sc.GlossaryTermsClass(
                                terms=[
                                    sc.GlossaryTermAssociationClass(
                                        "urn:li:glossaryTerm:Email_Address"
                                    )
                                ],
                                auditStamp=sc.AuditStampClass(time=T0, actor="urn:li:corpuser:x"),
                            ),
                        )
                    ]
                )
                writer.put(node.urn, "editableSchemaMetadata", ax.to_json(edits), None)
                written["classified"] += 1
    return written


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and (unless ``--no-write``) update RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else "")
    parser.add_argument("--no-write", action="store_true", help="only print the figures")
    args = parser.parse_args(argv)
    base = ensure(f"one-{N}", Shape.one_model(N))
    gc.set_threshold(20_000, 10, 10)  # as a scan runs (mlcopilot.scan)
    from mlcopilot.scan import checking

    stale = [StaleSource(StaleSourceConfig())]
    pii = [PiiExposure(PiiExposureConfig())]
    with tempfile.TemporaryDirectory() as tmp:
        busy = Path(tmp) / "busy.db"
        shutil.copy(base, busy)
        before_s, plain_s, plain = interleaved(base)
        written = add_history(busy, plain)
        busy_before_s, busy_s, lineage = interleaved(busy)
        stale_s, (stale_report, _) = best_of(
            3, lambda: checking.check_model(stale, lineage, {}, NOW)
        )
        pii_s, (pii_report, _) = best_of(3, lambda: checking.check_model(pii, lineage, {}, NOW))
    entities = len(lineage.nodes) - 1
    per = N / entities
    rows: list[tuple[str, float]] = [
        ("walk, no history stored, history not read (before)", before_s),
        ("walk, no history stored, history read", plain_s),
        ("walk, 20 operations per dataset, history not read (before)", busy_before_s),
        ("walk, 20 operations per dataset, history read", busy_s),
    ]
    lines = [
        START,
        "",
        f"One model, {entities:,} upstream entities ({written['datasets']:,} datasets), with "
        f"{written['operations']:,} operations (written out of time order) and "
        f"{written['classified']:,} classified datasets; `lite:`, CPU seconds (the least of 3 "
        "to 7 runs; the walks with and without the history reading alternate):",
        "",
        "| step | seconds | per 10,000 upstream entities |",
        "|---|--:|--:|",
        *(f"| {label} | {s:.2f} | {s * per:.2f} s |" for label, s in rows),
        f"| **added by reading the history, none stored** | {plain_s - before_s:.2f} | "
        f"**{(plain_s - before_s) * per:.2f} s** |",
        f"| **added by reading 20 operations per dataset** | {busy_s - busy_before_s:.2f} | "
        f"**{(busy_s - busy_before_s) * per:.2f} s** |",
        f"| `stale_source`, learned cadence ({len(stale_report.findings):,} findings) | "
        f"{stale_s:.2f} | **{stale_s * per:.2f} s** |",
        f"| `pii_exposure`, marker patterns ({len(pii_report.findings):,} findings) | "
        f"{pii_s:.2f} | **{pii_s * per:.2f} s** |",
        "",
        END,
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        replace_block(text, start=START, end=END, heading="Learned freshness and classification")


if __name__ == "__main__":
    main()
