"""Run the installed ``mlcopilot`` command as a user does: a subprocess, piped (CI) or on a pty.

The console script beside the interpreter is what ``pip install`` put on the PATH, so these
runs test the entry point too, not only ``python -m mlcopilot``.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MLCOPILOT = Path(sys.executable).parent / "mlcopilot"
"""The installed console script."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@dataclass(frozen=True)
class Ran:
    """A finished run: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def _env(home: Path, extra: Mapping[str, str] | None, columns: int) -> dict[str, str]:
    env = {**os.environ, "MLCOPILOT_HOME": str(home), "COLUMNS": str(columns)}
    env.update(extra or {})
    return env


def run_cli(home: Path, *args: str, env: Mapping[str, str] | None = None, columns: int = 80) -> Ran:
    """Run ``mlcopilot ARGS`` with pipes for stdout and stderr (not a terminal: as in CI)."""
    done = subprocess.run(
        [str(MLCOPILOT), *args],
        capture_output=True,
        text=True,
        env=_env(home, env, columns),
        timeout=180,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def run_on_terminal(
    home: Path, *args: str, env: Mapping[str, str] | None = None, columns: int = 100
) -> Ran:
    """Run ``mlcopilot ARGS`` on a pseudo-terminal ``columns`` wide.

    stdout and stderr are the same terminal, so ``stdout`` holds both (``stderr`` is empty);
    colour and cursor codes are stripped, carriage returns removed.
    """
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environment = _env(home, env, columns)
    environment["TERM"] = "xterm-256color"
    environment.pop("NO_COLOR", None)
    with subprocess.Popen(
        [str(MLCOPILOT), *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=environment,
        close_fds=True,
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65_536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait(timeout=180)
    os.close(leader)
    text = _ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace"))
    return Ran(code, text.replace("\r", ""), "")
