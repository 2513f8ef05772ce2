"""Sink plugins: the ``mlcopilot.sinks`` entry points, found, checked and loaded.

Read by the configuration (which ``[sinks.NAME]`` sections name a plugin that exists) and by
the registry (:mod:`mlcopilot.notify.sinks.registry`, which builds them). A plugin switched on
that cannot be imported, or is not shaped as a sink, stops the command with a
:class:`~mlcopilot.errors.ConfigError` naming it: a sink silently left out would lose
notifications.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from mlcopilot.errors import ConfigError
from mlcopilot.model import NOTIFY_ACTIONS, NOTIFY_SINKS, Action

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mlcopilot.sinks"
"""The entry-point group third-party packages register their sinks under."""
ENABLED_KEY = "enabled"
"""The one key every plugin's section accepts: ``enabled = false`` switches the sink off."""
ALL_EVENTS: frozenset[Action] = frozenset(NOTIFY_ACTIONS)
BUILTIN_NAMES = frozenset({"datahub", *NOTIFY_SINKS})


def check_plugins(sections: Mapping[str, Mapping[str, Any]], *, what: str) -> dict[str, Any]:
    """The plugin sections switched on (``enabled`` dropped); ConfigError for an unknown name."""
    known = plugin_entry_points()
    on: dict[str, Any] = {}
    for name, section in sorted(sections.items()):
        if name in BUILTIN_NAMES:
            raise ConfigError(
                f"{what}.{name}: {name} is a built-in sink, configured by its own settings "
                f"([{name}]), not a [sinks.{name}] section"
            )
        if name not in known:
            names = ", ".join(sorted(known)) or "none is installed"
            raise ConfigError(f"{what}.{name}: no sink plugin of that name ({names})")
        if not isinstance(section, Mapping):
            raise ConfigError(f"{what}.{name}: must be a table of keys to values")
        enabled = section.get(ENABLED_KEY, True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{what}.{name}.{ENABLED_KEY}: must be true or false")
        if enabled:
            on[name] = {k: v for k, v in section.items() if k != ENABLED_KEY}
    return on


def plugin_entry_points() -> dict[str, EntryPoint]:
    """Installed sink plugins by name; a name taken by a built-in or an earlier one is skipped."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN_NAMES or ep.name in found:
            logger.warning("sink plugin %r (%s) is skipped: the name is taken", ep.name, ep.value)
            continue
        found[ep.name] = ep
    return found


def load_plugin(ep: EntryPoint) -> type:
    """The plugin's class; a plugin asked for that cannot be used is a configuration error."""
    try:
        loaded: object = ep.load()
    except Exception as exc:  # a plugin can fail in any way while importing
        raise ConfigError(
            f"sink plugin {ep.name!r} ({ep.value}) cannot be imported: {type(exc).__name__}: {exc}"
        ) from None
    problem = _shape_problem(loaded, ep.name)
    if problem is not None:
        raise ConfigError(f"sink plugin {ep.name!r} ({ep.value}) cannot be used: {problem}")
    assert isinstance(loaded, type)
    return loaded


def _shape_problem(obj: object, name: str) -> str | None:
    if not inspect.isclass(obj):
        return f"it is not a class but {type(obj).__name__}"
    if getattr(obj, "name", None) != name:
        return f"its class declares name {getattr(obj, 'name', None)!r}, not {name!r}"
    events = getattr(obj, "events", None)
    if not isinstance(events, frozenset) or not events or not events <= ALL_EVENTS:
        return f"its events must be a non-empty frozenset of {', '.join(NOTIFY_ACTIONS)}"
    if not callable(getattr(obj, "from_context", None)) or not callable(
        getattr(obj, "deliver", None)
    ):
        return "it needs a from_context(context) classmethod and a deliver(item, ref) method"
    return None
