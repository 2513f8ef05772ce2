"""Every error mlcopilot raises, as one tree.

::

    MlCopilotError                 exit 2 unless said otherwise
    ├── UsageError                 bad flags, malformed URN, unknown model
    │   └── ClockBehind            a scan's clock earlier than the last committed scan's
    ├── ConfigError                a configuration file or value that cannot be used
    ├── InputError                 a metadata file that is not DataHub JSON (MCPs / MCEs)
    ├── CatalogError               the catalog answered, but not with something usable
    │   ├── CatalogUnavailable     the catalog cannot be reached at all      (exit 3)
    │   └── NodeNotFound           an URN the catalog does not know
    ├── StoreError                 the state database is unusable (corrupt, wrong schema)
    │   ├── MissingStore           none exists where the settings point
    │   └── StoreConflict          another process changed the same incidents at once
    └── PluginUnavailable          a plugin that cannot be imported (names the extra to install)

Adapters wrap their libraries' exceptions with ``raise ... from exc`` at the boundary, so the
CLI can print one line saying what and where, and choose the exit code.
"""

from __future__ import annotations


class MlCopilotError(Exception):
    """The root of every error mlcopilot raises on purpose."""

    exit_code = 2


class UsageError(MlCopilotError):
    """A command-line argument that cannot be used (bad URN, unknown model, bad flag value)."""


class ClockBehind(UsageError):
    """A scan's clock earlier than the last committed scan's: refused before it reads anything."""


class ConfigError(MlCopilotError):
    """A configuration value that cannot be used."""


class InputError(MlCopilotError):
    """An input file that is not what it should be (not JSON, not DataHub MCPs/MCEs)."""


class CatalogError(MlCopilotError):
    """The catalog answered, but not with something usable."""


class CatalogUnavailable(CatalogError):
    """The catalog cannot be reached or opened at all."""

    exit_code = 3


class NodeNotFound(CatalogError):
    """The catalog has no entity with this URN."""


class StoreError(MlCopilotError):
    """The state database cannot be used (corrupt, unreadable, from a newer version)."""


class MissingStore(StoreError):
    """No state database exists where the settings point: nothing was ever recorded there."""


class StoreConflict(StoreError):
    """Another process changed the same incidents at the same time; nothing was written."""


class PluginUnavailable(MlCopilotError):
    """A plugin that cannot be loaded."""
