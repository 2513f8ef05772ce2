"""Run ``mlcopilot`` as a user does: in this process by default, or as the installed command.

:func:`run_cli` runs the command line in-process (as dbt's functional tests run ``dbtRunner``
and httpx's run ``CliRunner``): the same ``mlcopilot.cli:main`` the console script calls, with
its own environment, arguments, stdin, stdout and stderr, and the module globals one process
would start with. A start of the installed command costs 2-3 s of imports; this costs tenths.

:func:`run_installed` and :func:`run_on_terminal` start the installed console script beside
the interpreter (what ``pip install`` put on the PATH), for the tests that are about being a
real process: the entry point itself, a terminal, signals and kills, start-up imports. Those
tests are marked ``slow``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import traceback
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

if TYPE_CHECKING:
    from warnings import _ActionKind as WarningAction

MLCOPILOT = Path(sys.executable).parent / "mlcopilot"
"""The installed console script."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

_PYTHON_DEFAULT_WARNINGS: tuple[tuple[WarningAction, type[Warning], str], ...] = (
    # A fresh interpreter's filters (the `warnings` module's defaults without -W or -X dev):
    # what a user's process shows. The suite's own "error" filter is for the suite's code.
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)


@dataclass(frozen=True)
class Ran:
    """A finished run: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str

    @property
    def returncode(self) -> int:
        """``code``, by the name :class:`subprocess.CompletedProcess` gives it."""
        return self.code

    def json(self) -> Any:
        return json.loads(self.stdout)


def _env(home: Path, extra: Mapping[str, str] | None, columns: int) -> dict[str, str]:
    env = {**os.environ, "MLCOPILOT_HOME": str(home), "COLUMNS": str(columns)}
    env.update(extra or {})
    return env


def run_cli(
    home: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    columns: int = 80,
    stdin: str | None = None,
) -> Ran:
    """Run ``mlcopilot ARGS`` in this process, with pipes (not a terminal: as in CI).

    ``env`` is added to this process's environment for the run, as a child would inherit it;
    ``stdin`` is what the command reads (nothing when None).
    """
    from testing.report_contract import check_completed

    ran = _run_in_process([str(a) for a in args], _env(home, env, columns), stdin)
    check_completed(["mlcopilot", *args], ran, None)
    return ran


def _run_in_process(args: list[str], env: Mapping[str, str], stdin: str | None) -> Ran:
    from mlcopilot.cli import main

    # The whole environment is the child's: variables this process has and `env` lacks go.
    changes: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    changes.update(env)
    runner = CliRunner()
    code = 0
    with (
        _fresh_process_state(),
        runner.isolation(input=stdin, env=changes) as (stdout, stderr, _),
    ):
        sys.argv = ["mlcopilot", *args]
        try:
            main()
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except BaseException:  # what an uncaught exception does to a process
            sys.stderr.write(traceback.format_exc())
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        out = stdout.getvalue().decode("utf-8", errors="replace")
        err = stderr.getvalue().decode("utf-8", errors="replace")
    return Ran(code, out, err)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"): the message, and exit status 1
    return 1


@contextmanager
def _fresh_process_state() -> Iterator[None]:
    """The globals one command may set, as a new process has them, and put back afterwards."""
    from mlcopilot.cli import _app
    from mlcopilot.cli.display import DISPLAY, Display

    root = logging.getLogger()
    saved_logging = (root.level, root.handlers[:], root.filters[:])
    saved_argv = sys.argv
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    saved_display = Display(full_names=DISPLAY.full_names)
    saved_config = _app._config_file[:]
    saved_tempdir = tempfile.tempdir
    tempfile.tempdir = None  # chosen again from this run's TMPDIR, as a new process would
    DISPLAY.full_names = Display().full_names
    _app._config_file[:] = [None]
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(_PYTHON_DEFAULT_WARNINGS):
                warnings.filterwarnings(action, category=category, module=module)
            yield
    finally:
        for handler in root.handlers:
            if handler not in saved_logging[1]:
                handler.close()
        root.setLevel(saved_logging[0])
        root.handlers[:] = saved_logging[1]
        root.filters[:] = saved_logging[2]
        sys.argv = saved_argv
        for number, previous in saved_signals.items():
            signal.signal(number, previous)
        DISPLAY.full_names = saved_display.full_names
        _app._config_file[:] = saved_config
        tempfile.tempdir = saved_tempdir


def run_installed(
    home: Path, *args: str, env: Mapping[str, str] | None = None, columns: int = 80
) -> Ran:
    """Run the installed ``mlcopilot ARGS`` as a subprocess, with pipes (as in CI)."""
    from testing.report_contract import check_completed

    done = subprocess.run(
        [str(MLCOPILOT), *args],
        capture_output=True,
        text=True,
        env=_env(home, env, columns),
        timeout=180,
        check=False,
    )
    check_completed(["mlcopilot", *args], done, None)
    return Ran(done.returncode, done.stdout, done.stderr)


def run_on_terminal(
    home: Path, *args: str, env: Mapping[str, str] | None = None, columns: int = 100
) -> Ran:
    """Run the installed ``mlcopilot ARGS`` on a pseudo-terminal ``columns`` wide.

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
