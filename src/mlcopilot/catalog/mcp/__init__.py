"""The mcp: backend: DataHub through the real mcp-server-datahub process."""
