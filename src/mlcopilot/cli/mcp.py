"""``mlcopilot mcp``: serve mlcopilot's tools to agents over MCP (stdio or streamable HTTP).

The server reads the same settings as every other command (``--config``, the catalog, the
state database, ``[checks.*]``, the notification sinks) and opens the catalog and the store
on each tool call. Over stdio, stdout is the protocol: everything else goes to stderr.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from mlcopilot.cli._app import CatalogOption, StateOption, app, command_settings, err


class Transport(StrEnum):
    """How clients reach the server."""

    stdio = "stdio"
    streamable_http = "streamable-http"


@app.command("mcp")
def mcp_command(
    transport: Annotated[
        Transport,
        typer.Option(
            help="stdio: the client starts this command (Claude Desktop, IDEs); "
            "streamable-http: a server on --host:--port at /mcp, clients send "
            "Authorization: Bearer $MLCOPILOT_MCP_TOKEN."
        ),
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="Address to listen on (streamable-http).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(min=1, max=65535, help="Port to listen on (streamable-http).")
    ] = 8765,
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes",
            help="Let agents write: scan_model(write=true) records its scan, and the "
            "acknowledge_incident tool exists. Without it every tool only reads.",
        ),
    ] = False,
    now: Annotated[
        str | None,
        typer.Option(
            help="A fixed clock for scans and acknowledgements, ISO-8601 (default: the real time).",
            show_default=False,
        ),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Serve mlcopilot to agents over MCP: scans, incidents and their documents."""
    from mlcopilot.agent.http import listen, serve_http, token_from_environment
    from mlcopilot.agent.server import build_server
    from mlcopilot.cli.scan_guard import scan_clock

    # Everything that can be refused is refused before the server starts.
    token = token_from_environment() if transport is Transport.streamable_http else None
    fixed = scan_clock(now) if now is not None else None
    settings = command_settings(catalog, state_url)
    server = build_server(
        settings,
        allow_writes=allow_writes,
        clock=(lambda: fixed) if fixed is not None else None,
        host=host,
        port=port,
    )
    if token is None:
        server.run("stdio")
        return
    sock = listen(host, port)  # a port in use is one error line, before any banner
    err.print(
        f"mlcopilot MCP server on http://{host}:{port}/mcp (streamable HTTP, bearer token "
        f"required{'; writes allowed' if allow_writes else ', read-only'})"
    )
    serve_http(server, sock=sock, token=token)
