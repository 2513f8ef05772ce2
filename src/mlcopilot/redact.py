"""Secrets never leave the process: one redactor for logs, errors, the database and messages.

Every configured secret value is registered here when it is read (:func:`register_secret`);
known token shapes (GitHub, Slack, webhook URLs, ``Authorization`` headers, URL passwords, the
value of a query string's ``token=``, ``api_key=``, ``secret=``...) are redacted even when
nobody registered them. :func:`install` hooks the redactor into logging itself (the record
factory), so a record is clean before any handler, filter or third-party formatter sees it —
including slack_sdk's debug lines that carry a full webhook URL.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from typing import Any, Final

MASK: Final = "[REDACTED]"

_PATTERNS: Final = (
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"github_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"xox[abposr]-[A-Za-z0-9-]+"),
    re.compile(r"xapp-[A-Za-z0-9-]+"),
    re.compile(r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/\S+"),
    re.compile(r"(?i)(?<=authorization: )(?:bearer |token |basic )?\S+"),
    re.compile(r"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?<=://)[^:/@\s]*:[^@/\s]+(?=@)"),
)

_QUERY_SECRET: Final = re.compile(
    r"(?i)([?&;](?:[a-z0-9_.-]*(?:token|secret|password|passwd|pwd|api[_-]?key|apikey|"
    r"signature|credential)s?|key|sig|auth)=)[^&#\s'\"<>]+"
)
"""A query-string parameter that names a secret (``?token=…``, ``&api_key=…``): its value."""

_lock = threading.Lock()
_secrets: set[str] = set()
_installed = False


def register_secret(value: str | None) -> None:
    """Redact ``value`` everywhere from now on (ignored when empty or very short).

    Values under 8 characters are not registered: redacting them would mangle ordinary text,
    and no real token or webhook URL is that short.
    """
    if value and len(value) >= 8:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """``text`` with every registered secret and every known token shape replaced by a mask."""
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, text)


def redact_exception(exc: BaseException) -> str:
    """One redacted line for ``exc``: its type and first line of message."""
    message = next((line for line in str(exc).splitlines() if line.strip()), "")
    return redact(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def install() -> None:
    """Redact every log record of every logger in this process (idempotent).

    The record factory is process-wide, unlike a filter on the root logger, which records
    propagated from child loggers bypass.
    """
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _scrub(record)
        return record

    logging.setLogRecordFactory(factory)


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed third-party log call: keep the raw template only
        message = str(record.msg)
    record.msg = redact(message)
    record.args = None
    if record.exc_info and record.exc_info[1] is not None:
        record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip())
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
