"""Really read-only folders for the CLI tests: a small tmpfs, filled, then remounted ``ro``.

The tests run as root, where ``chmod 0555`` and ``0444`` stop nothing; a read-only mount stops
root too (EROFS), as a read-only volume or bind mount does in production. Where mounting is
not possible (not root, no ``mount``, a container without the capability) the test is skipped
with the reason.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only_folder(where: Path, source: Path | None = None) -> Iterator[Path]:
    """``where`` as a read-only tmpfs holding a copy of ``source``'s files (if given)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only mount needs root (chmod does not stop root's writes)")
    where.mkdir(parents=True)
    mount = ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", str(where)]
    try:
        subprocess.run(mount, check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        if source is not None:
            shutil.copytree(source, where, dirs_exist_ok=True)
        remount = ["mount", "-o", "remount,ro", str(where)]
        subprocess.run(remount, check=True, capture_output=True, timeout=30)
        _assert_read_only(where)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True, timeout=30)


def _assert_read_only(folder: Path) -> None:
    with pytest.raises(OSError, match="Read-only file system") as refused:
        (folder / "probe").write_bytes(b"x")
    assert refused.value.errno == errno.EROFS, refused.value


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path) and a hash of its bytes."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
