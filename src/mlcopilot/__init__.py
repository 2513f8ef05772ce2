"""ML Incident Copilot: watches what feeds your ML models in DataHub."""
