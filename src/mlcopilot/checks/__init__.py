"""The built-in checks and the registry that also finds third-party ones.

Built-in checks are listed in :data:`BUILTIN_CHECKS` as lazy ``"module:Class"`` strings.
Third-party checks register under the ``mlcopilot.checks`` entry-point group, with the
entry-point name equal to the check's ``name`` (and its ``info.name``)::

    [project.entry-points."mlcopilot.checks"]
    missing_owner = "mlcopilot_missing_owner:MissingOwner"

A check describes itself (:class:`~mlcopilot.model.CheckInfo` on ``info``) and parses its own
config section (``config_model``); nothing else in the product knows check names. Every
section may also say ``enabled = false``, which this registry handles for all checks alike.
A third-party check that cannot be loaded is logged and skipped; it never stops a scan.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

from pydantic import ValidationError

from mlcopilot.config import PluginConfig
from mlcopilot.errors import ConfigError, PluginUnavailable
from mlcopilot.model import CheckInfo
from mlcopilot.protocols import Check

__all__ = [
    "BUILTIN_CHECKS",
    "ENABLED_KEY",
    "ENTRY_POINT_GROUP",
    "available_infos",
    "builtin_infos",
    "check_config_models",
    "describe_checks",
    "info_of",
    "infos_of",
    "load_checks",
]

logger = logging.getLogger(__name__)

BUILTIN_CHECKS: dict[str, str] = {
    "deprecated_source": "mlcopilot.checks.deprecated_source:DeprecatedSource",
    "failing_assertion": "mlcopilot.checks.failing_assertion:FailingAssertion",
    "pii_exposure": "mlcopilot.checks.pii_exposure:PiiExposure",
    "profile_drift": "mlcopilot.checks.profile_drift:ProfileDrift",
    "schema_drift": "mlcopilot.checks.schema_drift:SchemaDrift",
    "stale_source": "mlcopilot.checks.stale_source:StaleSource",
    "upstream_incident": "mlcopilot.checks.upstream_incident:UpstreamIncident",
}
"""Check name → ``"module:Class"``; imported only when the check is used."""

ENTRY_POINT_GROUP = "mlcopilot.checks"
"""The entry-point group third-party packages register their checks under."""

ENABLED_KEY = "enabled"
"""The one key every check's section accepts: ``enabled = false`` switches the check off."""


def load_checks(
    config: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    enabled: Iterable[str] | None = None,
) -> list[Check]:
    """Build the checks to run, each from its own config section.

    Args:
        config: Check name → raw config section (``[checks.<name>]``). A section may be given
            for a check that is not enabled; it is validated all the same, so a typo never
            waits for the day the check is switched on. ``enabled = false`` in a section
            leaves that check out.
        enabled: The names of the checks to run; None runs every available check.

    Returns:
        The checks, sorted by name.

    Raises:
        ConfigError: A config section or an enabled name that names no known check, or a
            config value the check does not accept.
        PluginUnavailable: A built-in check that cannot be imported (a broken install).
    """
    sections = dict(config or {})
    wanted = set(enabled) if enabled is not None else None
    # Entry points are listed without importing anything; only the checks asked for load.
    plugins = _entry_points()
    known = set(BUILTIN_CHECKS) | set(plugins)
    for name in sorted((wanted or set()) | set(sections)):
        if name not in known:
            where = "enabled" if wanted is not None and name in wanted else "configured"
            raise ConfigError(
                f"unknown check {name!r} {where}; available checks: {', '.join(sorted(known))}"
            )
    checks: list[Check] = []
    for name in sorted(known):
        switched_on, section = _enabled(name, sections.get(name))
        runs = switched_on and (wanted is None or name in wanted)
        if not runs and name not in sections:
            continue
        cls = _load(name, plugins)
        if cls is None:
            continue
        check_config = _configure(cls, section)
        if runs:
            check = _build(cls, check_config, third_party=name not in BUILTIN_CHECKS)
            if check is not None:
                checks.append(check)
    return checks


def describe_checks() -> list[tuple[str, str]]:
    """Every available check's name and user documentation (``info.docs``), by name.

    Third-party checks that cannot be loaded are logged and left out.
    """
    return [(name, info.docs) for name, info in available_infos().items()]


def info_of(cls: type[Check]) -> CheckInfo:
    """The check's info, its documentation taken from the class docstring when it has none."""
    if cls.info.docs:
        return cls.info
    return replace(cls.info, docs=inspect.getdoc(cls) or "")


def builtin_infos() -> dict[str, CheckInfo]:
    """The built-in checks' infos by name.

    What a stored row that carries no copy of its check's info was planned with: every row
    from before infos were copied is a built-in check's.
    """
    return {name: info_of(cls) for name, cls in _classes({}).items()}


def available_infos() -> dict[str, CheckInfo]:
    """The info of every check that can be loaded (built-in and third-party), by name."""
    return {name: info_of(cls) for name, cls in _classes(_entry_points()).items()}


def infos_of(checks: Iterable[Check]) -> dict[str, CheckInfo]:
    """What a scan with ``checks`` knows: the built-in infos, overlaid with the checks' own.

    The built-ins stay known when they do not run, because their stored incidents are still
    written back and notified.
    """
    infos = builtin_infos()
    for check in checks:
        infos[check.info.name] = check.info
    return infos


def check_config_models() -> dict[str, type[PluginConfig]]:
    """Check name → its config model (what ``[checks.<name>]`` accepts besides ``enabled``)."""
    return {name: cls.config_model for name, cls in _classes(_entry_points()).items()}


def _classes(plugins: Mapping[str, EntryPoint]) -> dict[str, type[Check]]:
    """The built-in and ``plugins``' check classes by name; broken plugins are logged, left out."""
    found: dict[str, type[Check]] = {}
    for name in sorted(set(BUILTIN_CHECKS) | set(plugins)):
        cls = _load(name, plugins)
        if cls is not None:
            found[name] = cls
    return found


def _enabled(name: str, raw: Mapping[str, Any] | None) -> tuple[bool, Mapping[str, Any] | None]:
    """Whether the section leaves the check on, and the section without ``enabled``."""
    if raw is None or not isinstance(raw, Mapping) or ENABLED_KEY not in raw:
        return True, raw
    value = raw[ENABLED_KEY]
    if not isinstance(value, bool):
        raise ConfigError(f"check {name!r}: {ENABLED_KEY}: must be true or false (got {value!r})")
    return value, {k: v for k, v in raw.items() if k != ENABLED_KEY}


def _entry_points() -> dict[str, EntryPoint]:
    """Third-party checks by name; names taken by a built-in or an earlier plugin are skipped."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN_CHECKS:
            logger.warning(
                "check plugin %r (%s) is skipped: it has the name of a built-in check",
                ep.name,
                ep.value,
            )
        elif ep.name in found:
            logger.warning(
                "check plugin %r (%s) is skipped: %s already registered that name",
                ep.name,
                ep.value,
                found[ep.name].value,
            )
        else:
            found[ep.name] = ep
    return found


def _load(name: str, plugins: Mapping[str, EntryPoint]) -> type[Check] | None:
    """The check class registered as ``name``; None (and a warning) for a broken plugin."""
    if name in BUILTIN_CHECKS:
        module_name, _, class_name = BUILTIN_CHECKS[name].partition(":")
        try:
            cls: object = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise PluginUnavailable(
                f"built-in check {name!r} cannot be imported ({exc}); reinstall mlcopilot"
            ) from exc
        return _as_check(cls)
    ep = plugins[name]
    try:
        # A plugin can fail in any way while importing; none of it may stop the scan.
        loaded = ep.load()
    except Exception as exc:
        _skip(ep, f"it cannot be imported: {type(exc).__name__}: {exc}")
        return None
    problem = _check_shape(loaded, name)
    if problem is not None:
        _skip(ep, problem)
        return None
    return _as_check(loaded)


def _check_shape(obj: object, name: str) -> str | None:
    """Why ``obj`` cannot serve as the check ``name``, or None when it can."""
    if not inspect.isclass(obj):
        return f"it is not a class but {type(obj).__name__}"
    declared = getattr(obj, "name", None)
    if declared != name:
        return f"its class declares name {declared!r}, not the entry-point name {name!r}"
    info = getattr(obj, "info", None)
    if not isinstance(info, CheckInfo):
        return "its info is not an mlcopilot.model.CheckInfo"
    if info.name != name:
        return f"its info names the check {info.name!r}, not the entry-point name {name!r}"
    config_model = getattr(obj, "config_model", None)
    if not (inspect.isclass(config_model) and issubclass(config_model, PluginConfig)):
        return "its config_model is not a subclass of mlcopilot.config.PluginConfig"
    if not callable(getattr(obj, "run", None)):
        return "it has no run(node, ctx) method"
    return None


def _as_check(cls: object) -> type[Check]:
    """``cls`` as a check class, once its shape has been verified or it is a built-in."""
    return cast("type[Check]", cls)


def _configure(cls: type[Check], raw: Mapping[str, Any] | None) -> PluginConfig:
    """The check's validated config; ConfigError naming the check and the key otherwise."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError(
            f"check {cls.name!r}: its config must be a mapping of keys to values, "
            f"not {type(raw).__name__}"
        )
    try:
        return cls.config_model.model_validate(dict(raw or {}))
    except ValidationError as exc:
        problems = "; ".join(_describe_error(e) for e in exc.errors())
        raise ConfigError(f"check {cls.name!r}: {problems}") from exc


def _describe_error(error: Mapping[str, Any]) -> str:
    """One pydantic error as ``key: what is wrong`` (``unknown key 'x'`` for a typo)."""
    key = ".".join(str(part) for part in error["loc"]) or "(config)"
    if error["type"] == "extra_forbidden":
        return f"unknown key {key!r}"
    return f"{key}: {error['msg']} (got {error.get('input')!r})"


def _build(cls: type[Check], config: PluginConfig, *, third_party: bool) -> Check | None:
    """Construct the check; a third-party constructor that fails is logged and skipped."""
    if not third_party:
        return cls(config)
    try:
        return cls(config)
    except Exception as exc:
        logger.warning(
            "check plugin %r is skipped: its constructor failed: %s: %s",
            cls.name,
            type(exc).__name__,
            exc,
        )
        return None


def _skip(ep: EntryPoint, reason: str) -> None:
    """Log that a third-party check is left out, and why."""
    dist = ep.dist.name if ep.dist is not None else "unknown distribution"
    logger.warning("check plugin %r (%s, from %s) is skipped: %s", ep.name, ep.value, dist, reason)
