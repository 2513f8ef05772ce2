"""Every GraphQL document the DataHub backend sends is valid against DataHub's real SDL."""

from __future__ import annotations

from typing import Any

import pytest

graphql = pytest.importorskip("graphql")

from graphql import (  # noqa: E402
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    parse,
    validate,
)
from graphql.execution.values import get_variable_values  # noqa: E402

from mlcopilot.catalog.datahub import queries as q  # noqa: E402
from mlcopilot.catalog.datahub.catalog import READ_ASPECTS  # noqa: E402
from standin.sdl import expected_sdl_location, load_schema, sdl_path  # noqa: E402

pytestmark = pytest.mark.skipif(
    sdl_path() is None, reason=f"DataHub GraphQL SDL not found at {expected_sdl_location()}"
)

GMS_COMPLEXITY_LIMIT = 2000
"""``graphQL.query.complexityLimit`` in GMS's application.yaml."""

VARIABLES: dict[str, dict[str, Any]] = {
    "mlcopilotEntities": q.entities_variables(["urn:li:corpuser:x"], READ_ASPECTS),
    "mlcopilotRelationships": {"urn": "urn:li:corpuser:x", "input": q.incoming(q.PRODUCES, 5)},
    "mlcopilotDownstream": q.downstream_variables(["urn:li:corpuser:x"]),
    "mlcopilotAssertions": {"urn": "urn:li:corpuser:x", "assertionStart": 200},
    "mlcopilotIncidents": {"urn": "urn:li:corpuser:x", "incidentStart": 100},
    "mlcopilotProfilesBefore": {"urns": ["urn:li:corpuser:x"], "end": 1_786_000_000_000},
    "mlcopilotLineage": q.lineage_variables("urn:li:corpuser:x", ["1", "2", "3+"], 1000, "id"),
    "mlcopilotSearch": q.search_variables(["MLMODEL"], 1000, None),
    "mlcopilotMe": {},
    "mlcopilotPrivileges": {"urns": ["urn:li:corpuser:x"]},
}


def complexity(selection: SelectionSetNode | None, fragments: dict[str, Any]) -> int:
    """GMS's (graphql-java's default) complexity: one per selected field, fragments expanded."""
    total = 0
    for node in selection.selections if selection else ():
        if isinstance(node, FieldNode):
            total += 1 + complexity(node.selection_set, fragments)
        elif isinstance(node, InlineFragmentNode):
            total += complexity(node.selection_set, fragments)
        elif isinstance(node, FragmentSpreadNode):
            total += complexity(fragments[node.name.value].selection_set, fragments)
    return total


@pytest.mark.parametrize("name", sorted(q.DOCUMENTS))
def test_document_validates_against_the_sdl(name: str) -> None:
    schema = load_schema()
    document = parse(q.DOCUMENTS[name])
    assert validate(schema, document) == []
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    assert operation.name is not None
    assert operation.name.value == name


@pytest.mark.parametrize("name", sorted(q.DOCUMENTS))
def test_variables_fit_the_document(name: str) -> None:
    schema = load_schema()
    document = parse(q.DOCUMENTS[name])
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    definitions = operation.variable_definitions or ()
    coerced = get_variable_values(schema, definitions, VARIABLES[name])
    assert not isinstance(coerced, list), coerced  # a list holds the coercion errors


@pytest.mark.parametrize("name", sorted(q.DOCUMENTS))
def test_complexity_is_far_below_the_gms_limit(name: str) -> None:
    document = parse(q.DOCUMENTS[name])
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    # Static, so independent of how many urns one `entities` batch carries.
    assert complexity(operation.selection_set, fragments) < GMS_COMPLEXITY_LIMIT // 10


def test_entity_types_read_through_graphql_have_raw_aspects() -> None:
    schema = load_schema()
    for graphql_type in q.GRAPHQL_TYPES.values():
        assert "aspects" in schema.get_type(graphql_type).fields, graphql_type  # type: ignore[union-attr]
    # The training-run type has none: its aspects are read over OpenAPI batchGet.
    assert "aspects" not in schema.get_type("DataProcessInstance").fields  # type: ignore[union-attr]


def test_degree_filter_covers_the_hops() -> None:
    assert q.degrees_for(1) == ["1"]
    assert q.degrees_for(2) == ["1", "2"]
    assert q.degrees_for(50) == ["1", "2", "3+"]
