"""The ``mlcopilot`` command line: a thin client of the library (``mlcopilot.cli:main``).

One module per command group registers its commands on the apps in :mod:`mlcopilot.cli._app`,
which also holds the shared options and the one error handler every command runs in.
"""

import sys

import typer

from mlcopilot import redact
from mlcopilot.cli._app import app, click_error_type, err, print_usage_error

# Imported for the commands they register, in the order `mlcopilot --help` lists them.
# isort: off
from mlcopilot.cli import scan, datahub, checks, demo  # noqa: F401
from mlcopilot.cli import catalog, outbox, incidents, config, watch  # noqa: F401
from mlcopilot.cli import mcp, impact  # noqa: F401
from mlcopilot.cli import report, notify  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``mlcopilot`` command."""
    redact.install()
    try:
        # Not standalone: a bad command line comes back here, to be said as one `error:` line
        # like every other error, not as click's "Usage: ... Error: ..." block.
        code = app(standalone_mode=False)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except click_error_type() as exc:
        sys.exit(print_usage_error(exc))
    except typer.Abort:  # EOF at a prompt
        err.print("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
