"""Build DataHub's own quality signals for tests: assertions, their runs and incidents.

Made with acryl-datahub's classes in the shapes its connectors write today: dbt tests as
``CUSTOM`` assertions with ``customAssertion`` (the pinned dbt source), older ones as
``DATASET`` assertions with ``datasetAssertion`` (the golden files), DataHub's freshness
assertions, and incidents raised in DataHub's UI (``source.type = MANUAL``) or by a failing
assertion.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata import schema_classes as sc

from testing.builders import ACTOR, ms, schema_field_urn

MCPs = list[MetadataChangeProposalWrapper]


def assertion_urn(name: str) -> str:
    return f"urn:li:assertion:{name}"


def incident_urn(name: str) -> str:
    return f"urn:li:incident:{name}"


def dbt_test(
    name: str,
    dataset: str,
    *,
    column: str | None = None,
    test_name: str = "not_null",
    description: str | None = None,
) -> MCPs:
    """A dbt test as the pinned dbt source writes it: ``CUSTOM`` with ``customAssertion``."""
    fields = [schema_field_urn(dataset, column)] if column else None
    info = sc.AssertionInfoClass(
        type=sc.AssertionTypeClass.CUSTOM,
        description=description,
        customProperties={"dbt_unique_id": f"test.shop.{test_name}.{name}"},
        source=sc.AssertionSourceClass(type=sc.AssertionSourceTypeClass.EXTERNAL),
        customAssertion=sc.CustomAssertionInfoClass(
            type="dbt",
            entity=dataset,
            field=fields[0] if fields else None,
            fields=fields,
            scope=sc.DatasetAssertionScopeClass.DATASET_COLUMN
            if column
            else sc.DatasetAssertionScopeClass.DATASET_ROWS,
            nativeType=f"{test_name}_{column or 'rows'}",
        ),
    )
    return _assertion(name, info, "dbt")


def ge_expectation(name: str, dataset: str, column: str | None = None) -> MCPs:
    """A Great Expectations expectation as its DataHub action writes it (``datasetAssertion``)."""
    info = sc.AssertionInfoClass(
        type=sc.AssertionTypeClass.DATASET,
        datasetAssertion=sc.DatasetAssertionInfoClass(
            dataset=dataset,
            scope=sc.DatasetAssertionScopeClass.DATASET_COLUMN
            if column
            else sc.DatasetAssertionScopeClass.DATASET_ROWS,
            fields=[schema_field_urn(dataset, column)] if column else None,
            operator=sc.AssertionStdOperatorClass.NOT_NULL,
            nativeType="expect_column_values_to_not_be_null",
        ),
    )
    return _assertion(name, info, "great-expectations")


def freshness_assertion(name: str, dataset: str, *, hours: int = 24) -> MCPs:
    """A DataHub freshness assertion: the dataset must change every ``hours``."""
    info = sc.AssertionInfoClass(
        type=sc.AssertionTypeClass.FRESHNESS,
        description=f"updated every {hours} hours",
        source=sc.AssertionSourceClass(type=sc.AssertionSourceTypeClass.NATIVE),
        freshnessAssertion=sc.FreshnessAssertionInfoClass(
            type=sc.FreshnessAssertionTypeClass.DATASET_CHANGE,
            entity=dataset,
            schedule=sc.FreshnessAssertionScheduleClass(
                type=sc.FreshnessAssertionScheduleTypeClass.FIXED_INTERVAL,
                fixedInterval=sc.FixedIntervalScheduleClass(
                    unit=sc.CalendarIntervalClass.HOUR, multiple=hours
                ),
            ),
        ),
    )
    return _assertion(name, info, "datahub")


def run(
    name: str,
    dataset: str,
    at: datetime,
    result: str,
    *,
    severity: str | None = None,
    native: dict[str, str] | None = None,
    unexpected: int | None = None,
    url: str | None = None,
    run_id: str | None = None,
) -> MCPs:
    """One completed run of assertion ``name`` on ``dataset``."""
    event = sc.AssertionRunEventClass(
        timestampMillis=ms(at),
        runId=run_id or f"run-{ms(at)}",
        asserteeUrn=dataset,
        assertionUrn=assertion_urn(name),
        status=sc.AssertionRunStatusClass.COMPLETE,
        result=sc.AssertionResultClass(
            type=result,
            severity=severity,
            nativeResults=native or {},
            unexpectedCount=unexpected,
            externalUrl=url,
        ),
    )
    return [MetadataChangeProposalWrapper(entityUrn=assertion_urn(name), aspect=event)]


def removed(urn: str) -> MCPs:
    """Soft-delete an entity (``status.removed``)."""
    return [MetadataChangeProposalWrapper(entityUrn=urn, aspect=sc.StatusClass(removed=True))]


def incident(
    name: str,
    entities: Sequence[str],
    *,
    title: str = "Orders arrive late",
    priority: int | None = 1,
    active: bool = True,
    created: datetime,
    incident_type: str = "OPERATIONAL",
    from_assertion: str | None = None,
) -> MCPs:
    """An incident on ``entities`` raised in DataHub (or by assertion ``from_assertion``)."""
    stamp = sc.AuditStampClass(time=ms(created), actor=ACTOR)
    source = (
        sc.IncidentSourceClass(
            type=sc.IncidentSourceTypeClass.ASSERTION_FAILURE,
            sourceUrn=assertion_urn(from_assertion),
        )
        if from_assertion
        else sc.IncidentSourceClass(type=sc.IncidentSourceTypeClass.MANUAL)
    )
    info = sc.IncidentInfoClass(
        type=incident_type,
        title=title,
        description=f"{title}: raised by the data team",
        entities=list(entities),
        priority=priority,
        status=sc.IncidentStatusClass(
            state=sc.IncidentStateClass.ACTIVE if active else sc.IncidentStateClass.RESOLVED,
            stage=sc.IncidentStageClass.INVESTIGATION if active else sc.IncidentStageClass.FIXED,
            lastUpdated=stamp,
        ),
        source=source,
        startedAt=ms(created),
        created=stamp,
    )
    return [MetadataChangeProposalWrapper(entityUrn=incident_urn(name), aspect=info)]


def _assertion(name: str, info: sc.AssertionInfoClass, platform: str) -> MCPs:
    urn = assertion_urn(name)
    return [
        MetadataChangeProposalWrapper(entityUrn=urn, aspect=info),
        MetadataChangeProposalWrapper(
            entityUrn=urn,
            aspect=sc.DataPlatformInstanceClass(platform=f"urn:li:dataPlatform:{platform}"),
        ),
    ]
