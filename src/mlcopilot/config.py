"""Typed configuration: one strict base for every plugin's config model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PluginConfig(BaseModel):
    """Base of every check, catalog and sink config: frozen, and a misspelt key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)
