"""A world for notification tests: a real Lite catalog, a real store, fake GitHub and Slack.

Findings are scripted through real check plugins (the ``Check`` extension point), so every
scan goes the product's whole way — acknowledgements read back, reconcile, one transaction
with the outbox, the relay, the sinks over HTTP — and the test decides what each scan finds.
Time is a :class:`FakeClock`: ``sleep`` moves it, nothing waits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import builtin_infos
from mlcopilot.config import PluginConfig
from mlcopilot.model import CheckInfo, CheckOutcome, Node, Severity
from mlcopilot.notify.relay import RetryPolicy
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.protocols import CheckContext
from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.scan.delivery import scan_delivery
from mlcopilot.store import SqlStore, open_store
from testing.builders import dataset, ds, ml_model, model_urn
from testing.fakes.github import TOKEN as GH_TOKEN
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import TOKEN as SLACK_TOKEN
from testing.fakes.slack import FakeSlack

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class FakeClock:
    """Time that moves only when told to, or when someone sleeps."""

    def __init__(self, start: datetime = T0) -> None:
        self.current = start
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self.current

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.current += timedelta(seconds=max(0.0, seconds))

    def advance(self, delta: timedelta) -> None:
        self.current += delta


Script = dict[str, dict[str, list[tuple[str | None, Severity, str | None]]]]
"""check name -> entity urn -> [(field, severity, change)]."""


def scripted_checks(script: Script) -> list[Any]:
    """One real check plugin per risk kind, finding what ``script`` says at each entity."""
    checks = []
    for name in ("schema_drift", "pii_exposure", "stale_source", "deprecated_source"):

        class Scripted:
            config_model: ClassVar[type[PluginConfig]] = PluginConfig
            info: ClassVar[CheckInfo] = builtin_infos()[name]
            check_name = name

            def __init__(self, config: Any = None) -> None:
                self.name = self.check_name

            def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
                found = script.get(self.name, {}).get(node.urn, [])
                return CheckOutcome(
                    findings=tuple(
                        ctx.finding(
                            self.name,
                            severity,
                            node,
                            field,
                            f"{self.name} at {field or node.name}",
                            change=change,
                        )
                        for field, severity, change in found
                    )
                )

        checks.append(Scripted())
    return checks


def build_catalog(path: Path, models: Mapping[str, Sequence[str]], fields: Sequence[str]) -> None:
    """A Lite catalog: each model trained on its datasets, each dataset with ``fields``."""
    names = sorted({d for ds_names in models.values() for d in ds_names})
    with LiteCatalog(path, create=True) as catalog:
        mcps = []
        for name in names:
            mcps += dataset(name, fields=[(f, "string") for f in fields])
        for model, datasets in models.items():
            mcps += ml_model(model, training_data=list(datasets))
        catalog.ingest(mcps)


def notify_env(
    github: FakeGitHub | None = None,
    slack: FakeSlack | None = None,
    *,
    webhook: bool = False,
    **extra: str,
) -> dict[str, str]:
    """The environment that points mlcopilot's sinks at the fakes (loopback allowed)."""
    env = {
        "MLCOPILOT_ALLOW_LOCAL_SINKS": "1",
        "MLCOPILOT_DATAHUB_URL": "https://datahub.example.com",
    }
    if github is not None:
        env |= {
            "MLCOPILOT_GITHUB_REPO": "acme/ml-alerts",
            "GITHUB_TOKEN": github.token,
            "MLCOPILOT_GITHUB_API_URL": github.url,
        }
    if slack is not None and webhook:
        env |= {"SLACK_WEBHOOK_URL": slack.webhook_url, "MLCOPILOT_SLACK_API_URL": slack.api_url}
    elif slack is not None:
        env |= {
            "SLACK_BOT_TOKEN": slack.token,
            "MLCOPILOT_SLACK_CHANNEL": "#ml-alerts",
            "MLCOPILOT_SLACK_API_URL": slack.api_url,
        }
    return env | extra


@dataclass
class World:
    """Catalog, store, fakes and clock; :meth:`scan` runs one whole scan."""

    catalog_path: Path
    state_url: str
    github: FakeGitHub
    slack: FakeSlack
    clock: FakeClock
    script: Script = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def settings(self) -> NotifySettings:
        return NotifySettings.from_env(self.env)

    def delivery(self, catalog: LiteCatalog, **overrides: Any) -> Delivery:
        base = scan_delivery(self.settings(), catalog, self.clock)
        retry = RetryPolicy(base=timedelta(seconds=10), cap=timedelta(minutes=5))
        fields = {"retry": retry, **overrides}
        return Delivery(
            sinks=fields.get("sinks", base.sinks),
            policy=fields.get("policy", base.policy),
            ack_sources=fields.get("ack_sources", base.ack_sources),
            clock=self.clock,
            retry=fields["retry"],
            failpoint=fields.get("failpoint", base.failpoint),
            deliver=fields.get("deliver", True),
            report_url=fields.get("report_url", base.report_url),
            routing=fields.get("routing", base.routing),
            acknowledging=fields.get("acknowledging", base.acknowledging),
        )

    def scan(
        self,
        store: SqlStore | None = None,
        *,
        report_targets: bool = True,
        models: Sequence[str] = (),
        **overrides: Any,
    ) -> ScanResult:
        """Scan every model, or the ``models`` named (urns), and deliver."""
        with ExitStack() as stack:
            catalog = stack.enter_context(LiteCatalog(self.catalog_path))
            if store is None:
                store = stack.enter_context(open_store(self.state_url))
            return scan(
                catalog,
                store,
                scripted_checks(self.script),
                ScanOptions(
                    now=self.clock.now(), models=tuple(models), report_targets=report_targets
                ),
                delivery=self.delivery(catalog, **overrides),
            )

    def store(self) -> SqlStore:
        return open_store(self.state_url)


@contextmanager
def world(
    tmp_path: Path,
    *,
    models: Mapping[str, Sequence[str]] | None = None,
    fields: Sequence[str] = ("a", "b", "c"),
    state_url: str | None = None,
    webhook: bool = False,
    github: FakeGitHub | None = None,
    slack: FakeSlack | None = None,
    **env: str,
) -> Iterator[World]:
    models = models or {"churn": ["raw.customers"]}
    path = tmp_path / "catalog.db"
    build_catalog(path, models, fields)
    github, slack = github or FakeGitHub(), slack or FakeSlack()
    clock = FakeClock()
    if slack.clock is None:
        slack.clock = clock  # Slack's timestamps and the outbox rows' times on one timeline
    with github.running(), slack.running():
        yield World(
            catalog_path=path,
            state_url=state_url or f"sqlite:///{tmp_path / 'state.db'}",
            github=github,
            slack=slack,
            clock=clock,
            env=notify_env(github, slack, webhook=webhook, **env),
        )


MODEL = model_urn("churn")
CUSTOMERS = ds("raw.customers")
__all__ = [
    "CUSTOMERS",
    "GH_TOKEN",
    "MODEL",
    "SLACK_TOKEN",
    "T0",
    "FakeClock",
    "World",
    "os",
    "world",
]
