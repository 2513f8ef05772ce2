"""Every catalog backend passes the same contract; only the way to build one differs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.protocols import Catalog
from tests.catalog.contract import CatalogContract, MakeCatalog
from tests.catalog.datahub_backend import needs_standin, standin_catalog
from tests.catalog.mcp_backend import mcp_catalog, needs_mcp

Factory = Callable[[Path, Sequence[MetadataChangeProposalWrapper]], Catalog]


def lite_catalog(tmp: Path, mcps: Sequence[MetadataChangeProposalWrapper]) -> Catalog:
    catalog = LiteCatalog(tmp / "catalog.db", create=True)
    catalog.ingest(mcps)
    return catalog


BACKENDS: dict[str, Factory] = {
    "datahub": standin_catalog,
    "lite": lite_catalog,
    "mcp": mcp_catalog,
}
MARKS = {"datahub": [needs_standin], "mcp": [needs_mcp]}
PARAMS = [pytest.param(name, marks=MARKS.get(name, [])) for name in sorted(BACKENDS)]


@pytest.fixture(params=PARAMS)
def make_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeCatalog]:
    factory = BACKENDS[request.param]
    made: list[Catalog] = []

    def make(mcps: Sequence[MetadataChangeProposalWrapper]) -> Catalog:
        made.append(factory(tmp_path / f"catalog{len(made)}", mcps))
        return made[-1]

    yield make
    for catalog in made:
        catalog.close()


class TestCatalogContract(CatalogContract):
    """The contract, run against every backend in ``BACKENDS``."""
