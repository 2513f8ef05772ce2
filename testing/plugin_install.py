"""Installing an example plugin for real: a fresh venv that sees the product, and pip.

The plugin tests (check and sink plugins) build each example offline from a copy
(``--no-deps --no-build-isolation --no-index``) and run ``mlcopilot`` in an environment where
the plugin is found only through its entry point.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

OFFLINE = ("--no-deps", "--no-build-isolation", "--no-index")
"""pip's flags for building an example with what this environment already has."""


def pip(*args: str) -> None:
    """Run this interpreter's pip; fail the test with pip's output when it fails."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def source_copy(example: Path, tmp: Path) -> Path:
    """A copy of ``example`` to build from: the build leaves build/ and *.egg-info behind."""
    copy = tmp / example.name
    shutil.copytree(example, copy, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    return copy


def product_venv(tmp: Path) -> tuple[Path, Path]:
    """A new venv under ``tmp`` that sees the product's packages: its python and site dir."""
    venv = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # A venv made from a venv's interpreter sees the base interpreter's packages, not the
    # product's; this line makes the product's environment a site directory of the new one
    # (its .pth files, the editable install of mlcopilot among them, are processed too).
    product_site = sysconfig.get_paths()["purelib"]
    (site / "mlcopilot-product.pth").write_text(
        f"import site; site.addsitedir({product_site!r})\n", encoding="utf-8"
    )
    return python, site


def install_into_venv(example: Path, tmp: Path) -> tuple[Path, Path]:
    """``example`` installed in a new :func:`product_venv`: its python and site dir."""
    python, site = product_venv(tmp)
    pip("--python", str(python), "install", *OFFLINE, str(source_copy(example, tmp)))
    return python, site
