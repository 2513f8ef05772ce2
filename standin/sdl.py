"""Locate DataHub's GraphQL SDL and build the executable schema from it.

The SDL is DataHub's own (Apache-2.0) and is never copied into this repository: it is read
from ``$DATAHUB_GRAPHQL_SDL`` or from ``<repo>/../shared/datahub-graphql``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from graphql import GraphQLSchema, build_ast_schema, parse

from standin.incident_support import ML_INCIDENTS_SDL

ENV_VAR = "DATAHUB_GRAPHQL_SDL"

# acryl-datahub 1.7's ``get_urns_by_filter`` sends ``SearchFlags.fetchExtraFields``, which the
# April-2026 OSS SDL lacks (see the SDL README). Real GMS answers those calls, so the stand-in
# declares the one input field rather than failing every ``client.search.get_urns`` call.
_LOCAL_EXTENSIONS = """
extend input SearchFlags {
  fetchExtraFields: [String!]
}
"""


def _default_dir() -> Path:
    # standin/sdl.py -> parents[1] is the repository; shared/ sits beside it.
    return Path(__file__).resolve().parents[1].parent / "shared" / "datahub-graphql"


def sdl_path() -> Path | None:
    """The folder holding DataHub's ``*.graphql`` files, or None when it is absent."""
    configured = os.environ.get(ENV_VAR)
    folder = Path(configured) if configured else _default_dir()
    if folder.is_dir() and any(folder.glob("*.graphql")):
        return folder
    return None


def expected_sdl_location() -> Path:
    """Where the SDL was looked for (for skip messages)."""
    configured = os.environ.get(ENV_VAR)
    return Path(configured) if configured else _default_dir()


@functools.lru_cache(maxsize=4)
def _build(folder: Path, ml_incidents: bool = False) -> GraphQLSchema:
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.graphql")))
    extensions = _LOCAL_EXTENSIONS + (ML_INCIDENTS_SDL if ml_incidents else "")
    return build_ast_schema(parse(text + extensions))


def load_schema(folder: Path | None = None, *, ml_incidents: bool = False) -> GraphQLSchema:
    """Build (once per folder) the schema DataHub's GMS serves; raises if the SDL is absent.

    ``ml_incidents`` adds the ``incidents`` field DataHub PRs #19112 and #19367 gave MLModel,
    MLFeature and MLFeatureTable (see :mod:`standin.incident_support`).
    """
    folder = folder or sdl_path()
    if folder is None:
        raise FileNotFoundError(
            f"DataHub GraphQL SDL not found at {expected_sdl_location()} (set {ENV_VAR})"
        )
    return _build(folder.resolve(), ml_incidents)
