"""Fixtures of the cli tests: the demo's catalog loaded once per module, a copy per test."""

from __future__ import annotations

from testing.demo_home import demo, demo_home

__all__ = ["demo", "demo_home"]
