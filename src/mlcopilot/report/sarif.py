"""``scan --format sarif``: SARIF 2.1.0, for code-scanning UIs (GitHub's ``upload-sarif``).

One run; its driver is mlcopilot with one rule per check that ran (from its
:class:`~mlcopilot.model.CheckInfo`). Each finding is a result: ``level`` from its severity
(critical and high ``error``, medium ``warning``, low ``note``), and one location holding both
where the risk is in the catalog (logical locations: the entity's urn and, for a column, its
schema field urn) and a file of the repository (a physical location), which GitHub's code
scanning needs to show a result at all (:class:`Locator` chooses it):

1. the dbt model's file, when a dbt ``manifest.json`` is configured (``[sarif] dbt_manifest``)
   and the finding's dataset is a node of it; on the column's first mention when it has one;
2. else the file ``[sarif] location`` names (``MLCOPILOT_SARIF_LOCATION``);
3. else the catalog file (``lite:PATH``); for a catalog that is no file (``datahub:``,
   ``mcp:``), the dataset's name, which GitHub lists but cannot open.

A path inside the folder the scan runs in (the repository's root in CI) is written relative to
it (``uriBaseId`` ``%SRCROOT%``), as GitHub wants; one outside is an absolute ``file://`` URI.

``partialFingerprints`` carries the finding's incident id, stable across scans, twice: as
``primaryLocationLineHash`` (the only key GitHub's code scanning reads) and as
``mlcopilotIncident/v1``. So the same risk is one alert from run to run, wherever its
location's lines move.

A model whose walk was cut short (a hop or node cap) is a warning among the run's
``invocations[0].toolExecutionNotifications`` (:data:`PARTIAL_WALK`): its results are not all
there is to find.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mlcopilot.errors import ConfigError
from mlcopilot.incidents.gate import truncated_walk
from mlcopilot.model import CheckInfo, Finding, ModelReport, Severity, Urn
from mlcopilot.scan import ScanResult
from mlcopilot.settings import Settings
from mlcopilot.text.names import short_name

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
FINGERPRINT = "mlcopilotIncident/v1"
"""The ``partialFingerprints`` key of a result: its incident id (versioned, as SARIF asks)."""
LINE_HASH = "primaryLocationLineHash"
"""The ``partialFingerprints`` key GitHub's code scanning keys an alert's identity on."""
SRCROOT = "%SRCROOT%"
PARTIAL_WALK = "mlcopilot/partial-walk"
"""The id of the notification saying a model's walk was cut short (not everything checked)."""
"""The ``uriBaseId`` of a relative location: the repository's root, where the scan ran."""
READ_AT_MOST = 2_000_000
"""A located file longer than this (bytes) is not read for a column's line (line 1)."""

LEVELS = {
    Severity.CRITICAL: "error",
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "note",
}
"""The SARIF ``level`` of a finding of each severity."""


class Locator:
    """The file of the repository each result points at (see the module for the order).

    Args:
        root: The repository's root (default: the working directory): paths under it are
            written relative to it.
        manifest: A parsed dbt ``manifest.json``, and ``manifest_path`` where it was read.
        location: ``[sarif] location``: the file for the findings no dbt model holds.
    """

    def __init__(
        self,
        *,
        root: Path | None = None,
        manifest: Mapping[str, Any] | None = None,
        manifest_path: Path | None = None,
        location: str | None = None,
    ) -> None:
        self.root = (root or Path.cwd()).resolve()
        self.manifest = manifest
        self.manifest_path = manifest_path
        self.location = location
        self._texts: dict[Path, tuple[str, ...]] = {}
        self._dbt: dict[Urn, Path | None] = {}

    def physical(self, finding: Finding, catalog: str) -> tuple[dict[str, Any], str]:
        """The result's ``physicalLocation``, and what chose it.

        What: ``dbt``, ``location``, ``catalog`` or ``entity`` (see the module).
        """
        path, how = self._dbt_file(finding.entity), "dbt"
        if path is None and self.location:
            path, how = self.root / Path(self.location).expanduser(), "location"
        if path is None and catalog.startswith("lite:"):
            path, how = self.root / Path(catalog.removeprefix("lite:")).expanduser(), "catalog"
        if path is None:  # a catalog that is no file: the dataset's name, stable across runs
            return _physical({"uri": _name_as_path(finding.entity), "uriBaseId": SRCROOT}, 1, 1), (
                "entity"
            )
        line, width = self._line_of(path, finding.field if how == "dbt" else None)
        return _physical(self._artifact(path), line, width), how

    def _artifact(self, path: Path) -> dict[str, Any]:
        resolved = path.resolve()
        if resolved.is_relative_to(self.root):
            return {"uri": resolved.relative_to(self.root).as_posix(), "uriBaseId": SRCROOT}
        return {"uri": resolved.as_uri()}

    def _dbt_file(self, entity: Urn) -> Path | None:
        """The file of the dbt node that is ``entity`` (a dataset), if a manifest holds it."""
        if self.manifest is None or not entity.startswith("urn:li:dataset:("):
            return None
        if entity not in self._dbt:
            from mlcopilot.scan.whatif.schema_file import dbt_node

            node = dbt_node(self.manifest, entity)
            where = node.get("original_file_path") if node is not None else None
            self._dbt[entity] = self._in_project(where) if isinstance(where, str) else None
        return self._dbt[entity]

    def _in_project(self, original: str) -> Path:
        """A path of the dbt project (``models/x.sql``) as a path from the repository's root.

        The project is the folder of ``target/`` holding the manifest (dbt's default), else
        the manifest's own folder; when that path does not exist but the same one from the
        repository's root does (a manifest copied elsewhere), that one.
        """
        folder = self.manifest_path.parent if self.manifest_path is not None else self.root
        if folder.name == "target":
            folder = folder.parent
        candidates = (folder / original, self.root / original)
        return next((c for c in candidates if c.is_file()), candidates[0])

    def _line_of(self, path: Path, column: str | None) -> tuple[int, int]:
        """The line (1-based) to show, and its width.

        The column's first whole-word mention in the file when there is one, else line 1.
        """
        lines = self._text(path)
        number = 1
        if column and lines:
            word = re.compile(rf"(?<![\w]){re.escape(column)}(?![\w])")
            number = next((n for n, text in enumerate(lines, 1) if word.search(text)), 1)
        width = len(lines[number - 1]) if number <= len(lines) else 0
        return number, width

    def _text(self, path: Path) -> tuple[str, ...]:
        if path not in self._texts:
            lines: tuple[str, ...] = ()
            try:
                if path.is_file() and path.stat().st_size <= READ_AT_MOST:
                    lines = tuple(path.read_text(encoding="utf-8").splitlines())
            except (OSError, UnicodeDecodeError):  # a binary file (catalog.db): line 1
                lines = ()
            self._texts[path] = lines
        return self._texts[path]


def locator_from_settings(
    settings: Settings, *, manifest: Path | None = None, root: Path | None = None
) -> Locator:
    """The :class:`Locator` ``[sarif]`` configures (``manifest`` overrides its manifest).

    Read before the scan, so a manifest that cannot be used fails first.

    Raises:
        ConfigError: The manifest cannot be read or is no dbt ``manifest.json``; the message
            names where it was configured.
    """
    configured = settings.sarif.dbt_manifest
    path = manifest or (Path(configured).expanduser() if configured else None)
    data: Mapping[str, Any] | None = None
    if path is not None:
        where = str(path) if manifest is not None else settings.name_of("sarif.dbt_manifest")
        data = _read_manifest(path, where)
    return Locator(root=root, manifest=data, manifest_path=path, location=settings.sarif.location)


def _read_manifest(path: Path, where: str) -> Mapping[str, Any]:
    from mlcopilot.scan.whatif.schema_file import is_dbt_manifest

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: {path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: {path}: not JSON ({exc})") from None
    if not is_dbt_manifest(data):
        raise ConfigError(
            f"{where}: {path}: not a dbt manifest.json (no nodes and metadata.dbt_schema_version)"
        )
    return dict(data)


def _physical(artifact: dict[str, Any], line: int, width: int) -> dict[str, Any]:
    # GitHub asks for the whole region (start and end line and column); the line shown whole.
    # A line not read (a binary catalog file) is shown as its first character.
    end = max(width, 1) + 1
    region = {"startLine": line, "startColumn": 1, "endLine": line, "endColumn": end}
    return {"artifactLocation": artifact, "region": region}


def _name_as_path(entity: Urn) -> str:
    """A dataset's name as a relative path (``raw.customers``): no scheme, no ``..``."""
    name = short_name(entity).replace("\\", "/")
    parts = [p for p in name.split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or "catalog"


def sarif_dict(
    result: ScanResult, checks: Sequence[CheckInfo], locator: Locator | None = None
) -> dict[str, Any]:
    """The scan as a SARIF 2.1.0 log.

    Args:
        result: The scan.
        checks: The checks that ran: the driver's rules, in this order.
        locator: Where each result points in the repository (default: the catalog file,
            from the working directory).
    """
    import mlcopilot

    infos = list(checks)
    # A finding of a check not among ``checks`` (none today) still has its rule.
    known = {info.name for info in infos}
    extra = sorted({f.check for m in result.models for f in m.findings} - known)
    infos += [CheckInfo.generic(name) for name in extra]
    index = {info.name: i for i, info in enumerate(infos)}
    where = locator or Locator()
    results = [
        _result(f, index[f.check], where.physical(f, result.catalog))
        for model in result.models
        for f in model.findings
    ]
    driver = {
        "name": "mlcopilot",
        "version": mlcopilot.__version__,
        "rules": [_rule(info) for info in infos],
    }
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {
            SRCROOT: {"description": {"text": "The repository's root: the folder the scan ran in."}}
        },
        "results": results,
        "properties": {"catalog": result.catalog, "now": result.now.isoformat()},
    }
    partial = [_partial_walk(model) for model in result.models if model.lineage.truncated]
    if partial:
        # The run's results are not all there is: say which walks stopped short, and why.
        run["invocations"] = [{"executionSuccessful": True, "toolExecutionNotifications": partial}]
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _partial_walk(model: ModelReport) -> dict[str, Any]:
    """A notification that ``model``'s walk was cut short (``lineage.truncated``)."""
    return {
        "descriptor": {"id": PARTIAL_WALK},
        "level": "warning",
        "message": {"text": f"{model.urn}: {truncated_walk(model.lineage)}"},
        "locations": [
            {"logicalLocations": [{"fullyQualifiedName": model.urn, "name": short_name(model.urn)}]}
        ],
    }


def render_sarif(
    result: ScanResult, checks: Sequence[CheckInfo], locator: Locator | None = None
) -> str:
    """The SARIF log (see :func:`sarif_dict`), pretty-printed, ending with a newline."""
    log = sarif_dict(result, checks, locator)
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _rule(info: CheckInfo) -> dict[str, Any]:
    return {
        "id": info.name,
        "name": info.title,
        "shortDescription": {"text": info.title},
        "fullDescription": {"text": info.why},
        "help": {"text": info.action},
        "properties": {"tags": ["mlcopilot", info.incident_type.lower()]},
    }


def _result(
    finding: Finding, rule_index: int, physical: tuple[dict[str, Any], str]
) -> dict[str, Any]:
    locations: list[dict[str, Any]] = [
        {
            "fullyQualifiedName": finding.entity,
            "name": short_name(finding.entity),
            "kind": "resource",
        }
    ]
    if finding.field is not None:
        locations.append(
            {
                "fullyQualifiedName": f"urn:li:schemaField:({finding.entity},{finding.field})",
                "name": finding.field,
                "kind": "member",
            }
        )
    return {
        "ruleId": finding.check,
        "ruleIndex": rule_index,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message or f"{finding.check} at {short_name(finding.entity)}"},
        "locations": [{"physicalLocation": physical[0], "logicalLocations": locations}],
        # The incident id, not a hash of the line: the same risk is the same alert from run to
        # run however the file moves (":1": the first result with this hash, as GitHub's are).
        "partialFingerprints": {LINE_HASH: f"{finding.id}:1", FINGERPRINT: finding.id},
        "properties": {
            "severity": finding.severity.value,
            "model": finding.model,
            "incident": finding.id,
            "path": list(finding.path),
            "location": physical[1],
        },
    }
