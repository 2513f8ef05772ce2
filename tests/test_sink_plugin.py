"""A third-party sink, installed as a real package, works end to end (examples/sink-plugin).

The example package is built and installed offline (``pip install --no-deps
--no-build-isolation``) into its own virtual environment, as tests/test_check_plugin.py does.
``mlcopilot`` then runs as a subprocess of that environment: nothing in this process imports
the plugin, so it is found only through its ``mlcopilot.sinks`` entry point and switched on
only by the ``[sinks.jsonl]`` section of a real configuration file. The scans are real
(a Lite catalog where two PII columns feed a model: two notification groups), and the JSONL
file they write is read as a user would.

Each event is one line, however often it is delivered: scanned again, the file is unchanged;
killed right after the sink wrote a line and before the row was marked done (the
``after_send:jsonl`` failpoint exits 137 there), the rerun hands the row to the sink again and
the plugin's own idempotency keeps it from writing the line twice.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.checks import builtin_infos
from mlcopilot.clock import SystemClock
from mlcopilot.errors import ConfigError
from mlcopilot.incidents.payload import (
    GroupSnapshot,
    GroupState,
    Member,
    Notification,
    OutboxItem,
    OutboxStatus,
    dedupe_key,
    encode_notification,
    with_infos,
)
from mlcopilot.model import Action, Severity
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.plugins import ALL_EVENTS
from mlcopilot.notify.sinks.registry import SinkContext
from testing.builders import dataset, dataset_urn, ml_model, model_urn, write_metadata_file
from testing.plugin_install import install_into_venv

# One worker runs them all: the install is made once, not once a worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sink_plugin")]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sink-plugin"
T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
MODEL = model_urn("churn")
CUSTOMERS = dataset_urn("raw.customers")
# Two PII columns, in two datasets, feeding one model: two groups (one per root cause).
PII = [
    *dataset("raw.customers", fields=[("email", "string")], field_tags={"email": ["PII"]}),
    *dataset("raw.payments", fields=[("card", "string")], field_tags={"card": ["PII"]}),
    *ml_model("churn", training_data=["raw.customers", "raw.payments"]),
]
# raw.customers' schema again, its column no longer tagged: that group resolves.
UNTAGGED = dataset("raw.customers", fields=[("email", "string")])


def _now(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


# --- the plugin's environment (as tests/test_check_plugin.py makes it)


@dataclass(frozen=True)
class Install:
    python: Path
    site: Path
    home: Path
    """An MLCOPILOT_HOME whose Lite catalog holds :data:`PII`, copied by each test."""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _run(python: Path, args: list[str], env: Mapping[str, str], cwd: Path) -> Run:
    done = subprocess.run(
        [str(python), *args],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=180,
        check=False,
        cwd=cwd,  # not the repository: nothing found by accident on sys.path
    )
    return Run(done.returncode, done.stdout, done.stderr)


def _clean_env(home: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MLCOPILOT_", "DATAHUB_"))}
    # Group wait 0: a scan delivers its "open" rows itself, not a later one.
    return environ | {"MLCOPILOT_HOME": str(home), "COLUMNS": "200", "MLCOPILOT_GROUP_WAIT": "0"}


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Install:
    tmp = tmp_path_factory.mktemp("sink-plugin")
    python, site = install_into_venv(EXAMPLE, tmp)
    # The catalog is loaded once; each test scans (and writes back to) its own copy.
    home = tmp / "home"
    metadata = write_metadata_file(tmp / "pii.json", PII)
    loaded = _run(
        python, ["-m", "mlcopilot", "catalog", "load", str(metadata)], _clean_env(home), tmp
    )
    assert loaded.code == 0, loaded.output
    return Install(python, site, home)


class Mlcopilot:
    """``python -m mlcopilot`` in the plugin's environment, with its own home and config."""

    def __init__(self, install: Install, tmp: Path) -> None:
        self.install = install
        self.tmp = tmp
        self.home = tmp / "home"
        shutil.copytree(install.home, self.home)
        self.config = tmp / "mlcopilot.toml"
        self.events = tmp / "events.jsonl"

    def configure(self, section: str) -> None:
        self.config.write_text(section, encoding="utf-8")

    def __call__(self, *args: str, **env: str) -> Run:
        environ = _clean_env(self.home) | env
        return _run(self.install.python, ["-m", "mlcopilot", *args], environ, self.tmp)

    def scan(self, minutes: int, *extra: str, **env: str) -> Run:
        """``scan`` with the configuration file, ``minutes`` after :data:`T0`."""
        return self("--config", str(self.config), "scan", "--now", _now(minutes), *extra, **env)

    def lines(self) -> list[dict[str, Any]]:
        text = self.events.read_text(encoding="utf-8")
        assert text.endswith("\n")
        return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def mlcopilot(install: Install, tmp_path: Path) -> Mlcopilot:
    return Mlcopilot(install, tmp_path)


# --- end to end


def test_the_plugin_is_installed_in_its_environment_only(install: Install) -> None:
    assert list(install.site.glob("mlcopilot_jsonl_sink-*.dist-info"))
    from importlib.metadata import entry_points

    assert "jsonl" not in {ep.name for ep in entry_points(group="mlcopilot.sinks")}


def test_each_event_is_one_line_through_a_kill_a_rescan_and_a_resolve(
    mlcopilot: Mlcopilot,
) -> None:
    mlcopilot.configure(f"[sinks.jsonl]\npath = {json.dumps(str(mlcopilot.events))}\n")

    # Killed right after the sink wrote the first "open" line, before the row was done.
    killed = mlcopilot.scan(0, MLCOPILOT_FAILPOINT="after_send:jsonl")
    assert killed.code == 137, killed.output
    (first,) = mlcopilot.lines()
    assert first["event"] == "open"

    # The rerun (past the dead process's lease) hands that row to the sink again: it finds
    # the key in the file and writes nothing, then writes the other group's "open".
    rerun = mlcopilot.scan(10)
    assert rerun.code == 0, rerun.output
    assert f"jsonl: {first['idempotency_key']} was already in {mlcopilot.events}" in rerun.output
    lines = mlcopilot.lines()
    assert lines[0] == first
    assert len(lines) == 2
    assert [line["event"] for line in lines] == ["open", "open"]
    assert len({line["group"] for line in lines}) == 2  # one "open" line per group
    # Each line is one group's event: its idempotency key, its incidents, its models.
    for line in lines:
        assert set(line) == {"idempotency_key", "event", "group", "incidents", "models"}
        assert line["idempotency_key"] == f"jsonl:{line['group']}:1:open:0"
        assert line["models"] == [MODEL]
        assert len(line["incidents"]) == 1

    # Scanned again with nothing changed: nothing new.
    again = mlcopilot.scan(20, "--format", "json")
    assert again.code == 0, again.output
    assert mlcopilot.lines() == lines
    # The lines name the incidents the scan reports, one group per dataset.
    incident = {
        f["entity"]: f["id"] for m in json.loads(again.stdout)["models"] for f in m["findings"]
    }
    assert sorted(i for line in lines for i in line["incidents"]) == sorted(incident.values())

    # raw.customers' column is untagged: its group resolves, one "resolve" line, once.
    metadata = write_metadata_file(mlcopilot.tmp / "untagged.json", UNTAGGED)
    loaded = mlcopilot("catalog", "load", str(metadata))
    assert loaded.code == 0, loaded.output
    resolved = mlcopilot.scan(30)
    assert resolved.code == 0, resolved.output
    (resolve,) = mlcopilot.lines()[2:]
    assert resolve["event"] == "resolve"
    assert resolve["incidents"] == [incident[CUSTOMERS]]
    (opened,) = [line for line in lines if line["incidents"] == [incident[CUSTOMERS]]]
    assert resolve["group"] == opened["group"]
    assert resolve["idempotency_key"] == f"jsonl:{opened['group']}:1:resolve:0"


def test_a_section_switched_off_writes_nothing(mlcopilot: Mlcopilot) -> None:
    path = json.dumps(str(mlcopilot.events))
    mlcopilot.configure(f"[sinks.jsonl]\nenabled = false\npath = {path}\n")
    done = mlcopilot.scan(0)
    assert done.code == 0, done.output
    assert "Incidents: 2 opened" in done.stdout  # there was something to tell
    assert "jsonl" not in done.output
    assert not mlcopilot.events.exists()


def test_a_section_naming_no_plugin_stops_the_command(mlcopilot: Mlcopilot) -> None:
    mlcopilot.configure('[sinks.nosuch]\nurl = "https://example.com"\n')
    done = mlcopilot.scan(0)
    assert done.code == 2, done.output  # a ConfigError's exit code
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "sinks.nosuch" in line
    assert "jsonl" in line  # the plugins that are installed


def test_a_section_without_its_path_is_an_error_naming_the_key(mlcopilot: Mlcopilot) -> None:
    mlcopilot.configure("[sinks.jsonl]\n")
    done = mlcopilot.scan(0)
    # The registry builds a plugin's sink before the scan: its ConfigError stops the command.
    assert done.code == 2, done.output
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "sinks.jsonl.path: required" in line
    assert not list(mlcopilot.tmp.glob("*.jsonl"))


# --- the plugin's class in this process (loaded from its file, never installed here)


def _example_module() -> Any:
    path = EXAMPLE / "src" / "mlcopilot_jsonl_sink" / "__init__.py"
    spec = importlib.util.spec_from_file_location("_example_jsonl_sink", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered while it runs: pydantic resolves the config's annotations through it.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


@pytest.fixture(scope="module")
def example() -> Any:
    return _example_module()


def _context(section: Mapping[str, Any]) -> SinkContext:
    return SinkContext(NotifySettings(), SystemClock(), section=section)


def _row(group: str, action: Action = "open", row_id: int = 1) -> OutboxItem:
    """An outbox row as the store holds it, for group ``group`` of raw.customers."""
    member = Member(
        incident_id=f"i-{group}",
        generation=1,
        check="pii_exposure",
        severity=Severity.HIGH,
        model=MODEL,
        entity=CUSTOMERS,
        field="email",
        change=None,
        previous_field=None,
        message="column `email` is tagged PII and feeds the model",
        path=(MODEL, CUSTOMERS),
        open=action != "resolve",
    )
    state = GroupState.RESOLVED if action == "resolve" else GroupState.OPEN
    snapshot = GroupSnapshot(group, 1, "pii_exposure", CUSTOMERS, state, T0, (member,))
    notification = Notification(action, 0, snapshot)
    payload = with_infos(encode_notification(notification), builtin_infos())
    return OutboxItem(
        id=row_id,
        sink="jsonl",
        action=action,
        group_key=group,
        group_generation=1,
        seq=0,
        dedupe_key=dedupe_key("jsonl", group, 1, action, 0),
        payload=payload,
        status=OutboxStatus.SENDING,
        attempts=0,
        created_at=T0,
        not_before=T0,
        next_attempt_at=T0,
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({}, "sinks.jsonl.path: required"),
        ({"path": "  "}, "sinks.jsonl.path: String should have at least 1 character"),
        ({"path": 3}, "sinks.jsonl.path: Input should be a valid string"),
        ({"path": "x.jsonl", "paht": "y"}, "sinks.jsonl.paht: unknown key"),
    ],
)
def test_a_bad_section_is_a_config_error_naming_the_key(
    example: Any, section: Mapping[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        example.JsonlSink.from_context(_context(section))


def test_two_writers_racing_on_one_file_write_each_event_once(example: Any, tmp_path: Path) -> None:
    # Two sinks, each with its own index, stand for two processes (two scanners, a scan and
    # `outbox deliver`) delivering the same rows at once: the file lock makes each "look,
    # then append" one step, so no key is written twice.
    path = tmp_path / "events.jsonl"
    rows = [_row(f"g{n}", row_id=n) for n in range(200)]
    sinks = [example.JsonlSink.from_context(_context({"path": str(path)})) for _ in range(2)]
    start = threading.Barrier(len(sinks))
    warnings: list[list[str | None]] = [[] for _ in sinks]

    def deliver(n: int) -> None:
        start.wait()
        warnings[n] = [sinks[n].deliver(row, None).warning for row in rows]

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(len(sinks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    keys = [json.loads(line)["idempotency_key"] for line in path.read_text().splitlines()]
    assert sorted(keys) == sorted(row.dedupe_key for row in rows)
    # Each row was written by one of them; the other found it there.
    skipped = sum(w is not None for ws in warnings for w in ws)
    assert skipped == len(rows)


def test_a_line_cut_short_by_a_crash_is_ignored_and_the_event_written_whole(
    example: Any, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    row = _row("g1")
    whole = json.dumps(
        {
            "idempotency_key": row.dedupe_key,
            "event": "open",
            "group": "g1",
            "incidents": ["i-g1"],
            "models": [MODEL],
        }
    )
    path.write_text(whole[:40], encoding="utf-8")  # a writer died mid-line
    sink = example.JsonlSink.from_context(_context({"path": str(path)}))
    assert sink.deliver(row, None).warning is None
    assert path.read_text(encoding="utf-8") == whole[:40] + "\n" + whole + "\n"
    # Delivered again (the relay retrying after a crash): the key is there, nothing written.
    assert "was already in" in sink.deliver(row, None).warning
    again = example.JsonlSink.from_context(_context({"path": str(path)}))  # a new process
    assert "was already in" in again.deliver(row, None).warning
    assert path.read_text(encoding="utf-8") == whole[:40] + "\n" + whole + "\n"


def test_a_file_that_cannot_be_opened_is_a_permanent_error(example: Any, tmp_path: Path) -> None:
    from mlcopilot.incidents.payload import DeliveryError

    sink = example.JsonlSink.from_context(_context({"path": str(tmp_path / "no" / "x.jsonl")}))
    with pytest.raises(DeliveryError, match="cannot open") as raised:
        sink.deliver(_row("g1"), None)
    assert raised.value.permanent


# --- the README's snippets are the example package's truth


def test_the_readmes_snippets_are_the_example_package(example: Any) -> None:
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", text, flags=re.S)]
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))
    entry_points = project["project"]["entry-points"]
    assert {"project": {"entry-points": entry_points}} in blocks
    (name, target) = next(iter(entry_points["mlcopilot.sinks"].items()))
    assert target == "mlcopilot_jsonl_sink:JsonlSink"
    assert example.JsonlSink.name == name
    assert example.JsonlSink.events == ALL_EVENTS  # every transition, as the README says
    (section,) = [b["sinks"][name] for b in blocks if "sinks" in b]
    section.pop("enabled", None)
    example.JsonlSink.from_context(_context(section))
    # The sample line is what the sink writes: the same keys.
    (sample,) = re.findall(r"```json\n(.*?)\n```", text, flags=re.S)
    assert list(json.loads(sample)) == ["idempotency_key", "event", "group", "incidents", "models"]
