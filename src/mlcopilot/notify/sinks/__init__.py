"""Where notifications go: GitHub issues, Slack threads, the DataHub write-back."""
