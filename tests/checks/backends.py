"""The three catalog backends, for check scenarios that must read the same on each.

``lite:`` (a Lite file), ``datahub:`` (the stand-in GMS) and ``mcp:`` (``mcp-server-datahub``
over the stand-in), each built from the same DataHub MCPs; the last two skip, with the reason,
where the stand-in or the MCP server cannot run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.protocols import Catalog
from tests.catalog.datahub_backend import needs_standin, standin_catalog
from tests.catalog.mcp_backend import mcp_catalog, needs_mcp

Factory = Callable[[Path, Sequence[MetadataChangeProposalWrapper]], Catalog]


def lite_catalog(tmp: Path, mcps: Sequence[MetadataChangeProposalWrapper]) -> Catalog:
    """A fresh Lite file under ``tmp`` holding ``mcps``."""
    catalog = LiteCatalog(tmp / "catalog.db", create=True)
    catalog.ingest(mcps)
    return catalog


BACKENDS: dict[str, Factory] = {
    "lite": lite_catalog,
    "datahub": standin_catalog,
    "mcp": mcp_catalog,
}
PARAMS = [
    pytest.param("lite"),
    pytest.param("datahub", marks=[needs_standin]),
    pytest.param("mcp", marks=[needs_mcp]),
]
"""``pytest.fixture(params=PARAMS)``: one run per backend."""
