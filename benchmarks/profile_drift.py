"""``python -m benchmarks.profile_drift``: what DataHub profiles cost a ``lite:`` scan.

The one-10000 benchmark catalog (one model, 10,000 upstream entities) is copied and every
upstream dataset given 30 ``datasetProfile`` s (a month of daily profiles, written newest
first as a backfill writes them), each with four column profiles: two numeric with the SQL
profiler's five quantiles, two categorical. Half the profiles are older than the model's
training time. Timed, best of three, each on a fresh catalog (nothing cached):

- the walk on the plain copy and on the one with profiles (the difference is reading each
  dataset's newest profile by ``timestampMillis`` with the entities);
- choosing the baselines of a first scan (each dataset's newest profile at or before the
  training time, from every stored event), what a scan stores once;
- the ``profile_drift`` check over the walked lineage, with those baselines.

The figures are per 10,000 upstream entities. ``--write`` puts them in
``benchmarks/RESULTS.md`` between this module's markers.
"""

from __future__ import annotations

import argparse
import functools
import gc
import shutil
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from datahub.metadata import schema_classes as sc

from benchmarks.catalogs import ensure
from benchmarks.generate import Shape
from benchmarks.results_md import replace_block
from benchmarks.signals import best_of, walk
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks.profile_drift import ProfileDrift, ProfileDriftConfig
from mlcopilot.model import EntityType, Lineage, ProfileBaseline

N = 10_000
PROFILES = 30
NOW = datetime(2036, 1, 1, tzinfo=UTC)
DAY = 86_400_000
START = "<!-- generated: python -m benchmarks.profile_drift -->"
END = "<!-- end generated: profile_drift -->"
Z = (-1.645, -0.6745, 0.0, 0.6745, 1.645)


def add_profiles(path: Path, lineage: Lineage, trained_ms: int) -> int:
    """Write :data:`PROFILES` profiles per dataset around the training time; how many."""
    datasets = [
        n for n in lineage.nodes.values() if n.entity_type is EntityType.DATASET and n.exists
    ]
    written = 0
    first = trained_ms - (PROFILES // 2) * DAY
    with LiteCatalog(path) as catalog, catalog.writing() as writer:
        for i, node in enumerate(datasets):
            for day in reversed(range(PROFILES)):  # newest first: write order is not time order
                shifted = i % 10 == 0 and day > PROFILES // 2  # one in ten drifts after training
                writer.put(node.urn, "datasetProfile", _profile(first + day * DAY, shifted), None)
                written += 1
    return written


@functools.cache
def _profile(at: int, shifted: bool) -> Mapping[str, Any]:
    """One profile's JSON, built once (the writer only reads it).

    Every dataset shares the same sixty; building each through the SDK's validating
    ``to_obj`` was most of an enriched catalog's build (the suite's byte-identical scenarios
    build three).
    """
    mean = 107.5 if shifted else 100.0
    numeric = [
        sc.DatasetFieldProfileClass(
            fieldPath=name,
            uniqueCount=90_000,
            uniqueProportion=0.9,
            nullCount=0,
            nullProportion=0.0,
            mean=repr(mean),
            stdev="15.0",
            quantiles=[
                sc.QuantileClass(quantile=str(p), value=repr(mean + 15 * z))
                for p, z in zip((0.05, 0.25, 0.5, 0.75, 0.95), Z, strict=True)
            ],
        )
        for name in ("amount", "price")
    ]
    categorical = [
        sc.DatasetFieldProfileClass(
            fieldPath=name, uniqueCount=4, uniqueProportion=4e-5, nullCount=0, nullProportion=0.0
        )
        for name in ("region", "status")
    ]
    return ax.to_json(
        sc.DatasetProfileClass(
            timestampMillis=at, rowCount=100_000, columnCount=4, fieldProfiles=numeric + categorical
        )
    )


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and (with ``--write``) update RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else "")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    base = ensure(f"one-{N}", Shape.one_model(N))
    gc.set_threshold(20_000, 10, 10)  # as a scan runs (mlcopilot.scan)
    from mlcopilot.scan import checking

    check = ProfileDrift(ProfileDriftConfig())
    with tempfile.TemporaryDirectory() as tmp:
        profiled = Path(tmp) / "profiles.db"
        shutil.copy(base, profiled)
        plain_s, plain = best_of(3, lambda: walk(base))
        model = plain.nodes[plain.root]
        assert model.trained_at is not None
        written = add_profiles(profiled, plain, ax.datetime_to_ms(model.trained_at))
        profiles_s, lineage = best_of(3, lambda: walk(profiled))
        datasets = [
            u for u, n in lineage.nodes.items() if n.entity_type is EntityType.DATASET and n.exists
        ]

        def baselines() -> dict[str, ProfileBaseline]:
            with LiteCatalog(profiled) as catalog:
                found = catalog.profiles_before([(u, model.trained_at) for u in datasets])
            return {
                u: ProfileBaseline(lineage.root, u, p, "history", NOW)
                for (u, _), p in found.items()
                if p is not None
            }

        baseline_s, known = best_of(3, baselines)
        check_s, (report, _) = best_of(
            3, lambda: checking.check_model([check], lineage, {}, NOW, known)
        )
    entities = len(lineage.nodes) - 1
    per = N / entities
    added = profiles_s - plain_s
    findings = len(report.findings)
    lines = [
        START,
        "",
        f"One model, {entities:,} upstream entities ({len(datasets):,} datasets), with "
        f"{written:,} profiles ({PROFILES} per dataset, 4 column profiles each, written newest "
        "first); `lite:`, best of 3:",
        "",
        "| step | seconds | per 10,000 upstream entities |",
        "|---|--:|--:|",
        f"| walk, no profiles | {plain_s:.2f} | {plain_s * per:.2f} s |",
        f"| walk, with profiles (each dataset's newest read) | {profiles_s:.2f} | "
        f"{profiles_s * per:.2f} s |",
        f"| **added by reading the newest profiles** | {added:.2f} | **{added * per:.2f} s** |",
        f"| baselines at training time (first scan only; stored after) | {baseline_s:.2f} | "
        f"**{baseline_s * per:.2f} s** |",
        f"| `profile_drift` ({findings:,} findings) | {check_s:.2f} | **{check_s * per:.2f} s** |",
        "",
        END,
    ]
    block = "\n".join(lines)
    print(block)
    if args.write:
        replace_block(block, start=START, end=END, heading="Profile drift")


if __name__ == "__main__":
    main()
