"""GitHub's documented rules for a SARIF file its code scanning shows, beyond the OASIS schema.

From "SARIF support for code scanning" (docs.github.com, code-security/reference/code-scanning/
sarif-files/sarif-support-for-code-scanning) and its limits table:

- ``$schema``, ``version`` 2.1.0 and ``runs`` are required; at most 20 runs;
- a run needs ``tool.driver.name`` and ``results``; at most 25,000 results and 25,000 rules;
- a rule needs ``id``, ``shortDescription.text`` and ``fullDescription.text`` (at most 1,024
  characters each) and ``help.text``; ``name`` at most 255 characters; at most 20 tags;
- a result needs ``message.text``, a ``ruleId`` of the run's rules (the same across
  analyses), a ``level`` among ``none``, ``note``, ``warning``, ``error`` when given,
  ``locations`` (at least one: "At least one location is required for code scanning to
  display a result"; at most 1,000), and ``partialFingerprints`` (code scanning "only uses
  the ``primaryLocationLineHash``");
- a location needs ``physicalLocation`` with ``artifactLocation.uri`` ("a relative path from
  the root of the GitHub repository", or an absolute ``file:`` URI, the scheme of the source
  root ``upload-sarif`` gives) and the region's ``startLine`` (≥ 1; its columns ≥ 1 and its
  end not before its start);
- "The empty string is not supported for required properties".
"""

from __future__ import annotations

import re
from typing import Any

LEVELS = ("none", "note", "warning", "error")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def github_problems(log: Any) -> list[str]:
    """Every way ``log`` breaks GitHub's rules, one line each (empty: none)."""
    problems: list[str] = []
    if not _text(log, "$schema"):
        problems.append("$schema: required")
    if log.get("version") != "2.1.0":
        problems.append("version: must be 2.1.0")
    runs = log.get("runs")
    if not isinstance(runs, list) or not runs or len(runs) > 20:
        return [*problems, "runs: 1 to 20 required"]
    for r, run in enumerate(runs):
        problems += _run_problems(f"runs[{r}]", run)
    return problems


def _run_problems(where: str, run: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    driver = run.get("tool", {}).get("driver", {})
    if not _text(driver, "name"):
        problems.append(f"{where}.tool.driver.name: required")
    rules = driver.get("rules", [])
    if len(rules) > 25_000:
        problems.append(f"{where}: more than 25,000 rules")
    ids = set()
    for i, rule in enumerate(rules):
        at = f"{where}.tool.driver.rules[{i}]"
        ids.add(rule.get("id"))
        if not _text(rule, "id"):
            problems.append(f"{at}.id: required")
        for key in ("shortDescription", "fullDescription"):
            text = rule.get(key, {}).get("text")
            if not isinstance(text, str) or not text or len(text) > 1024:
                problems.append(f"{at}.{key}.text: required, at most 1,024 characters")
        if not _text(rule.get("help", {}), "text"):
            problems.append(f"{at}.help.text: required")
        if len(str(rule.get("name", ""))) > 255:
            problems.append(f"{at}.name: at most 255 characters")
        if len(rule.get("properties", {}).get("tags", [])) > 20:
            problems.append(f"{at}.properties.tags: at most 20")
    results = run.get("results")
    if not isinstance(results, list):
        return [*problems, f"{where}.results: required"]
    if len(results) > 25_000:
        problems.append(f"{where}: more than 25,000 results")
    for i, result in enumerate(results):
        problems += _result_problems(f"{where}.results[{i}]", result, ids)
    return problems


def _result_problems(where: str, result: dict[str, Any], rule_ids: set[Any]) -> list[str]:
    problems: list[str] = []
    if not _text(result.get("message", {}), "text"):
        problems.append(f"{where}.message.text: required")
    if not _text(result, "ruleId") or result["ruleId"] not in rule_ids:
        problems.append(f"{where}.ruleId: one of the run's rules")
    if "level" in result and result["level"] not in LEVELS:
        problems.append(f"{where}.level: one of {', '.join(LEVELS)}")
    locations = result.get("locations")
    if not isinstance(locations, list) or not 1 <= len(locations) <= 1000:
        problems.append(f"{where}.locations: 1 to 1,000 required")
    else:
        problems += _location_problems(f"{where}.locations[0]", locations[0])
    if not _text(result.get("partialFingerprints", {}), "primaryLocationLineHash"):
        problems.append(f"{where}.partialFingerprints.primaryLocationLineHash: required")
    return problems


def _location_problems(where: str, location: dict[str, Any]) -> list[str]:
    physical = location.get("physicalLocation")
    if not isinstance(physical, dict):
        return [f"{where}.physicalLocation: required"]
    problems: list[str] = []
    uri = physical.get("artifactLocation", {}).get("uri")
    if not isinstance(uri, str) or not uri:
        problems.append(f"{where}.physicalLocation.artifactLocation.uri: required")
    elif _SCHEME.match(uri):
        if not uri.startswith("file:///"):
            problems.append(f"{where}: an absolute uri must be file: (the source root's scheme)")
    elif uri.startswith("/") or "\\" in uri or ".." in uri.split("/"):
        problems.append(f"{where}: a relative uri is a path from the repository's root: {uri}")
    region = physical.get("region", {})
    start = region.get("startLine")
    if not isinstance(start, int) or start < 1:
        problems.append(f"{where}.physicalLocation.region.startLine: required, at least 1")
        return problems
    end = region.get("endLine", start)
    first, last = region.get("startColumn", 1), region.get("endColumn", 2)
    if end < start or first < 1 or (end == start and last < first):
        problems.append(f"{where}.physicalLocation.region: the end is before the start")
    return problems


def _text(mapping: Any, key: str) -> bool:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return isinstance(value, str) and bool(value.strip())
