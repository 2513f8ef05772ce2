"""``mlcopilot mcp``: the product as an MCP server other agents call.

:mod:`mlcopilot.agent.server` builds the FastMCP app (tools and the incident resource) over
the library; :mod:`mlcopilot.agent.results` holds the structured answers (their JSON Schema is
each tool's ``outputSchema``); :mod:`mlcopilot.agent.http` serves it over streamable HTTP
behind a bearer token. The official ``mcp`` SDK (1.x) is imported here and in ``catalog/``
only.
"""
