"""Which entity types an incident may name: DataHub before and after PRs #19112 and #19367.

GMS decides it in two places, both reproduced here.

- **Writes.** ``IncidentInfo.pdl`` lists the types ``incidentInfo.entities`` may hold (its
  ``@Relationship IncidentOn`` ``entityTypes``). Every write is validated against it before
  anything of the batch is stored (``ChangeItemImpl.build`` →
  ``ValidationApiUtils.validateRecordTemplate`` → ``EntityRegistryUrnValidator``), and one
  urn of any other type fails the whole request: Rest.li answers 422, OpenAPI 400 ("Validation
  Error"), and ``raiseIncident`` / ``updateIncident`` a GraphQL error with code 500 (their
  resolvers rethrow the message as a ``RuntimeException``).
- **Reads.** An entity lists its incidents (and DataHub's UI shows them on its page) only where
  ``incident.graphql`` extends its GraphQL type with ``incidents``.

The SDL in ``../shared/datahub-graphql`` is DataHub ``master`` of 2026-04-22 (between v1.5.0
and v1.6), whose ``IncidentOn`` is :data:`OLD_INCIDENT_ON` and whose ``incidents`` field is on
Dataset, DataJob, DataFlow, Dashboard and Chart only: an ML model, feature or feature table in
an incident is rejected. That is the stand-in's default. With ``ml_incidents`` it serves
today's DataHub instead: #18478 put ``mlModel`` and ``mlFeature`` (and ``service``,
``aiAgent``) on ``IncidentOn``, #19112 gave ``MLModel`` and ``MLFeature`` their ``incidents``
field, #19367 did both for ``mlFeatureTable``.
"""

from __future__ import annotations

from collections.abc import Iterable

OLD_INCIDENT_ON = frozenset({"dataset", "chart", "dashboard", "dataFlow", "dataJob", "schemaField"})
"""``IncidentOn`` in ``IncidentInfo.pdl`` from #9710 (2024) to #18478 (2026-07): v1.5, v1.6."""

NEW_INCIDENT_ON = OLD_INCIDENT_ON | {
    "mlModel",
    "mlFeature",
    "mlFeatureTable",
    "service",
    "aiAgent",
}
"""``IncidentOn`` after #18478 and #19367 (what acryl-datahub 1.7's ``IncidentInfoClass`` says)."""

_INCIDENTS_FIELD = """
  incidents(
    state: IncidentState
    stage: IncidentStage
    priority: IncidentPriority
    assigneeUrns: [String!]
    start: Int
    count: Int
  ): EntityIncidentsResult
"""

ML_INCIDENTS_SDL = "".join(
    f"\nextend type {name} {{{_INCIDENTS_FIELD}}}\n"
    for name in ("MLModel", "MLFeature", "MLFeatureTable")
)
"""What #19112 (MLModel, MLFeature) and #19367 (MLFeatureTable) add to ``incident.graphql``:
the ``incidents`` field with the arguments of the Dataset one."""


class InvalidIncident(ValueError):
    """An ``incidentInfo`` naming an entity whose type ``IncidentOn`` does not allow."""


class IncidentNotWritten(RuntimeError):
    """:class:`InvalidIncident` as ``raiseIncident`` / ``updateIncident`` report it: their
    resolvers rethrow the failure as a ``RuntimeException``, which GraphQL answers with code
    500 and its message (``DataHubDataFetcherExceptionHandler``)."""


def incident_on(ml_incidents: bool) -> frozenset[str]:
    """The entity types ``incidentInfo.entities`` may hold on the DataHub being served."""
    return NEW_INCIDENT_ON if ml_incidents else OLD_INCIDENT_ON


def check_incident(entities: Iterable[object] | None, allowed: frozenset[str]) -> None:
    """Raise :class:`InvalidIncident` worded as GMS's validator when a urn is not allowed."""
    problems = [
        f'ERROR :: /entities/{n} :: "Provided urn {urn}" is invalid: Entity type for urn: '
        f"{urn} is not a valid destination for field path: /entities/*"
        for n, urn in enumerate(entities or [])
        if isinstance(urn, str) and _entity_type(urn) not in allowed
    ]
    if problems:
        raise InvalidIncident("Invalid format for aspect: incident\n Cause: " + "\n".join(problems))


def _entity_type(urn: str) -> str:
    parts = urn.split(":", 3)  # urn:li:<type>:...
    return parts[2] if len(parts) > 2 else ""
