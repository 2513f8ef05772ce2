"""Tests of mlcopilot.notify."""
