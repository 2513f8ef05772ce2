"""``mcp-server-datahub`` over stdio, behind a synchronous, bounded facade.

The official ``mcp`` client is asynchronous; the rest of mlcopilot is not. :class:`McpSession`
runs the client on an anyio blocking portal (an event loop in a thread of its own, started on
first use) and calls into it from any thread. The server process lives inside one
long-running task (the stdio transport and the client session are context managers that must
be entered and left in the same task), so :meth:`close` asks that task to leave them, which
closes the server's stdin, waits for it to exit and terminates it if it does not: no zombie
processes.

Every wait is bounded, in all (not per read: a server that keeps sending progress or log
messages does not extend it): the start-up (the server retries GMS's ``/config`` for about
30 s before it gives up and exits), each tool call (and, given ``until``, a scan's bound on
its walk), and the shutdown. Whatever goes wrong becomes
one line — :class:`~mlcopilot.errors.CatalogUnavailable` when the server cannot be started,
exits or does not answer in time, :class:`~mlcopilot.errors.CatalogError` when a tool reports
an error — with the server's last log line when that says why, and never the token.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from typing import Any, TextIO, TypeVar, cast

import anyio
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
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
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._serving: concurrent.futures.Future[None] | None = None
        self._stop: anyio.Event | None = None
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

    def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None = None,
        until: float | None = None,
    ) -> Any:
        """Call one tool; return its structured result (a dict, or a list for list tools).

        Raises:
            CatalogUnavailable: the server has exited or did not answer within the timeout.
            CatalogError: the tool reported an error (the message says which tool and why).
        """
        return self.call_all([(tool, arguments)], timeout=timeout, until=until)[0]

    def call_all(
        self,
        calls: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        timeout: float | None = None,
        until: float | None = None,
    ) -> list[Any]:
        """Call several tools concurrently (at most ``concurrency`` at once); results in order.

        Each call ends within ``timeout`` seconds from its start (default: the session's), and
        every call by ``until`` (a ``time.monotonic()``, a scan's bound) when given. The first
        failure is raised once every call has finished or timed out.
        """
        if not calls:
            return []
        self.start()
        limit = self._call_timeout if timeout is None else timeout
        self.calls += len(calls)

        async def run_all() -> list[Any]:
            gate = anyio.Semaphore(self._concurrency)
            results: list[Any] = [None] * len(calls)
            failures: list[Exception | None] = [None] * len(calls)

            async def one(index: int, tool: str, arguments: Mapping[str, Any]) -> None:
                async with gate:
                    try:
                        results[index] = await self._call(
                            tool, dict(arguments), self._budget(tool, limit, until)
                        )
                    except Exception as exc:  # kept, so that every other call still finishes
                        failures[index] = exc

            async with anyio.create_task_group() as group:
                for index, (tool, arguments) in enumerate(calls):
                    group.start_soon(one, index, tool, arguments)
            for failure in failures:
                if failure is not None:
                    raise failure
            return results

        waves = -(-len(calls) // self._concurrency)
        wait = limit * waves
        if until is not None:
            wait = max(0.0, min(wait, until - time.monotonic()))
        return self._run(run_all, wait + SHUTDOWN_GRACE)

    def _budget(self, tool: str, limit: float, until: float | None) -> float:
        """Seconds one call may take: ``limit``, or what is left before ``until`` if less."""
        if until is None:
            return limit
        left = until - time.monotonic()
        if left <= 0:
            raise CatalogUnavailable(
                f"{self._label}: {tool} not called: past the scan's time bound on its walk"
            )
        return min(limit, left)

    def close(self) -> None:
        """Stop the server and the portal's thread; safe to call more than once."""
        with self._lock:
            self._closed = True
            self._shutdown()

    # --- the portal ----------------------------------------------------------------------

    def _spawn(self) -> frozenset[str]:
        # Closed in _shutdown: it outlives this call, for the server's last words.
        self._errlog = cast(
            TextIO,
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"),  # noqa: SIM115
        )
        self._portal_cm = start_blocking_portal()
        portal = self._portal = self._portal_cm.__enter__()
        self._stop = portal.call(anyio.Event)
        try:
            # Returns once the task reports the tools: the start-up is bounded inside it.
            self._serving, tools = portal.start_task(self._serve)
        except Exception as exc:
            failure = self._startup_failure(exc)
            self._shutdown()
            raise failure from exc
        return cast(frozenset[str], tools)

    async def _serve(self, *, task_status: TaskStatus[frozenset[str]]) -> None:
        """Own the server process: start it, hand out the session, wait for :meth:`close`."""
        params = StdioServerParameters(
            command=self._command[0], args=self._command[1:], env=self._env
        )
        assert self._errlog is not None
        assert self._stop is not None
        try:
            async with (
                stdio_client(params, errlog=self._errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                # Inside the transport, so a timeout still shuts the process down cleanly.
                with anyio.fail_after(self._startup_timeout):
                    await session.initialize()
                    listed = await session.list_tools()
                self._session = session
                task_status.started(frozenset(tool.name for tool in listed.tools))
                await self._stop.wait()
        finally:
            self._session = None

    def _run(self, make: Callable[[], Awaitable[_T]], timeout: float) -> _T:
        """Run a coroutine in the session's loop and wait for it, at most ``timeout``."""
        portal = self._portal
        if portal is None or self._session is None:
            raise self._exited()
        future = portal.start_task_soon(make)
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

    def _startup_failure(self, failure: BaseException) -> CatalogUnavailable:
        exc = _root_cause(failure)
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
        portal_cm, portal, serving = self._portal_cm, self._portal, self._serving
        self._portal_cm = self._portal = self._serving = None
        if portal is not None and serving is not None and not serving.done():
            stop = self._stop
            if stop is not None:
                portal.call(stop.set)
            try:
                serving.result(timeout=SHUTDOWN_GRACE)
            except concurrent.futures.TimeoutError:
                # The client escalates to SIGTERM/SIGKILL itself; this only unblocks it.
                serving.cancel()
                concurrent.futures.wait([serving], timeout=SHUTDOWN_GRACE)
            except (Exception, concurrent.futures.CancelledError) as exc:
                # The server failing as it stops is not news: we are stopping it.
                log.info("%s stopped with %s", self._label, type(exc).__name__)
        if portal is not None:
            with suppress(RuntimeError):  # already stopped
                portal.call(portal.stop, True)  # cancel what is left, then end the loop
        if portal_cm is not None:
            portal_cm.__exit__(None, None, None)  # joins the portal's thread
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
