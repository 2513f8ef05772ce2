"""``POST /api/graphql``: graphql-core executes requests against DataHub's real SDL.

graphql-core does parsing, validation, fragments, variables, abstract types and
introspection. This module adds the root resolvers, a field resolver that makes entity
objects of the urns entity-typed fields give (:func:`standin.entities.ref`) and fills missing
non-null fields with defaults (so 1,800-line client queries succeed on partly mapped
entities), and errors worded and classified the way graphql-java/GMS words them.
"""

from __future__ import annotations

import functools
import logging
import re
import traceback
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    GraphQLEnumType,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    OperationDefinitionNode,
    Visitor,
    default_field_resolver,
    execute,
    get_named_type,
    is_composite_type,
    parse,
    validate,
    visit,
)

from standin import lineage, mutations, search, timeline
from standin.catalog import Catalog
from standin.entities import entity, ref
from standin.incident_support import IncidentNotWritten
from standin.index import LineageLimitError

log = logging.getLogger(__name__)
Json = dict[str, Any]


class DataHubError(Exception):
    """A resolver failure GMS reports with an HTTP-like code (``DataHubGraphQLException``)."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


_ERROR_TYPES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "UNAUTHORIZED", 404: "NOT_FOUND"}
_ERROR_TYPES |= {409: "CONFLICT", 500: "SERVER_ERROR"}


# --- request inspection (also used to record and match faults) -------------------------------


@dataclass(frozen=True)
class Operation:
    document: DocumentNode | None
    name: str | None  # operationName, else the root field
    root_fields: tuple[str, ...]
    syntax_error: GraphQLError | None = None


@functools.lru_cache(maxsize=512)
def _parse(query: str) -> DocumentNode | GraphQLError:
    # Clients resend the same (often 1,800-line) documents: parse and validate each once.
    try:
        return parse(query)
    except GraphQLError as err:
        return err


@functools.lru_cache(maxsize=512)
def _validate(schema: GraphQLSchema, document: DocumentNode) -> tuple[Json, ...]:
    return tuple(_validation_error(document, p) for p in validate(schema, document))


def inspect(query: str, operation_name: str | None) -> Operation:
    document = _parse(query)
    if isinstance(document, GraphQLError):
        return Operation(None, operation_name, (), document)
    ops = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    chosen = next((o for o in ops if o.name and o.name.value == operation_name), None)
    if chosen is None and len(ops) == 1:
        chosen = ops[0]
    roots = tuple(
        s.name.value
        for s in (chosen.selection_set.selections if chosen else ())
        if isinstance(s, FieldNode)
    )
    name = operation_name or (chosen.name.value if chosen and chosen.name else None)
    return Operation(document, name or (roots[0] if roots else None), roots)


# --- error wording ---------------------------------------------------------------------------

_UNDEFINED = re.compile(r"Cannot query field '([^']+)' on type '([^']+)'")


def _field_path(document: DocumentNode, target: Any) -> str:
    """``a/b/c``: the field names leading to ``target`` (graphql-java's error location)."""
    stack: list[str] = []
    found: list[str] = []

    class PathVisitor(Visitor):
        def enter_field(self, node: FieldNode, *_: Any) -> None:
            stack.append(node.name.value)
            if node is target:
                found.extend(stack)

        def leave_field(self, *_: Any) -> None:
            stack.pop()

    visit(document, PathVisitor())
    return "/".join(found)


def _validation_error(document: DocumentNode, err: GraphQLError) -> Json:
    match = _UNDEFINED.search(err.message)
    if match:
        path = _field_path(document, err.nodes[0]) if err.nodes else match.group(1)
        message = (
            f"Validation error (FieldUndefined@[{path}]) : "
            f"Field '{match.group(1)}' in type '{match.group(2)}' is undefined"
        )
    else:
        message = f"Validation error (ValidationError) : {err.message}"
    return _located(err, message, {"classification": "ValidationError"})


def _located(err: GraphQLError, message: str, extensions: Json) -> Json:
    body: Json = {"message": message, "locations": [], "extensions": extensions}
    if err.locations:
        body["locations"] = [{"line": loc.line, "column": loc.column} for loc in err.locations]
    if err.path:
        body["path"] = list(err.path)
    return body


def _execution_error(err: GraphQLError, errors_out: list[str]) -> Json:
    original = err.original_error
    if isinstance(original, DataHubError):
        code, message = original.code, str(original)
    elif isinstance(original, (ValueError, KeyError)):
        code, message = 400, str(original)
    elif isinstance(original, (LineageLimitError, IncidentNotWritten)):
        code, message = 500, str(original)
    elif original is None:
        code, message = 400, err.message
    else:  # GMS hides unexpected exceptions behind a generic message; keep the trace for tests
        errors_out.append("".join(traceback.format_exception(original)))
        log.error("stand-in resolver failed: %s", errors_out[-1])
        code, message = 500, "An unknown error occurred."
    extensions = {"code": code, "type": _ERROR_TYPES.get(code, "SERVER_ERROR")}
    extensions["classification"] = "DataFetchingException"
    return _located(err, message, extensions)


# --- default synthesis -----------------------------------------------------------------------


def _synthesize(type_: Any) -> Any:
    """A harmless value for a missing non-null field (what the real resolver would map)."""
    if isinstance(type_, GraphQLNonNull):
        type_ = type_.of_type
    if isinstance(type_, GraphQLList):
        return []
    if isinstance(type_, GraphQLEnumType):
        return next(iter(type_.values))
    if isinstance(type_, GraphQLScalarType):
        return {"String": "", "ID": "", "Boolean": False, "Float": 0.0}.get(type_.name, 0)
    if isinstance(type_, GraphQLObjectType):
        return {}
    return None  # interfaces and unions cannot be invented


def _objects(ctx: Catalog, value: Any) -> Any:
    """Urns (in lists, too) → entity objects; anything else unchanged."""
    if isinstance(value, str):
        return ref(ctx, value)
    if isinstance(value, list):
        return [_objects(ctx, v) for v in value]
    return value


def _resolve_field(source: Any, info: Any, **args: Any) -> Any:
    if isinstance(source, Root):
        return source.resolve(info, args)
    value = default_field_resolver(source, info, **args)
    if isinstance(value, (str, list)) and is_composite_type(get_named_type(info.return_type)):
        value = _objects(info.context, value)  # an entity-typed field gives the urn
    if value is None and isinstance(info.return_type, GraphQLNonNull):
        return _synthesize(info.return_type)
    return value


def _resolve_type(value: Any, _info: Any, _abstract: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("__typename")
    return getattr(value, "typename", None)


# --- root fields -----------------------------------------------------------------------------


class Root:
    """Query and Mutation root fields; any field without a method is reported unimplemented."""

    def __init__(self, ctx: Catalog, schema: GraphQLSchema) -> None:
        self.ctx = ctx
        self.schema = schema

    def resolve(self, info: Any, args: Json) -> Any:
        name = info.field_name
        method = getattr(self, f"q_{name}", None) or getattr(mutations, f"m_{name}", None)
        if method is not None:
            if method.__module__ == mutations.__name__:
                return method(self.ctx, **args)
            return method(**args)
        field = info.parent_type.fields[name]
        if list(field.args) == ["urn"] and isinstance(field.type, GraphQLObjectType):
            return entity(self.ctx, args["urn"])  # dataset(urn), tag(urn), mlModel(urn), ...
        raise DataHubError(f"{name} is not implemented by the DataHub stand-in", 501)

    def q_me(self) -> Json:
        privileges = self.schema.type_map["PlatformPrivileges"]
        assert isinstance(privileges, GraphQLObjectType)
        return {
            "corpUser": self.ctx.actor,
            "platformPrivileges": dict.fromkeys(privileges.fields, True),
        }

    def q_entity(self, urn: str) -> Any:
        return entity(self.ctx, urn)

    def q_entityExists(self, urn: str) -> bool:
        return self.ctx.exists(urn)

    def q_entities(self, urns: list[str], checkForExistence: bool | None = None) -> list[Any]:
        return [entity(self.ctx, u) for u in urns]

    def q_searchAcrossLineage(self, input: Json) -> Json:
        return lineage.search_lineage(self.ctx, input, scroll=False)

    def q_scrollAcrossLineage(self, input: Json) -> Json:
        return lineage.search_lineage(self.ctx, input, scroll=True)

    def q_searchAcrossEntities(self, input: Json) -> Json:
        return search.search_entities(self.ctx, input, scroll=False)

    def q_scrollAcrossEntities(self, input: Json) -> Json:
        return search.search_entities(self.ctx, input, scroll=True)

    def q_search(self, input: Json) -> Json:
        return search.search_entities(self.ctx, {**input, "types": [input["type"]]}, scroll=False)

    def q_globalViewsSettings(self) -> Json:
        return {"defaultView": None}

    def q_getTimeline(self, input: Json) -> Json:
        return timeline.graphql_timeline(self.ctx, input)


# --- entry point -----------------------------------------------------------------------------


def run(
    schema: GraphQLSchema,
    ctx: Catalog,
    body: Json,
    op: Operation,
    errors_out: list[str],
) -> Json:
    """Execute one GraphQL request body; always returns the JSON GMS would (HTTP 200)."""
    if op.syntax_error is not None or op.document is None:
        err = op.syntax_error or GraphQLError("Missing query")
        message = f"Invalid Syntax : {err.message}"
        return {"errors": [_located(err, message, {"classification": "InvalidSyntax"})]}
    problems = _validate(schema, op.document)
    if problems:
        return {"errors": [dict(p) for p in problems]}
    result = execute(
        schema,
        op.document,
        root_value=Root(ctx, schema),
        context_value=ctx,
        variable_values=body.get("variables") or None,
        operation_name=body.get("operationName"),
        field_resolver=_resolve_field,
        type_resolver=_resolve_type,
    )
    assert isinstance(result, ExecutionResult)
    out: Json = {"data": result.data}
    if result.errors:
        out["errors"] = [_execution_error(e, errors_out) for e in result.errors]
    return out
