"""The ``mlcopilot`` command line: a thin client of the library (``mlcopilot.cli:main``)."""

from mlcopilot.cli._app import app, main

__all__ = ["app", "main"]
