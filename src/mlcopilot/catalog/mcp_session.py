"""``mcp-server-datahub`` over stdio, behind a synchronous, bounded facade.

The official ``mcp`` client is asynchronous; the rest of mlcopilot is not. :class:`McpSession`
runs the client in a background thread with its own event loop, started on first use. The
server process lives inside one long-running task (the stdio transport and the client session
are context managers that must be entered and left in the same task), so :meth:`close` asks
that task to leave them, which closes the server's stdin, waits for it to exit and terminates
it if it does not: no zombie processes.

Every wait is bounded: the start-up (the server retries GMS's ``/config`` for about 30 s
before it gives up and exits), each tool call, and the shutdown. Whatever goes wrong becomes
one line — :class:`~mlcopilot.errors.CatalogUnavailable` when the server cannot be started,
exits or does not answer in time, :class:`~mlcopilot.errors.CatalogError` when a tool reports
an error — with the server's last log line when that says why, and never the token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TextIO, TypeVar, cast

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent

from mlcopilot.errors import CatalogError, CatalogUnavailable
from mlcopilot.redact import redact

log = logging.getLogger(__name__)

_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b[^:]*: ")
_ERROR_LOG_LINE = re.compile(r"\| (ERROR|CRITICAL) +\||\b(ERROR|CRITICAL):")

DEFAULT_STARTUP_TIMEOUT = 20.0
"""Seconds to wait for the server to start and list its tools."""
DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds to wait for one tool call (one call may make several requests to GMS)."""
SHUTDOWN_GRACE = 6.0
"""Seconds :meth:`McpSession.close` waits: the client's own 2 s for the server to exit after
its stdin closes, then its SIGTERM/SIGKILL escalation."""

_T = TypeVar("_T")


class McpSession:
    """One ``mcp-server-datahub`` process and the MCP client session talking to it.

    Construction does nothing; the first :meth:`call` (or :meth:`start`) spawns the server.
    Thread-safe: calls from several threads run concurrently in the session's loop.

    Args:
        command: The server executable and its arguments.
        env: The server's environment on top of the MCP client's safe defaults (``HOME``,
            ``PATH``, ...); nothing else from this process's environment reaches it.
        label: What error messages call the server, e.g. ``mcp-server-datahub for
            http://localhost:8080``.
        secrets: Values that must never appear in a message (the token).
        startup_timeout: Seconds to wait for the server to start.
        call_timeout: Seconds to wait for each tool call unless a call says otherwise.
        concurrency: Tool calls :meth:`call_all` keeps in flight at once.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        *,
        label: str,
        secrets: Sequence[str] = (),
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        concurrency: int = 4,
    ) -> None:
        if not command:
            raise ValueError("command must name the server executable")
        self._command = list(command)
        self._env = dict(env)
        self._label = label
        self._secrets = [s for s in secrets if s]
        self._startup_timeout = startup_timeout
        self._call_timeout = call_timeout
        self._concurrency = max(1, concurrency)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._serving: concurrent.futures.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._tools: frozenset[str] = frozenset()
        self._failure: CatalogError | None = None
        self._errlog: TextIO | None = None
        self._closed = False
        self.calls = 0
        """Tool calls made so far (for request budgets)."""

    @property
    def label(self) -> str:
        """What messages call this server."""
        return self._label

    def tools(self) -> frozenset[str]:
        """The names of the tools the server offers (starts it if needed)."""
        self.start()
        return self._tools

    def start(self) -> None:
        """Spawn the server and open the session, unless that is done already.

        Raises:
            CatalogUnavailable: the executable cannot be run, the server exits during start-up
                or does not finish starting within the start-up timeout (it is then stopped).
        """
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._closed:
                raise CatalogUnavailable(f"{self._label}: the session is closed")
            if self._session is not None:
                return
            try:
                self._tools = self._spawn()
            except CatalogError as exc:
                self._failure = exc
                raise

    def call(self, tool: str, arguments: Mapping[str, Any], *, timeout: float | None = None) -> Any:
        """Call one tool; return its structured result (a dict, or a list for list tools).

        Raises:
            CatalogUnavailable: the server has exited or did not answer within the timeout.
            CatalogError: the tool reported an error (the message says which tool and why).
        """
        return self.call_all([(tool, arguments)], timeout=timeout)[0]

    def call_all(
        self,
        calls: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        timeout: float | None = None,
    ) -> list[Any]:
        """Call several tools concurrently (at most ``concurrency`` at once); results in order.

        The first failure is raised once every call has finished or timed out.
        """
        if not calls:
            return []
        self.start()
        limit = self._call_timeout if timeout is None else timeout
        self.calls += len(calls)

        async def run_all() -> list[Any]:
            gate = asyncio.Semaphore(self._concurrency)

            async def one(tool: str, arguments: Mapping[str, Any]) -> Any:
                async with gate:
                    return await self._call(tool, dict(arguments), limit)

            results = await asyncio.gather(*(one(t, a) for t, a in calls), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            return list(results)

        waves = -(-len(calls) // self._concurrency)
        return self._run(run_all, limit * waves + SHUTDOWN_GRACE)

    def close(self) -> None:
        """Stop the server and the loop thread; safe to call more than once."""
        with self._lock:
            self._closed = True
            self._shutdown()

    # --- the event loop thread -----------------------------------------------------------

    def _spawn(self) -> frozenset[str]:
        # Closed in _shutdown: it outlives this call, for the server's last words.
        self._errlog = cast(
            TextIO,
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"),  # noqa: SIM115
        )
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="mlcopilot-mcp", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        ready: concurrent.futures.Future[frozenset[str]] = concurrent.futures.Future()
        self._serving = asyncio.run_coroutine_threadsafe(self._serve(ready), loop)
        waiting: list[concurrent.futures.Future[Any]] = [ready, self._serving]
        done, _ = concurrent.futures.wait(
            waiting,
            timeout=self._startup_timeout + SHUTDOWN_GRACE,
            return_when=concurrent.futures.FIRST_COMPLETED,
        )
        if ready in done and ready.exception() is None:
            return ready.result()
        failure = self._startup_failure(ready, self._serving)
        self._shutdown()
        raise failure

    async def _serve(self, ready: concurrent.futures.Future[frozenset[str]]) -> None:
        """Own the server process: start it, hand out the session, wait for :meth:`close`."""
        self._stop = asyncio.Event()
        params = StdioServerParameters(
            command=self._command[0], args=self._command[1:], env=self._env
        )
        try:
            assert self._errlog is not None
            async with (
                stdio_client(params, errlog=self._errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                # Inside the transport, so a timeout still shuts the process down cleanly.
                with anyio.fail_after(self._startup_timeout):
                    await session.initialize()
                    listed = await session.list_tools()
                self._session = session
                ready.set_result(frozenset(tool.name for tool in listed.tools))
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise
        finally:
            self._session = None

    def _run(self, make: Callable[[], Coroutine[Any, Any, _T]], timeout: float) -> _T:
        """Run a coroutine in the session's loop and wait for it, at most ``timeout``."""
        loop = self._loop
        if loop is None or self._session is None:
            raise self._exited()
        future = asyncio.run_coroutine_threadsafe(make(), loop)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise CatalogUnavailable(f"{self._label} did not answer within {timeout:g}s") from exc

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        session = self._session
        if session is None:
            raise self._exited()
        try:
            with anyio.fail_after(timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError as exc:
            raise CatalogUnavailable(
                f"{self._label}: {tool} did not answer within {timeout:g}s"
            ) from exc
        except (McpError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            if (self._serving is not None and self._serving.done()) or _closed(exc):
                raise self._exited() from exc
            raise CatalogError(f"{self._label}: {tool} failed: {self._clean(str(exc))}") from exc
        return self._decode(tool, result)

    def _decode(self, tool: str, result: CallToolResult) -> Any:
        text = next((c.text for c in result.content if isinstance(c, TextContent)), "")
        if result.isError:
            raise CatalogError(f"{self._label}: {tool} failed: {self._clean(_first_line(text))}")
        if result.structuredContent is not None:
            return result.structuredContent
        try:
            return json.loads(text)
        except ValueError as exc:
            raise CatalogError(
                f"{self._label}: {tool} answered with malformed JSON: {self._clean(text[:200])}"
            ) from exc

    # --- failures and shutdown -----------------------------------------------------------

    def _startup_failure(
        self,
        ready: concurrent.futures.Future[frozenset[str]],
        serving: concurrent.futures.Future[None],
    ) -> CatalogUnavailable:
        if not ready.done() and not serving.done():
            return self._not_started()
        exc = _root_cause(ready.exception() if ready.done() else serving.exception())
        if isinstance(exc, FileNotFoundError | PermissionError):
            return CatalogUnavailable(
                f"cannot run {self._command[0]}: {exc.strerror or type(exc).__name__}"
            )
        if isinstance(exc, TimeoutError):
            return self._not_started()
        return CatalogUnavailable(f"{self._label} exited while starting{self._why()}")

    def _not_started(self) -> CatalogUnavailable:
        why = self._why() or (
            " (it may still be retrying DataHub's /config: is GMS reachable from here?)"
        )
        return CatalogUnavailable(
            f"{self._label} did not start within {self._startup_timeout:g}s{why}"
        )

    def _exited(self) -> CatalogUnavailable:
        return CatalogUnavailable(f"{self._label} has exited{self._why()}")

    def _why(self) -> str:
        """``: <the server's last error>``, or nothing."""
        line = _last_error(self._errlog)
        return f": {self._clean(line)}" if line else ""

    def _clean(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = redact(" ".join(text.split()))
        return text if len(text) <= 300 else text[:297] + "..."

    def _shutdown(self) -> None:
        loop, thread, serving = self._loop, self._thread, self._serving
        self._loop = self._thread = self._serving = None
        if loop is not None and serving is not None and not serving.done():
            stop = self._stop
            if stop is not None:
                loop.call_soon_threadsafe(stop.set)
            try:
                serving.result(timeout=SHUTDOWN_GRACE)
            except concurrent.futures.TimeoutError:
                # The client escalates to SIGTERM/SIGKILL itself; this only unblocks it.
                serving.cancel()
                concurrent.futures.wait([serving], timeout=SHUTDOWN_GRACE)
            except BaseException as exc:  # the server failing as it stops is not news
                log.debug("%s stopped with %s", self._label, type(exc).__name__)
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=SHUTDOWN_GRACE)
        if loop is not None and not loop.is_running():
            loop.close()
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None


def _root_cause(exc: BaseException | None) -> BaseException | None:
    """The first leaf of an exception group (anyio's task groups wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _closed(exc: BaseException) -> bool:
    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError) or (
        isinstance(exc, McpError) and "closed" in str(exc).lower()
    )


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "no details")


def _last_error(errlog: TextIO | None) -> str:
    """The server's last exception line (``SomeError: why``) or ERROR log line, if any.

    Anything else it logs (requests, tool registrations) would only mislead.
    """
    if errlog is None or errlog.closed:
        return ""
    try:
        errlog.flush()
        errlog.seek(0)
        lines = errlog.read()[-20_000:].splitlines()
    except (OSError, ValueError):
        return ""
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line) or _ERROR_LOG_LINE.search(line):
            return line.strip()
    return ""


__all__ = ["DEFAULT_CALL_TIMEOUT", "DEFAULT_STARTUP_TIMEOUT", "McpSession"]
