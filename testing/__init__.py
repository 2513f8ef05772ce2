"""Shared test infrastructure (dev-only, never shipped): the GitHub and Slack fakes, metadata
builders and the notification world, used by tests/ and benchmarks/."""
