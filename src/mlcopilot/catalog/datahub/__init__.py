"""The datahub: backend: DataHub GMS through the acryl-datahub SDK, and its setup and doctor."""
