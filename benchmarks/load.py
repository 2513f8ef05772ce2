"""``python -m benchmarks.load``: how fast ``catalog load`` streams a large metadata file.

Generates (once, cached in ``benchmarks/.cache/``) a ~200 MB DataHub metadata file of the
benchmark catalogs' realistic MCPs (schemas with field tags, lineage with column lineage,
operations, properties, features, models: :mod:`benchmarks.generate`), in two layouts:

- ``file-sink``: as DataHub's ``file`` sink writes it (``json.dumps(record, indent=4)``);
- ``compact``: the same kind of records without whitespace (more records per MB).

Each is loaded by the product's loader (:func:`mlcopilot.catalog.loader.load_metadata_files`)
into a new catalog, then loaded again into that catalog (every aspect unchanged), each in a
fresh process so ``ru_maxrss`` is that load's own peak RSS. The figures replace the part of
``benchmarks/RESULTS.md`` between this module's markers; ``--profile`` also writes a cProfile
summary to ``benchmarks/profiles/load-<layout>.txt``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.generate import Shape, generate

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS_MD = HERE / "RESULTS.md"
PROFILES = HERE / "profiles"
START, END = "<!-- generated: python -m benchmarks.load -->", "<!-- end generated: load -->"
LAYOUTS = {"file-sink": 4, "compact": None}
"""Layout name → ``json.dumps`` indent."""
TARGET_MB_S, TARGET_RSS_MB = 20.0, 400.0

_MEASURE = """
import cProfile, json, pstats, resource, sys, time
from pathlib import Path
from mlcopilot.catalog.loader import load_metadata_files
file, db, profile = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
wall, cpu = time.perf_counter(), time.process_time()
if profile:
    profiler = cProfile.Profile()
    summary = profiler.runcall(load_metadata_files, db, [file])
    import io, mlcopilot
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
    # Paths relative to the repository, so a profile reads the same on any machine.
    root = f"{Path(mlcopilot.__file__).resolve().parents[2]}/"
    Path(profile).write_text(out.getvalue().replace(root, ""), encoding="utf-8")
else:
    summary = load_metadata_files(db, [file])
print(json.dumps({
    "wall_s": time.perf_counter() - wall,
    "cpu_s": time.process_time() - cpu,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "reader_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    "records": summary.records,
    "new_versions": summary.new_versions,
}))
"""


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[load {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def ensure_file(layout: str, target_mb: int) -> Path:
    """The cached metadata file of ``layout``, about ``target_mb`` MB, written when missing."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"load-{layout}-{target_mb}mb.json"
    if path.exists():
        return path
    indent = LAYOUTS[layout]
    # Bytes per upstream entity, each record written as below (at the top level, plus ",\n").
    sample = generate(Shape.one_model(2000))
    per_entity = sum(len(json.dumps(r, indent=indent)) + 2 for r in sample) / 2000
    shape = Shape.one_model(int(target_mb * 1e6 / per_entity))
    log(f"writing {path.name} ({shape.datasets} datasets)")
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:  # streamed: the records are never all in memory
        out.write("[")
        for index, record in enumerate(generate(shape)):
            out.write(("," if index else "") + "\n" + json.dumps(record, indent=indent))
        out.write("\n]\n")
    tmp.replace(path)
    return path


def measure(file: Path, db: Path, profile: Path | None = None) -> dict[str, Any]:
    """One load of ``file`` into ``db`` in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(file), str(db), str(profile or "")],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(target_mb: int, *, profile: bool) -> list[dict[str, Any]]:
    """A first load and a reload of each layout; one row of figures each."""
    rows = []
    for layout in LAYOUTS:
        file = ensure_file(layout, target_mb)
        size_mb = file.stat().st_size / 1e6
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            db = Path(tmp) / "catalog.db"
            for run_name in ("first load", "reload (unchanged)"):
                where = (
                    PROFILES / f"load-{layout}.txt"
                    if profile and run_name == "first load"
                    else None
                )
                log(f"{layout}: {run_name} of {size_mb:,.0f} MB")
                result = measure(file, db, where)
                result |= {"layout": layout, "run": run_name, "size_mb": size_mb}
                result["mb_s"] = size_mb / result["wall_s"]
                result["records_s"] = result["records"] / result["wall_s"]
                rows.append(result)
                log(
                    f"  {result['mb_s']:.1f} MB/s, peak RSS {result['peak_rss_mb']:.0f} MB "
                    f"+ reader {result['reader_peak_rss_mb']:.0f} MB"
                )
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """The generated part of RESULTS.md."""
    lines = [
        START,
        "",
        "### Loading a large metadata file (`mlcopilot catalog load`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        "`python -m benchmarks.load` on the machine above (shared; times vary from run to run). "
        f"Targets: ≥ {TARGET_MB_S:.0f} MB/s and ≤ {TARGET_RSS_MB:.0f} MB peak RSS for a 200 MB "
        "file. Before this loader: a 202 MB file took 9.5 min and 1.66 GB.",
        "",
        "Peak RSS: the loading process; the reader process (forked, so most of its pages are "
        "shared with the loader's) separately; the RSS target is checked on their sum, an upper "
        "bound. CPU s: the loading process only.",
        "",
        "| file layout | run | size MB | records | new versions | wall s | CPU s | MB/s | "
        "records/s | peak RSS MB (loader + reader) | MB/s target | RSS target |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    for r in rows:
        rss = r["peak_rss_mb"] + r["reader_peak_rss_mb"]
        lines.append(
            f"| {r['layout']} | {r['run']} | {r['size_mb']:,.0f} | {r['records']:,} | "
            f"{r['new_versions']:,} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['mb_s']:.1f} | "
            f"{r['records_s']:,.0f} | {r['peak_rss_mb']:,.0f} + {r['reader_peak_rss_mb']:,.0f} | "
            f"{'**yes**' if r['mb_s'] >= TARGET_MB_S else '**no**'} | "
            f"{'**yes**' if rss <= TARGET_RSS_MB else '**no**'} |"
        )
    lines += ["", END]
    return "\n".join(lines)


def write_results(section: str) -> None:
    """Replace this module's section of RESULTS.md (appending it the first time)."""
    text = RESULTS_MD.read_text(encoding="utf-8") if RESULTS_MD.exists() else ""
    if START in text and END in text:
        before, rest = text.split(START, 1)
        text = before + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    RESULTS_MD.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Measure and rewrite this module's section of RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=200, help="size of the generated files")
    parser.add_argument("--profile", action="store_true", help="also write cProfile summaries")
    args = parser.parse_args(argv)
    section = report(run(args.mb, profile=args.profile))
    write_results(section)
    log(f"wrote {RESULTS_MD.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
