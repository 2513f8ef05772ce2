"""``scan --format github``: GitHub Actions workflow commands, and the job summary.

Each finding becomes an annotation: critical and high ``::error``, medium ``::warning``, low
``::notice``, titled by its check and model. A model whose walk was cut short gets a
``::warning`` saying so (its lack of findings is not a clean bill), and a failed gate adds one
``::error`` of its own.

Catalog text is cleaned first, as every other human format cleans it
(:func:`mlcopilot.text.safe.clean`): no control character (ESC, BEL: a terminal's escape
sequences), bidi override or zero-width character reaches a terminal or a CI log, and a
newline becomes a space. Then it is escaped as GitHub's toolkit (``@actions/core``,
``command.ts``) escapes it: ``%``, CR and LF in the message, and ``:`` and ``,`` too in a
property. So a column whose name holds a newline and ``::add-mask::y`` stays inside its
annotation, on its line: no line of the output starts a workflow command but the ones written
here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from mlcopilot.incidents.gate import GateVerdict, truncated_walk
from mlcopilot.model import Finding, Severity
from mlcopilot.scan import ScanResult
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import clean

COMMANDS = {
    Severity.CRITICAL: "error",
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "notice",
}
"""The workflow command that annotates a finding of each severity."""


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as ``escapeData`` in ``@actions/core``."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value, escaped as ``escapeProperty`` in ``@actions/core``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **properties: str) -> str:
    """One workflow command line, ``::name key=value,...::message``, all cleaned and escaped.

    Nothing is cut: an annotation shows the whole message.
    """
    shown = ",".join(
        f"{key}={escape_property(clean(value, sys.maxsize))}" for key, value in properties.items()
    )
    text = escape_data(clean(message, sys.maxsize))
    return f"::{name} {shown}::{text}" if shown else f"::{name}::{text}"


def render_github(result: ScanResult, verdict: GateVerdict | None) -> str:
    """The annotations of a scan, one line each, ending with a newline (empty: none)."""
    lines = [_annotation(f) for model in result.models for f in model.findings]
    lines += [
        command(
            "warning",
            f"{short_name(model.urn)}: {truncated_walk(model.lineage)}",
            title=f"mlcopilot partial walk of {short_name(model.urn)}",
        )
        for model in result.models
        if model.lineage.truncated
    ]
    if verdict is not None and not verdict.passed:
        reasons = "; ".join(
            f"{short_name(r.model)}: {r.message}" if r.model else r.message for r in verdict.reasons
        )
        lines.append(command("error", f"The gate failed: {reasons}", title="mlcopilot gate"))
    return "".join(line + "\n" for line in lines)


def _annotation(finding: Finding) -> str:
    where = short_name(finding.entity) + (f" {finding.field}" if finding.field else "")
    title = f"mlcopilot {finding.check} ({finding.severity.value}) on {short_name(finding.model)}"
    message = f"{where}: {finding.message} (incident {finding.id})"
    return command(COMMANDS[finding.severity], message, title=title)


def append_step_summary(markdown: str, env: Mapping[str, str] | None = None) -> bool:
    """Append ``markdown`` to the file ``$GITHUB_STEP_SUMMARY`` names; False when it is unset.

    Raises:
        OSError: The file cannot be written.
    """
    path = (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as summary:
        summary.write(markdown)
    return True
