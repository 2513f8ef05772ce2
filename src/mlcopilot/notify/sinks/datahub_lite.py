"""Acknowledgements read back from an embedded DataHub Lite catalog's incidents.

The DataHub server backends answer the same question through their own API; Lite keeps the
``incidentInfo`` aspect our write-back stored, with whatever stage or assignees people set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datahub.lite.sqlite_lite import SqliteLite
from datahub.lite.sqlite_lite_config import SqliteLiteConfig

from mlcopilot.model import Urn


class LiteIncidentStatus:
    """Reads ``incidentInfo.status`` and ``assignees`` of incidents in a Lite file (read-only)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def incident_status(self, urns: Sequence[Urn]) -> dict[Urn, tuple[str, str | None, int]]:
        """``urn -> (state, stage, number of assignees)`` for the incidents that exist."""
        if not urns or not self._path.exists():
            return {}
        lite = SqliteLite(SqliteLiteConfig(file=str(self._path), read_only=True))
        found: dict[Urn, tuple[str, str | None, int]] = {}
        try:
            for urn in urns:
                aspects = lite.get(urn, ["incidentInfo"]) or {}
                info: Any = aspects.get("incidentInfo")
                if isinstance(info, dict):
                    status = info.get("status") or {}
                    found[urn] = (
                        str(status.get("state", "")),
                        status.get("stage"),
                        len(info.get("assignees") or []),
                    )
        finally:
            lite.sqlite_client.close()
        return found
