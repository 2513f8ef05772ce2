"""``python -m mlcopilot``."""

from mlcopilot.cli import main

main()
