"""Synthetic DataHub catalogs for benchmarks: ML models over a layered lineage of datasets.

Everything is written as DataHub metadata (MCPs in the file-sink JSON form) built with
acryl-datahub's classes, so what the benchmarks load is what a real ingestion would produce.

Shape: a pool of datasets in ``depth`` layers (layer 0 feeds features, the last layer is raw);
every dataset of layer i has ``fan_in`` upstreams in layer i+1 and every upstream is used at
least once, so all of them are reachable. A pool of features sources layer-0 datasets; feature
tables group the features; each model consumes ``features_per_model`` features drawn from the
pool, so models share upstream entities the way a real ML estate does.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datahub.metadata.schema_classes as m
from datahub.emitter.mce_builder import (
    make_dataset_urn,
    make_ml_feature_table_urn,
    make_ml_feature_urn,
    make_ml_model_urn,
    make_schema_field_urn,
    make_tag_urn,
)
from datahub.emitter.mcp import MetadataChangeProposalWrapper

NOW_MS = 1_795_000_000_000  # 2026-11-18: fixed, so generated catalogs are reproducible


@dataclass(frozen=True)
class Shape:
    """The knobs of a generated catalog."""

    models: int = 1
    features: int = 10
    features_per_model: int = 10
    features_per_table: int = 20
    datasets: int = 90
    depth: int = 4
    fan_in: int = 2
    fields: int = 8
    column_lineage: float = 0.5
    pii: float = 0.05
    sla: float = 0.2
    deprecated: float = 0.02
    seed: int = 7

    @classmethod
    def one_model(cls, upstream: int, **overrides: Any) -> Shape:
        """One model with about ``upstream`` upstream entities (10% features, rest datasets)."""
        features = max(1, upstream // 10)
        tables = max(1, features // 20)
        datasets = max(1, upstream - features - tables)
        return cls(features=features, features_per_model=features, datasets=datasets, **overrides)

    @classmethod
    def estate(cls, models: int, shared_upstream: int, **overrides: Any) -> Shape:
        """``models`` models drawing from ``shared_upstream`` shared upstream entities."""
        features = max(1, shared_upstream // 5)
        datasets = shared_upstream - features - max(1, features // 20)
        return cls(
            models=models,
            features=features,
            features_per_model=min(features, 10),
            datasets=datasets,
            **overrides,
        )


def _layers(shape: Shape) -> list[list[str]]:
    """``depth`` layers of datasets whose sizes differ by at most one.

    (Fixed-size layers left a stray last layer of a few datasets, one hop deeper than the
    shape says, which is not a shape anyone asked for.)
    """
    names = [make_dataset_urn("hive", f"db.t{i:07d}") for i in range(shape.datasets)]
    depth = max(1, min(shape.depth, len(names)))
    size, extra = divmod(len(names), depth)
    layers: list[list[str]] = []
    start = 0
    for i in range(depth):
        end = start + size + (1 if i < extra else 0)
        layers.append(names[start:end])
        start = end
    return [layer for layer in layers if layer]


def generate(shape: Shape) -> Iterator[dict[str, Any]]:
    """Yield the catalog's MCPs as file-sink JSON objects."""
    rng = random.Random(shape.seed)
    layers = _layers(shape)
    pii_tag = make_tag_urn("PII")
    yield _mcp(pii_tag, m.TagPropertiesClass(name="PII"))
    for depth, layer in enumerate(layers):
        upstream_layer = layers[depth + 1] if depth + 1 < len(layers) else []
        for index, urn in enumerate(layer):
            yield from _dataset(shape, rng, urn, index, upstream_layer, pii_tag)
    features = [make_ml_feature_urn("features", f"f{i:07d}") for i in range(shape.features)]
    for index, feature in enumerate(features):
        # Every layer-0 dataset feeds some feature, so the whole pool is reachable.
        sources = layers[0][index :: len(features)] or [layers[0][index % len(layers[0])]]
        yield _mcp(
            feature,
            m.MLFeaturePropertiesClass(
                sources=sources, customProperties={"source_column": f"c{index % shape.fields}"}
            ),
        )
    for start in range(0, len(features), shape.features_per_table):
        table = make_ml_feature_table_urn("feast", f"table{start // shape.features_per_table}")
        members = features[start : start + shape.features_per_table]
        yield _mcp(table, m.MLFeatureTablePropertiesClass(mlFeatures=members))
    for i in range(shape.models):
        chosen = rng.sample(features, min(shape.features_per_model, len(features)))
        model = make_ml_model_urn("mlflow", f"model{i:05d}", "PROD")
        yield _mcp(model, m.MLModelPropertiesClass(mlFeatures=sorted(chosen), date=NOW_MS - 10**9))


def _dataset(
    shape: Shape, rng: random.Random, urn: str, index: int, upstream_layer: list[str], pii: str
) -> Iterator[dict[str, Any]]:
    fields = [
        m.SchemaFieldClass(
            fieldPath=f"c{f}",
            # The SDK's generated __init__ has no annotations.
            type=m.SchemaFieldDataTypeClass(type=m.StringTypeClass()),  # type: ignore[no-untyped-call]
            nativeDataType="string",
            globalTags=m.GlobalTagsClass(tags=[m.TagAssociationClass(pii)])
            if f == 1 and rng.random() < shape.pii
            else None,
        )
        for f in range(shape.fields)
    ]
    yield _mcp(
        urn,
        m.SchemaMetadataClass(
            schemaName=urn,
            platform="urn:li:dataPlatform:hive",
            version=0,
            hash="",
            platformSchema=m.OtherSchemaClass(rawSchema=""),
            fields=fields,
        ),
    )
    properties: dict[str, str] = {}
    if rng.random() < shape.sla:
        properties["freshness_sla_hours"] = "24"
    yield _mcp(urn, m.DatasetPropertiesClass(customProperties=properties))
    yield _mcp(
        urn,
        m.OperationClass(
            timestampMillis=NOW_MS,
            operationType=m.OperationTypeClass.UPDATE,
            lastUpdatedTimestamp=NOW_MS - rng.randrange(0, 72) * 3_600_000,
        ),
    )
    if rng.random() < shape.deprecated:
        yield _mcp(
            urn, m.DeprecationClass(deprecated=True, note="retiring", actor="urn:li:corpuser:x")
        )
    if upstream_layer:
        # Round-robin first, so every upstream dataset is used at least once, then random.
        ups = {upstream_layer[index % len(upstream_layer)]}
        while len(ups) < min(shape.fan_in, len(upstream_layer)):
            ups.add(rng.choice(upstream_layer))
        fine = []
        if rng.random() < shape.column_lineage:
            fine = [
                m.FineGrainedLineageClass(
                    upstreamType=m.FineGrainedLineageUpstreamTypeClass.FIELD_SET,
                    downstreamType=m.FineGrainedLineageDownstreamTypeClass.FIELD,
                    upstreams=[make_schema_field_urn(up, f"c{f}")],
                    downstreams=[make_schema_field_urn(urn, f"c{f}")],
                )
                for up in sorted(ups)
                for f in range(shape.fields)
            ]
        yield _mcp(
            urn,
            m.UpstreamLineageClass(
                upstreams=[
                    m.UpstreamClass(dataset=up, type=m.DatasetLineageTypeClass.TRANSFORMED)
                    for up in sorted(ups)
                ],
                fineGrainedLineages=fine or None,
            ),
        )


def _mcp(urn: str, aspect: Any) -> dict[str, Any]:
    wrapper = MetadataChangeProposalWrapper(
        entityUrn=urn,
        aspect=aspect,
        systemMetadata=m.SystemMetadataClass(lastObserved=NOW_MS - 2 * 10**9),
    )
    return wrapper.to_obj(simplified_structure=True)


def wrappers(records: Iterable[dict[str, Any]]) -> list[MetadataChangeProposalWrapper]:
    """The records as MCP wrappers, as the product's loader reads them."""
    mcps = []
    for record in records:
        mcp = MetadataChangeProposalWrapper.from_obj(record)
        # from_obj falls back to a raw proposal for an aspect the SDK does not know: here
        # that would be a generator bug.
        assert isinstance(mcp, MetadataChangeProposalWrapper), record
        mcps.append(mcp)
    return mcps


def write(shape: Shape, path: Path) -> int:
    """Write the catalog to ``path`` as one DataHub metadata file; return the record count."""
    records = list(generate(shape))
    path.write_text(json.dumps(records), encoding="utf-8")
    return len(records)


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/generate.py OUT --upstream N`` or ``--models M --shared S``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--upstream", type=int, help="one model with ~N upstream entities")
    parser.add_argument("--models", type=int)
    parser.add_argument("--shared", type=int, help="upstream entities shared by --models models")
    args = parser.parse_args(argv)
    if args.models:
        shape = Shape.estate(args.models, args.shared or 5000)
    else:
        shape = Shape.one_model(args.upstream or 100)
    print(f"{write(shape, args.out)} records written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
