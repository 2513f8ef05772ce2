"""The ``mlcopilot`` command line: a thin client of the library (``mlcopilot.cli:main``).

One module per command group registers its commands on the apps in :mod:`mlcopilot.cli._app`,
which also holds the shared options and the one error handler every command runs in.
"""

import sys

from mlcopilot import redact
from mlcopilot.cli._app import app, err

# Imported for the commands they register, in the order `mlcopilot --help` lists them.
# isort: off
from mlcopilot.cli import scan, datahub, checks, demo  # noqa: F401
from mlcopilot.cli import catalog, outbox, incidents, config, watch  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``mlcopilot`` command."""
    redact.install()
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
