"""Logging of the long-running commands (worker, serve, broker): one JSON object per line.

:func:`configure_logging` puts one handler on the root logger. Each record becomes a line of
JSON (``MEMSTREAM_LOG_FORMAT=json``, the default) with ``time`` (UTC, ISO 8601), ``level``,
``logger``, ``message``, whatever the call passed as ``extra=`` and, inside a request of the
HTTP API, ``request_id`` (from :data:`request_id`, a context variable, so every record of the
request carries it, in threads the request hands work to as well). ``text`` gives one
readable line instead, for a terminal. memstream's loggers log at ``MEMSTREAM_LOG_LEVEL``
(info by default); Faust, mode, aiokafka, uvicorn and every other library at
``MEMSTREAM_LOG_LEVEL_LIBRARIES`` (warning by default: Faust at info writes a table per
rebalance).

Nothing secret reaches the stream: the secrets of the settings (the web and metrics tokens,
the LLM and embedder API keys), anything shaped like an API key (``msk_...``) and whatever
follows ``Bearer`` are replaced with ``[redacted]`` in every formatted line, tracebacks
included. That is a second line of defence: memstream's code logs no key, no token and no
user content (ids and counts only), and tests hold it to that.

The JSON comes from python-json-logger: it turns any ``extra=`` into fields, formats
exceptions and stack traces into fields, and encodes values JSON does not know (datetimes,
bytes, exceptions) instead of failing, which a hand-written ``json.dumps`` formatter would
each have to do again.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from contextvars import ContextVar
from typing import IO, Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from memstream.models.settings import Settings

__all__ = ["Redactor", "configure_logging", "request_id"]

#: The id of the HTTP request being handled (None outside a request). Set by the HTTP API's
#: middleware (:mod:`memstream.streams.api.observability`); every record logged meanwhile
#: carries it as ``request_id``.
request_id: ContextVar[str | None] = ContextVar("memstream_request_id", default=None)

#: Loggers whose level is ``log_level``; every other logger inherits the root's,
#: ``log_level_libraries``.
OWN_LOGGERS = ("memstream",)
#: Secrets shorter than this are not searched for (an empty or placeholder key would match
#: everywhere).
MIN_SECRET_CHARS = 8
#: Record attributes that are never fields: the standard ones, and uvicorn's coloured copy
#: of its message.
_SKIPPED = (*RESERVED_ATTRS, "color_message")
_API_KEY = re.compile(r"msk_[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
REDACTED = "[redacted]"


class Redactor:
    """Replaces secrets in formatted log lines: the given ones (and their JSON-escaped
    forms), anything shaped like a memstream API key, and the credentials after ``Bearer``.

    Examples
    --------
    >>> Redactor(["s3cret-token-value"]).redact('token s3cret-token-value, Bearer abc msk_0123456789ab')
    'token [redacted], Bearer [redacted] [redacted]'
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        found = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        # A secret holding a quote or a backslash appears escaped in a JSON line.
        found |= {json.dumps(s)[1:-1] for s in found}
        self._secrets = sorted(found, key=len, reverse=True)

    def redact(self, line: str) -> str:
        """``line`` with every secret replaced by :data:`REDACTED`."""
        for secret in self._secrets:
            if secret in line:
                line = line.replace(secret, REDACTED)
        line = _API_KEY.sub(REDACTED, line)
        return _BEARER.sub(rf"\g<1>{REDACTED}", line)

    @classmethod
    def from_settings(cls, settings: Settings) -> Redactor:
        """A redactor of the secrets ``settings`` hold."""
        secrets = [
            value.get_secret_value()
            for value in (
                settings.web_token,
                settings.metrics_token,
                settings.llm_api_key,
                settings.embedder_api_key,
            )
            if value is not None
        ]
        return cls(secrets)


class _RequestContext(logging.Filter):
    """Adds the current request's id to each record, when there is one."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = request_id.get()
        if current is not None and not hasattr(record, "request_id"):
            record.request_id = current
        return True


class _JsonLines(JsonFormatter):
    """One JSON object per record: time, level, logger, message, then the extra fields."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__(
            "{levelname}{name}{message}",
            style="{",
            rename_fields={"levelname": "level", "name": "logger"},
            reserved_attrs=_SKIPPED,
            json_ensure_ascii=False,
        )
        self.redactor = redactor

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        # The time first, in UTC with milliseconds, whatever the machine's zone.
        log_data["time"] = self.formatTime(record)
        super().add_fields(log_data, record, message_dict)
        log_data["level"] = record.levelname.lower()

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """``record``'s time as ISO 8601 in UTC, to the millisecond."""
        seconds = time.gmtime(record.created)
        return time.strftime("%Y-%m-%dT%H:%M:%S", seconds) + f".{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON, secrets redacted."""
        return self.redactor.redact(super().format(record))


class _TextLines(logging.Formatter):
    """One readable line per record, for a terminal; the request id at the end if any."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The record as text, secrets redacted."""
        line = super().format(record)
        rid = getattr(record, "request_id", None)
        if rid is not None:
            head, newline, rest = line.partition("\n")
            line = f"{head} [request_id={rid}]{newline}{rest}"
        return self.redactor.redact(line)


def configure_logging(settings: Settings, stream: IO[str] | None = None) -> logging.Handler:
    """Log every record of this process to ``stream`` (stderr by default) as
    ``settings.log_format`` says, memstream's at ``settings.log_level`` and the libraries'
    at ``settings.log_level_libraries``; replaces the root logger's handlers. Returns the
    handler (a test removes it again).

    Examples
    --------
    >>> import io, json, logging
    >>> out = io.StringIO()
    >>> handler = configure_logging(Settings(log_level="info"), out)
    >>> logging.getLogger("memstream.example").info("sessions closed", extra={"closed": 2})
    >>> line = json.loads(out.getvalue())
    >>> line["level"], line["logger"], line["message"], line["closed"]
    ('info', 'memstream.example', 'sessions closed', 2)
    >>> logging.getLogger().removeHandler(handler)
    """
    redactor = Redactor.from_settings(settings)
    formatter: logging.Formatter = (
        _JsonLines(redactor) if settings.log_format == "json" else _TextLines(redactor)
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(_RequestContext())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level_libraries.upper())
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(settings.log_level.upper())
    # Warnings (deprecations of libraries) go through logging too, at the libraries' level.
    logging.captureWarnings(True)
    return handler
