"""ML models, groups, features, primary keys and feature tables; jobs and training runs."""

from __future__ import annotations

from typing import Any

from standin.catalog import key_of
from standin.entities.base import Json, Node, audit, custom_properties, fabric, params
from standin.entities.datasets import fine_grained


class MLModel(Node):
    typename = "MLModel"

    def name(self, _info: Any, **_: Any) -> str:
        return self._key().get("name") or self.urn

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._platform_urn(self._key().get("platform"))

    def origin(self, _info: Any, **_: Any) -> str:
        return fabric(self._key().get("origin"))

    def description(self, _info: Any, **_: Any) -> str | None:
        editable = self._a("editableMlModelProperties") or {}
        return editable.get("description") or (self._a("mlModelProperties") or {}).get(
            "description"
        )

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("mlModelProperties")
        if value is None:
            return None
        return {
            "name": value.get("name") or self.name(None),
            "description": value.get("description"),
            "lastModified": audit(value.get("lastModified")),
            "created": audit(value.get("created")),
            "date": value.get("date"),
            "version": (value.get("version") or {}).get("versionTag"),
            "type": value.get("type"),
            "hyperParams": params(value.get("hyperParams")),
            "trainingMetrics": params(value.get("trainingMetrics")),
            "mlFeatures": value.get("mlFeatures"),
            "tags": value.get("tags"),
            "groups": list(value.get("groups") or []),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
            "externalUrl": value.get("externalUrl"),
            "mlModelLineageInfo": {
                "trainingJobs": value.get("trainingJobs"),
                "downstreamJobs": value.get("downstreamJobs"),
            },
        }

    def _base_data(self, aspect: str, field: str) -> list[Json] | None:
        value = self._a(aspect)
        if value is None:
            return None
        return [
            {
                "dataset": d.get("dataset", ""),
                "motivation": d.get("motivation"),
                "preProcessing": d.get("preProcessing"),
            }
            for d in value.get(field) or []
        ]

    def trainingData(self, _info: Any, **_: Any) -> list[Json] | None:
        return self._base_data("mlModelTrainingData", "trainingData")

    def evaluationData(self, _info: Any, **_: Any) -> list[Json] | None:
        return self._base_data("mlModelEvaluationData", "evaluationData")


class MLModelGroup(MLModel):
    typename = "MLModelGroup"

    def description(self, _info: Any, **_: Any) -> str | None:
        return (self._a("mlModelGroupProperties") or {}).get("description")

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("mlModelGroupProperties")
        if value is None:
            return None
        return {
            "name": value.get("name") or self.name(None),
            "description": value.get("description"),
            "created": audit(value.get("created")),
            "lastModified": audit(value.get("lastModified")),
            "version": value.get("version"),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
            "externalUrl": value.get("externalUrl"),
            "createdAt": (value.get("created") or {}).get("time"),
        }


class MLFeature(Node):
    typename = "MLFeature"
    _props_aspect = "mlFeatureProperties"

    def name(self, _info: Any, **_: Any) -> str:
        return self._key().get("name") or self.urn

    def featureNamespace(self, _info: Any, **_: Any) -> str:
        return self._key().get("featureNamespace") or ""

    def description(self, _info: Any, **_: Any) -> str | None:
        return (self._a(self._props_aspect) or {}).get("description")

    def dataType(self, _info: Any, **_: Any) -> str | None:
        return (self._a(self._props_aspect) or {}).get("dataType")

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a(self._props_aspect)
        if value is None:
            return None
        return {
            "description": value.get("description"),
            "dataType": value.get("dataType"),
            "version": value.get("version"),
            "sources": list(value.get("sources") or []),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
        }

    featureProperties = properties


class MLPrimaryKey(MLFeature):
    typename = "MLPrimaryKey"
    _props_aspect = "mlPrimaryKeyProperties"

    def primaryKeyProperties(self, _info: Any, **_: Any) -> Json | None:
        return self.properties(None)


class MLFeatureTable(Node):
    typename = "MLFeatureTable"

    def name(self, _info: Any, **_: Any) -> str:
        return self._key().get("name") or self.urn

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._platform_urn(self._key().get("platform"))

    def description(self, _info: Any, **_: Any) -> str | None:
        return (self._a("mlFeatureTableProperties") or {}).get("description")

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("mlFeatureTableProperties")
        if value is None:
            return None
        return {
            "description": value.get("description"),
            "mlFeatures": list(value.get("mlFeatures") or []),
            "mlPrimaryKeys": list(value.get("mlPrimaryKeys") or []),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
        }

    featureTableProperties = properties


# --- jobs and runs ---------------------------------------------------------------------------


class DataFlow(Node):
    typename = "DataFlow"

    def orchestrator(self, _info: Any, **_: Any) -> str:
        return self._key().get("orchestrator") or ""

    def flowId(self, _info: Any, **_: Any) -> str:
        return self._key().get("flowId") or ""

    def cluster(self, _info: Any, **_: Any) -> str:
        return self._key().get("cluster") or ""

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._platform_urn(self.orchestrator(None))

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("dataFlowInfo")
        if value is None:
            return None
        return {
            "name": value.get("name") or self.flowId(None),
            "description": value.get("description"),
            "project": value.get("project"),
            "externalUrl": value.get("externalUrl"),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
        }

    info = properties


class DataJob(Node):
    typename = "DataJob"

    def jobId(self, _info: Any, **_: Any) -> str:
        return self._key().get("jobId") or ""

    def dataFlow(self, _info: Any, **_: Any) -> str | None:
        return self._key().get("flow")

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._platform_urn(key_of(self._key().get("flow") or "").get("orchestrator"))

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("dataJobInfo")
        if value is None:
            return None
        return {
            "name": value.get("name") or self.jobId(None),
            "description": value.get("description"),
            "externalUrl": value.get("externalUrl"),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
        }

    info = properties

    def inputOutput(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("dataJobInputOutput")
        if value is None:
            return None

        def urns(plain: str, edges: str) -> list[str]:
            found = list(value.get(plain) or [])
            found += [e.get("destinationUrn") for e in value.get(edges) or []]
            return list(dict.fromkeys(u for u in found if u))

        return {
            "inputDatasets": urns("inputDatasets", "inputDatasetEdges"),
            "outputDatasets": urns("outputDatasets", "outputDatasetEdges"),
            "inputDatajobs": urns("inputDatajobs", "inputDatajobEdges"),
            "fineGrainedLineages": [
                fine_grained(f) for f in value.get("fineGrainedLineages") or []
            ],
        }


class DataProcessInstance(Node):
    typename = "DataProcessInstance"

    def name(self, _info: Any, **_: Any) -> str | None:
        return (self._a("dataProcessInstanceProperties") or {}).get("name")

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("dataProcessInstanceProperties")
        if value is None:
            return None
        return {
            "name": value.get("name") or "",
            "externalUrl": value.get("externalUrl"),
            "created": audit(value.get("created")) or {"time": 0},
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
        }

    def created(self, _info: Any, **_: Any) -> Json | None:
        return audit((self._a("dataProcessInstanceProperties") or {}).get("created"))

    def externalUrl(self, _info: Any, **_: Any) -> str | None:
        return (self._a("dataProcessInstanceProperties") or {}).get("externalUrl")

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._platform_urn((self._a("dataPlatformInstance") or {}).get("platform"))

    def parentTemplate(self, _info: Any, **_: Any) -> str | None:
        return (self._a("dataProcessInstanceRelationships") or {}).get("parentTemplate")

    def mlTrainingRunProperties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("mlTrainingRunProperties")
        if value is None:
            return None
        return {
            "id": value.get("id"),
            "outputUrls": value.get("outputUrls"),
            "hyperParams": params(value.get("hyperParams")),
            "trainingMetrics": params(value.get("trainingMetrics")),
        }
