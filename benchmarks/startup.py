"""``python -m benchmarks.startup``: how long ``mlcopilot --help`` and ``mlcopilot checks`` take.

Each command runs 5 times in a fresh process (the installed ``mlcopilot`` script, as a user
runs it); the best run is reported, as the least disturbed by the rest of the machine. Beside
them, the floor nothing in mlcopilot can lower: starting Python, and a bare ``import typer``.
``import mlcopilot.cli`` is also timed by ``python -X importtime`` (its cumulative import
time, best of 5). The figures replace the part of ``benchmarks/RESULTS.md`` between this
module's markers. What keeps these commands fast (no backend imported) is asserted by
``tests/test_startup.py``; this module only measures.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"
START, END = "<!-- generated: python -m benchmarks.startup -->", "<!-- end generated: startup -->"
TARGET_S = 0.5
RUNS = 5

BEFORE = {"mlcopilot --help": 1.30, "mlcopilot checks": 1.32, "import mlcopilot.cli": 0.95}
"""Best of 5 at commit 17704ee (one ``cli.py`` importing every backend), measured by this
module on the same machine just before the figures it first wrote; kept, as it cannot be rerun."""


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[startup {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def best_wall(command: list[str], env: dict[str, str]) -> float:
    """The fastest of :data:`RUNS` runs of ``command``, in seconds."""
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return min(times)


def best_import(module: str, env: dict[str, str]) -> float:
    """The fastest cumulative ``-X importtime`` of ``module``, in seconds."""
    times = []
    for _ in range(RUNS):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        line = re.compile(rf"\|\s*(\d+) \| {re.escape(module)}$", re.MULTILINE)
        times.append(int(line.findall(done.stderr)[-1]) / 1e6)
    return min(times)


def measure() -> dict[str, float]:
    """Every figure of the section, in seconds."""
    script = str(Path(sys.executable).with_name("mlcopilot"))
    with tempfile.TemporaryDirectory() as home:
        # An empty home: no config file or catalog of the user's changes what is measured.
        env = {**os.environ, "MLCOPILOT_HOME": home, "HOME": home}
        env.pop("MLCOPILOT_CONFIG", None)
        figures = {
            "mlcopilot --help": best_wall([script, "--help"], env),
            "mlcopilot checks": best_wall([script, "checks"], env),
            "import mlcopilot.cli": best_import("mlcopilot.cli", env),
            "python -c pass": best_wall([sys.executable, "-c", "pass"], env),
            "python -c 'import typer'": best_wall([sys.executable, "-c", "import typer"], env),
        }
    for name, seconds in figures.items():
        log(f"{name}: {seconds:.3f} s")
    return figures


def report(figures: dict[str, float]) -> str:
    """The generated part of RESULTS.md."""
    lines = [
        START,
        "",
        "### Start-up (`mlcopilot --help`, `mlcopilot checks`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`python -m benchmarks.startup` on the machine above: best of {RUNS} fresh processes. "
        "The machine is shared: while other jobs run, every figure here grows (2-4x seen). "
        f"Target: under {TARGET_S} s. Before: the commands imported every backend (the DataHub "
        "SDK, SQLAlchemy and Alembic, MCP, githubkit, slack_sdk) at start; now each command "
        "imports what it runs, and `tests/test_startup.py` checks that `--help` and `checks` "
        "load none of them.",
        "",
        "| what | before s | now s | target |",
        "|---|--:|--:|---|",
    ]
    for name, seconds in figures.items():
        before = BEFORE.get(name)
        if name.startswith("mlcopilot "):
            met = "**yes**" if seconds < TARGET_S else "**no**"
        else:
            met = "(floor)" if name.startswith("python") else ""
        was = f"{before:.2f}" if before is not None else ""
        lines.append(f"| `{name}` | {was} | {seconds:.2f} | {met} |")
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
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    write_results(report(measure()))
    log(f"wrote {RESULTS_MD.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
