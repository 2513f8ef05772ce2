"""The DataHub Actions pipeline ``mlcopilot watch`` runs, as a config dict, from the settings.

The same dict is what ``mlcopilot watch --print-config`` prints as YAML, for running the action
under DataHub's own ``datahub actions -c FILE`` instead. It follows DataHub's conventions:

- the Kafka source reads ``watch.bootstrap`` (``KAFKA_BOOTSTRAP_SERVER``),
  ``watch.schema_registry_url`` (``SCHEMA_REGISTRY_URL``) and the three topic names with
  DataHub's defaults; ``KAFKA_PROPERTIES_*`` variables (SASL, TLS) are read by the Kafka source
  itself from its environment, so no secret is ever written into the config;
- the pipeline name is the Kafka consumer group (``watch.group``, default ``mlcopilot-watch``):
  watchers that share it split the partitions; a new group starts at ``watch.offset_reset``
  (``latest``), a known one at its committed offsets;
- an event's offset is stored once its rescan requests are, and stored offsets are committed
  every second and when the watcher stops (the Kafka source's asynchronous commit,
  :data:`COMMIT_INTERVAL_MS`): a watcher killed outright hears at most its last second of
  events again, and those coalesce into rescans that find nothing new;
- an event the action cannot read (a poison event) is written to
  ``<failed_events_dir>/<group>/failed_events.log`` and skipped (``failure_mode: CONTINUE``):
  the action raises only for those, and retries the state database itself.

This module imports no DataHub Actions code: the config is plain data.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final

from mlcopilot import redact
from mlcopilot.errors import ConfigError
from mlcopilot.settings import Settings, format_duration

ACTION_TYPE: Final = "mlcopilot"
"""The action's name in the ``datahub_actions.action.plugins`` entry point group."""

ENTITY_CHANGE_CATEGORIES: Final = (
    "TECHNICAL_SCHEMA",
    "TAG",
    "GLOSSARY_TERM",
    "DEPRECATION",
    "LIFECYCLE",
    "STRUCTURED_PROPERTY",
    "RUN",
)
"""Kept equal to :data:`mlcopilot.watch.events.ENTITY_CHANGE_CATEGORIES` (a test holds them)."""


def pipeline_config(
    settings: Settings,
    *,
    models: Sequence[str] = (),
    rescan_interval: timedelta | None = None,
    for_display: bool = False,
    change_log_aspects: Sequence[str] = (),
    lease: timedelta | None = None,
) -> dict[str, Any]:
    """The pipeline config dict for ``settings``.

    Args:
        settings: Where the watcher reads and records (catalog, state) and listens.
        models: Only these models are watched (default: every model in the catalog).
        rescan_interval: Overrides ``watch.rescan_interval``.
        for_display: For ``--print-config``: a state database URL with a password is written
            as ``${MLCOPILOT_STATE_URL}`` (DataHub's CLI expands it from the environment).
        change_log_aspects: The change-log aspects the filter passes
            (:data:`mlcopilot.watch.events.CHANGE_LOG_ASPECTS`).
        lease: How long a claimed rescan outlives its watcher's last renewal (default: the
            worker's 15 minutes).
    """
    watch = settings.watch
    interval = watch.rescan_interval if rescan_interval is None else rescan_interval
    action: dict[str, Any] = {"rescan_interval": format_duration(interval)}
    if settings.file is not None:
        action["config"] = str(settings.file)
    action["catalog"] = settings.catalog_spec
    if settings.state_url is not None:
        shown = redact.redact(settings.state_url)
        action["state_url"] = (
            "${MLCOPILOT_STATE_URL}"
            if for_display and shown != settings.state_url
            else settings.state_url
        )
    if models:
        action["models"] = list(models)
    if lease is not None:
        action["lease"] = format_duration(lease)
    config: dict[str, Any] = {
        "name": watch.group,
        "source": _source(settings),
        "filters": [_filter(change_log_aspects)],
        "action": {"type": ACTION_TYPE, "config": action},
        "options": {
            "retry_count": 0,
            "failure_mode": "CONTINUE",
            "failed_events_dir": str(settings.failed_events_path),
        },
    }
    if watch.source == "datahub-cloud":
        config["datahub"] = _datahub(settings, for_display=for_display)
    return config


def _source(settings: Settings) -> dict[str, Any]:
    watch = settings.watch
    if watch.source == "datahub-cloud":
        # DataHub Cloud's events API: one consumer per name (no scale-out), offsets kept
        # server-side under the consumer id.
        return {
            "type": "datahub-cloud",
            "config": {"topics": ["PlatformEvent_v1"], "consumer_id": watch.group},
        }
    return {
        "type": "kafka",
        "config": {
            "connection": {
                "bootstrap": watch.bootstrap,
                "schema_registry_url": watch.schema_registry_url,
                "consumer_config": _consumer_config(settings),
            },
            "topic_routes": {
                "pe": watch.platform_event_topic,
                "mcl": watch.mcl_topic,
                "mcl_timeseries": watch.mcl_timeseries_topic,
            },
            "async_commit_enabled": True,
            "async_commit_interval": COMMIT_INTERVAL_MS,
        },
    }


COMMIT_INTERVAL_MS: Final = 1_000
"""How often the consumer commits the offsets of the events it has handled. Committed after
each event instead (a broker round trip per event, on the consumer's thread), one watcher fell
behind at 100 events/s; a second's events heard twice after a crash only ask again for rescans
already asked for."""


MAX_POLL_INTERVAL_MS: Final = 300_000
"""How long one event may take in ``act()`` before Kafka drops the consumer from its group:
Kafka's own default, not the Kafka source's 10 s. ``act()`` waits for the state database
(retried with backoff, the event unacked): a SQLite database busy with a scan's commit, a
PostgreSQL failover. Past 10 s the group would rebalance and the pending commit fail, for a
wait the consumer is allowed to ride out. A dead watcher is still noticed by the session
timeout (heartbeats run apart from ``act()``)."""


def _consumer_config(settings: Settings) -> dict[str, Any]:
    config: dict[str, Any] = {"auto.offset.reset": settings.watch.offset_reset}
    # The config wins over KAFKA_PROPERTIES_* in the Kafka source: set only what they do not.
    if not os.environ.get("KAFKA_PROPERTIES_MAX_POLL_INTERVAL_MS"):
        config["max.poll.interval.ms"] = str(MAX_POLL_INTERVAL_MS)
    return config


def _filter(aspects: Sequence[str]) -> dict[str, Any]:
    # Change logs are dropped by aspect name before they are deserialized (the Kafka
    # source's pre-deserialization filter), which is most of DataHub's traffic.
    return {
        "type": "event_type",
        "config": {
            "filter": {
                "EntityChangeEvent_v1": {
                    "event": [{"category": category} for category in ENTITY_CHANGE_CATEGORIES]
                },
                "MetadataChangeLogEvent_v1": {
                    "event": [{"aspectName": aspect} for aspect in sorted(aspects)]
                },
                "RelationshipChangeEvent_v1": None,
            }
        },
    }


def check_cloud_settings(settings: Settings) -> None:
    """For ``watch.source = datahub-cloud``: the server and token the events API needs.

    DataHub Actions would otherwise be handed the placeholders ``--print-config`` writes
    (``${DATAHUB_GMS_URL}``) and fail deep inside with a traceback.

    Raises:
        ConfigError: No GMS URL or no token is configured, or the URL is not one; one
            sentence saying what to set.
    """
    source = settings.name_of("watch.source")
    datahub = settings.datahub
    if not datahub.gms_url:
        raise ConfigError(
            f"watch.source = datahub-cloud ({source}) reads DataHub Cloud's events API, and "
            "no server is configured: set DATAHUB_GMS_URL (e.g. "
            "https://your-account.acryl.io/gms) and DATAHUB_GMS_TOKEN"
        )
    if datahub.token is None:
        raise ConfigError(
            f"watch.source = datahub-cloud ({source}) needs a token for DataHub Cloud's events "
            "API: set DATAHUB_GMS_TOKEN (or DATAHUB_GMS_TOKEN_FILE)"
        )
    from mlcopilot.catalog.datahub.connection import normalize_url

    normalize_url(datahub.gms_url)  # http(s), a host, no query string: one error line


def _datahub(settings: Settings, *, for_display: bool) -> dict[str, Any]:
    server = settings.datahub.gms_url or "${DATAHUB_GMS_URL}"
    token = settings.datahub.token
    if for_display or token is None:
        return {"server": server, "token": "${DATAHUB_GMS_TOKEN}"}
    return {"server": server, "token": token.get_secret_value()}


def render_yaml(config: dict[str, Any]) -> str:
    """``config`` as the YAML file ``datahub actions -c`` reads, with a header saying so."""
    import yaml  # PyYAML comes with acryl-datahub

    header = (
        "# mlcopilot watch: a DataHub Actions pipeline. Run it with `mlcopilot watch` or\n"
        "# `datahub actions -c THIS_FILE` (with ml-incident-copilot[watch] installed).\n"
        "# Kafka client settings (SASL, TLS) come from KAFKA_PROPERTIES_* variables.\n"
    )
    body: str = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    return header + body
