"""A DataHub GMS stand-in for tests and benchmarks: GraphQL on DataHub's real SDL, the REST
endpoints acryl-datahub and mcp-server-datahub call, served from a DataHub Lite file.

It is an independent oracle of DataHub's behaviour and must not import ``mlcopilot``.
"""

from standin.faults import Fault, RecordedRequest
from standin.sdl import sdl_path
from standin.server import StandIn

__all__ = ["Fault", "RecordedRequest", "StandIn", "sdl_path"]
