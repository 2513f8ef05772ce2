"""``mlcopilot doctor``: can this DataHub be scanned and written back to, and if not, why.

Each check is one line a user can act on. Checks that depend on an earlier one (the token
needs a reachable server) are skipped when it fails, so the first failure is the one shown.
Nothing is written: privileges are read from what GMS reports (``me.platformPrivileges``
and the ``privileges`` of a sample model and dataset). What GMS does not report cannot be
verified without writing, and the check says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from mlcopilot.catalog.datahub.catalog import DataHubCatalog, Definition
from mlcopilot.catalog.datahub.connection import DataHubSettings, settings_from_spec
from mlcopilot.catalog.datahub.setup import definitions
from mlcopilot.catalog.mcp.catalog import TOOLS_CALLED, McpCatalog, McpOptions
from mlcopilot.errors import CatalogError, ConfigError
from mlcopilot.incidents.writeback import ML_INCIDENT_TYPES
from mlcopilot.settings import Settings

DOCTOR_TIMEOUT = 10.0
"""Seconds per call to DataHub, in all (connect to the last byte, no retries): a doctor should
answer quickly, even about a hung server or one that sends its answer a byte at a time."""

_PLATFORM = {
    "createTags": "create tags",
    "manageStructuredProperties": "manage structured properties",
}
_EDIT = {
    "canEditTags": "edit tags",
    "canEditIncidents": "edit incidents",
    "canEditProperties": "edit properties",
}


@dataclass(frozen=True, slots=True)
class DoctorCheck:
    """One verdict. ``required`` False means a failure degrades mlcopilot but does not stop it."""

    name: str
    ok: bool
    detail: str
    required: bool = True


def run_doctor(
    target: str | DataHubSettings,
    *,
    timeout: float = DOCTOR_TIMEOUT,
    expected: Sequence[Definition] | None = None,
    config: Settings | None = None,
) -> list[DoctorCheck]:
    """Check a DataHub for mlcopilot: settings, reachability, version, token, privileges, setup.

    Args:
        target: ``datahub:URL`` / ``datahub:`` (as ``--catalog`` takes it), or settings.
        timeout: Seconds per call, in all (no retries: a doctor reports, it does not insist);
            the MCP server's start-up and tool calls get the same bound.
        expected: The definitions setup creates (default: all of mlcopilot's).
        config: mlcopilot's settings, for ``datahub:`` alone and the token (None: read now).

    Returns:
        The checks in order; never raises for anything about the server.
    """
    try:
        settings = _settings(target, config)
    except ConfigError as exc:
        return [DoctorCheck("settings", False, str(exc))]
    checks = [_settings_check(settings)]
    catalog = DataHubCatalog.from_settings(settings, timeout=timeout, retries=0)
    try:
        for step in _steps():
            check = _guarded(step, catalog, expected or definitions())
            checks.append(check)
            if not check.ok and check.required:
                return checks
    finally:
        catalog.close()
    if str(target).startswith("mcp:"):
        checks.append(_mcp_server(settings, timeout))
    return checks


def _mcp_server(settings: DataHubSettings, timeout: float) -> DoctorCheck:
    """Start mcp-server-datahub against the server and look for the tools the backend calls.

    Those are the backend's own :data:`~mlcopilot.catalog.mcp.catalog.TOOLS_CALLED`, so the
    check cannot drift from what ``mcp:`` scans use. GMS's ``/config`` is read within
    ``timeout`` (no retries); the server gets the usual start-up bound, ``timeout`` per call.
    """
    options = McpOptions(timeout=timeout, retries=0, call_timeout=timeout)
    catalog = McpCatalog(settings, options)
    try:
        tools = catalog.session.tools()
    except CatalogError as exc:
        return DoctorCheck("mcp server", False, str(exc))
    finally:
        catalog.close()
    missing = sorted(TOOLS_CALLED - tools)
    if missing:
        return DoctorCheck(
            "mcp server",
            False,
            f"mcp-server-datahub started but does not offer {', '.join(missing)} (write tools "
            "need TOOLS_IS_MUTATION_ENABLED and a DataHub of at least v1.4.0)",
        )
    return DoctorCheck(
        "mcp server", True, f"mcp-server-datahub offers all {len(TOOLS_CALLED)} tools"
    )


def _settings(target: str | DataHubSettings, config: Settings | None) -> DataHubSettings:
    if isinstance(target, DataHubSettings):
        return target
    kind, sep, location = target.partition(":")
    if kind not in {"datahub", "mcp"} or not sep:
        raise ConfigError(f"{target!r}: the doctor checks datahub:URL or mcp:URL")
    return settings_from_spec(location, config)


def _settings_check(settings: DataHubSettings) -> DoctorCheck:
    token = "a token" if settings.token or settings.auth else "no token"
    return DoctorCheck(
        "settings", True, f"{settings.display_url} (from {settings.source}), with {token}"
    )


_Step = tuple[str, Callable[[DataHubCatalog, Sequence[Definition]], DoctorCheck]]


def _steps() -> list[_Step]:
    return [
        ("reachable", lambda catalog, _: _reachable(catalog)),
        ("version", lambda catalog, _: _version(catalog)),
        ("token", lambda catalog, _: _token(catalog)),
        ("incidents on ML entities", lambda catalog, _: _ml_incidents(catalog)),
        ("platform privileges", lambda catalog, _: _platform_privileges(catalog)),
        ("edit privileges", lambda catalog, _: _edit_privileges(catalog)),
        ("definitions", _definitions),
    ]


def _guarded(step: _Step, catalog: DataHubCatalog, expected: Sequence[Definition]) -> DoctorCheck:
    name, run = step
    try:
        return run(catalog, expected)
    except CatalogError as exc:  # the message names the endpoint and never the token
        return DoctorCheck(name, False, str(exc))


def _reachable(catalog: DataHubCatalog) -> DoctorCheck:
    catalog.server_info()
    return DoctorCheck("reachable", True, f"{catalog.label} answered GET /config")


def _version(catalog: DataHubCatalog) -> DoctorCheck:
    info = catalog.server_info()
    flavour = "DataHub Cloud" if info.cloud else "DataHub"
    version = info.version or "(version not reported)"
    if info.documents:
        return DoctorCheck("version", True, f"{flavour} {version}: incident documents supported")
    return DoctorCheck(
        "version",
        False,
        f"{flavour} {version} has no Document entity (needs 1.4 or later): incident documents "
        "will be skipped; tags, properties and incidents are still written",
        required=False,
    )


def _token(catalog: DataHubCatalog) -> DoctorCheck:
    user = catalog.whoami().user
    return DoctorCheck("token", True, f"accepted: authenticated as {user or 'an unnamed user'}")


def _ml_incidents(catalog: DataHubCatalog) -> DoctorCheck:
    """Whether the write-back's incidents can name the model (DataHub PRs #19112, #19367)."""
    name = "incidents on ML entities"
    support = catalog.incident_support()
    if support.unknown is not None:
        return DoctorCheck(
            name,
            False,
            f"cannot tell ({support.unknown}): incidents name the upstream entity only",
            required=False,
        )
    if "mlModel" not in support.ml_types:
        return DoctorCheck(
            name,
            False,
            "not supported by this GMS (before DataHub PR #19112): incidents name the upstream "
            "entity only; upgrade GMS to see them on the model",
            required=False,
        )
    missing = [t for t in ML_INCIDENT_TYPES if t not in support.ml_types]
    gap = (
        f"; not on {', '.join(missing)} (before DataHub PR #19367): an incident there names "
        "the model only"
        if missing
        else ""
    )
    return DoctorCheck(
        name,
        True,
        f"supported ({', '.join(support.ml_types)}): the model's page shows its incidents{gap}",
        required=False,
    )


def _platform_privileges(catalog: DataHubCatalog) -> DoctorCheck:
    privileges = catalog.whoami().privileges
    return _verdict(
        "platform privileges",
        privileges,
        _PLATFORM,
        "needed by `mlcopilot datahub setup` (or the first write-back) to create the tags "
        "and structured properties; an admin can run setup once instead",
    )


def _edit_privileges(catalog: DataHubCatalog) -> DoctorCheck:
    samples = catalog.search_urns("MLMODEL", 1) + catalog.search_urns("DATASET", 1)
    if not samples:
        return DoctorCheck(
            "edit privileges",
            False,
            "no model or dataset to probe: cannot verify that the token may edit tags, "
            "incidents and structured properties until the first write-back",
            required=False,
        )
    found = catalog.edit_privileges(samples)
    problems = [
        check.detail
        for urn in samples
        if not (check := _verdict(urn, found.get(urn, {}), _EDIT, "")).ok
    ]
    if not problems:
        return DoctorCheck("edit privileges", True, "may edit tags, incidents and properties")
    return DoctorCheck("edit privileges", False, "; ".join(problems), required=False)


def _definitions(catalog: DataHubCatalog, expected: Sequence[Definition]) -> DoctorCheck:
    missing = catalog.missing_definitions(expected)
    if not missing:
        return DoctorCheck("definitions", True, f"all {len(expected)} tags and properties exist")
    return DoctorCheck(
        "definitions",
        False,
        f"missing {', '.join(missing)}: run `mlcopilot datahub setup` (otherwise the first "
        "write-back creates them with defaults)",
        required=False,
    )


def _verdict(
    name: str, granted: Mapping[str, bool | None], wanted: Mapping[str, str], why: str
) -> DoctorCheck:
    denied = [label for key, label in wanted.items() if granted.get(key) is False]
    unknown = [label for key, label in wanted.items() if granted.get(key) is None]
    suffix = f" ({why})" if why else ""
    if denied:
        return DoctorCheck(name, False, f"{name}: may not {', '.join(denied)}{suffix}", False)
    if unknown:
        return DoctorCheck(
            name,
            False,
            f"{name}: the server does not report whether the token may {', '.join(unknown)}; "
            "not verified",
            False,
        )
    return DoctorCheck(name, True, f"may {', '.join(wanted.values())}", False)
