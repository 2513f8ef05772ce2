"""What ``mlcopilot config show`` and ``config init`` print: the effective keys, a starting file.

Both are derived from the settings models themselves (their fields, defaults and
descriptions) and from each check's own config model, so a new key appears in both without
being listed again here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mlcopilot.errors import ConfigError
from mlcopilot.settings import DEFAULT, ENVIRONMENT, SECRETS, Settings, format_duration

Row = tuple[str, object, str]
"""A key, its value as shown (secrets masked), and where it came from."""


def effective_rows(settings: Settings, check_models: Mapping[str, type[BaseModel]]) -> list[Row]:
    """Every effective key: the settings', then each check's (its model's defaults filled in).

    Args:
        settings: The loaded settings.
        check_models: Check name → its config model; a configured check without one is shown
            as its raw section.

    Raises:
        ConfigError: a check section its model refuses, naming the file and line.
    """
    rows = [row for row in settings.effective() if not row[0].startswith("checks.")]
    for name in sorted(set(check_models) | set(settings.checks)):
        section = dict(settings.checks.get(name, {}))
        enabled = section.pop("enabled", True)
        rows.append((f"checks.{name}.enabled", enabled, _check_source(settings, name, "enabled")))
        model = check_models.get(name)
        values: Mapping[str, Any] = section
        if model is not None:
            try:
                values = model.model_validate(section).model_dump(mode="json")
            except ValidationError as exc:
                problem = exc.errors()[0]
                key = ".".join(str(p) for p in problem["loc"])
                raise ConfigError(
                    f"{settings.where_is(f'checks.{name}.{key}')}: checks.{name}.{key}: "
                    f"{'unknown key' if problem['type'] == 'extra_forbidden' else problem['msg']}"
                ) from None
        for key, value in values.items():
            if key != "enabled":
                rows.append((f"checks.{name}.{key}", value, _check_source(settings, name, key)))
    return rows


def _check_source(settings: Settings, name: str, key: str) -> str:
    if key in settings.checks.get(name, {}):
        return settings.where_is(f"checks.{name}.{key}")
    return DEFAULT


def render_text(rows: list[Row]) -> str:
    """One ``key = value  # source`` line per key, values in TOML spelling."""
    # Sources line up, except after the odd long value (a list of terms) that would push all.
    width = min(56, max(len(f"{key} = {toml_value(value)}") for key, value, _ in rows))
    lines = [
        f"{f'{key} = {toml_value(value)}':<{width}}  # {source}" for key, value, source in rows
    ]
    return "\n".join(lines) + "\n"


def render_json(rows: list[Row]) -> str:
    """``{"key": {"value": ..., "source": ...}}``, in the order of the text form."""
    shown = {key: {"value": value, "source": source} for key, value, source in rows}
    return json.dumps(shown, indent=2, default=str) + "\n"


def toml_value(value: object) -> str:
    """``value`` as TOML spells it; ``(unset)`` for None (TOML has no null)."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, timedelta):
        return json.dumps(format_duration(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def starting_file(check_models: Mapping[str, type[BaseModel]]) -> str:
    """A commented configuration file: every key at its default, commented out.

    It loads back to the defaults; uncomment a line to change it.
    """
    lines = [
        "# mlcopilot configuration (TOML): `mlcopilot --config PATH`, $MLCOPILOT_CONFIG or",
        "# $MLCOPILOT_HOME/config.toml. Environment variables override this file; flags",
        "# override both. `mlcopilot config show` prints every effective value and its source.",
        "#",
        "# Secrets never go in this file (it is refused): tokens and webhook URLs are read from",
        "# their environment variable or a file named by NAME_FILE; a state database password",
        "# goes in MLCOPILOT_STATE_URL.",
        "",
    ]
    settings = Settings.model_fields
    for name, field in settings.items():
        annotation = field.annotation
        if name == "checks":
            continue
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines += ["", f"[{name}]"]
            lines += _commented(name, annotation.model_fields, annotation())
        else:
            lines += _commented("", {name: field}, None)
    for check, model in sorted(check_models.items()):
        lines += ["", f"[checks.{check}]", "# enabled = true"]
        lines += _commented(f"checks.{check}", model.model_fields, _defaults(model))
    return "\n".join(lines) + "\n"


def _defaults(model: type[BaseModel]) -> BaseModel | None:
    try:
        return model()
    except ValidationError:  # a check whose model has required keys: no defaults to show
        return None


def _commented(section: str, fields: Mapping[str, Any], instance: BaseModel | None) -> list[str]:
    lines: list[str] = []
    for name, field in fields.items():
        key = f"{section}.{name}" if section else name
        variable = ENVIRONMENT.get(key)
        about = field.description or ""
        if variable:
            about = f"{about} ({variable})" if about else variable
        if about:
            lines.append(f"# {about}")
        if key in SECRETS:
            lines.append(f"# {name}: a secret, never here: set {variable} or {variable}_FILE")
            continue
        default = (
            getattr(instance, name)
            if instance is not None
            else field.get_default(call_default_factory=True)
        )
        if key == "home":
            default = Path("~/.mlcopilot")
        if default is None:
            lines.append(f"# {name} = ")
        elif key == "notify.repeat_interval" or isinstance(default, timedelta):
            lines.append(f"# {name} = {json.dumps(format_duration(default))}")
        else:
            lines.append(f"# {name} = {toml_value(default)}")
    return lines
