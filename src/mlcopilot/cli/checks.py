"""``mlcopilot checks``: every check's own documentation (built-in and installed plugins)."""

from __future__ import annotations

from rich.markup import escape

from mlcopilot.cli._app import app, out


@app.command("checks")
def checks_command() -> None:
    """Describe every check: what it flags, why it matters, how to fix it."""
    # The registry imports each check's module, never a backend: this command starts fast.
    from mlcopilot.checks import describe_checks
    from mlcopilot.cli.render.terminal import print_doc

    for name, doc in describe_checks():
        out.print(f"[bold]{escape(name)}[/]")
        print_doc(doc, out)
        out.print()
