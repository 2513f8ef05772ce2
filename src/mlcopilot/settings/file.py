"""The configuration file: find it, read its TOML, refuse secrets in it, and say where a key is.

:mod:`tomllib` parses but gives no positions, so :func:`line_of` finds a key's line with a
small scan of the table headers and ``key =`` lines (``tomlkit`` is not a dependency). The
scan understands what a hand-written configuration file holds: ``[table]`` and
``[dotted.table]`` headers, ``key = value`` and ``dotted.key = value`` lines, quoted keys.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mlcopilot import redact
from mlcopilot.errors import ConfigError

CONFIG_ENV = "MLCOPILOT_CONFIG"
"""The environment variable naming the configuration file."""

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(
    r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)
_PART = re.compile(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+)")


def locate(
    flag: Path | None, environ: Mapping[str, str], home: Path
) -> tuple[Path | None, str | None]:
    """The configuration file to read and what named it (``--config``, the variable, home).

    ``--config PATH``, else ``$MLCOPILOT_CONFIG``, else ``$MLCOPILOT_HOME/config.toml`` when it
    exists. A file named by the flag or the variable must exist.

    Raises:
        ConfigError: ``--config`` or ``$MLCOPILOT_CONFIG`` names a file that does not exist,
            or a directory.
    """
    named = environ.get(CONFIG_ENV) or None
    for path, how in ((flag, "--config"), (Path(named) if named else None, CONFIG_ENV)):
        if path is None:
            continue
        path = path.expanduser()
        if path.is_dir():
            raise ConfigError(
                f"{how} {path}: is a directory, not a configuration file; name the TOML file "
                "(e.g. mlcopilot.toml)"
            )
        if not path.is_file():
            raise ConfigError(f"{how} {path}: no such configuration file")
        return path, how
    default = home / "config.toml"
    return (default, "MLCOPILOT_HOME") if default.is_file() else (None, None)


def read(
    path: Path, secrets: Mapping[str, str], variables: Mapping[str, str]
) -> tuple[dict[str, Any], str]:
    """The file's tables and its text; secrets refused.

    Args:
        path: The TOML file.
        secrets: Dotted key → the environment variable that sets it, for every secret key;
            such a key in the file is refused, and so is any value shaped like a secret
            (a token, a ``user:password@`` URL, a webhook URL).
        variables: Dotted key → its environment variable, to say where such a value goes.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds a secret. The message
            names the file, the line and the key, never the value.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path}: cannot read the configuration file ({type(exc).__name__})"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message says the line and column but never quotes the text.
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    for key, value in flatten(data):
        dotted = ".".join(key)
        where = f"{path}:{line_of(text, key) or '?'}"
        if dotted in secrets:
            raise ConfigError(
                f"{where}: {dotted} is a secret and is never read from a file: set "
                f"{secrets[dotted]} or {secrets[dotted]}_FILE"
            )
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and redact.redact(item) != item:
                instead = (
                    f"set {variables[dotted]} instead"
                    if dotted in variables
                    else ("secrets are read from the environment or *_FILE files only")
                )
                raise ConfigError(
                    f"{where}: {dotted} holds a secret (a token, a password or a webhook "
                    f"URL), which is never read from a file; {instead}"
                )
    return data, text


def flatten(
    data: Mapping[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf of nested tables as (key path, value); an empty table is a leaf too."""
    for key, value in data.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from flatten(value, path)
        else:
            yield path, value


def line_of(text: str, key: tuple[str, ...]) -> int | None:
    """The 1-based line defining ``key`` (or the nearest table holding it); None if not found."""
    best: tuple[int, int] | None = None  # (matched length, line)
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None:
            table = _parts(header[1])
            path = table
        else:
            match = _KEY.match(line)
            if match is None:
                continue
            path = (*table, *_parts(match[1]))
        if path == key:
            return number
        if key[: len(path)] == path and (best is None or len(path) > best[0]):
            best = (len(path), number)
    return best[1] if best is not None else None


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(next(g for g in m.groups() if g is not None) for m in _PART.finditer(dotted))
