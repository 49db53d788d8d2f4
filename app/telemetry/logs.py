"""Where log lines go and how they read: plain text, or one JSON object a line (ENGRAM_LOG_FORMAT).

The JSON form is a small formatter of our own over the standard library's logging: time,
level, logger and message, then whatever the call passed as ``extra`` (the access line's
request id, route, status...). Nothing here decides what is logged: callers log ids, routes
and error types, never a secret or an item's text.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# What every LogRecord carries; anything else on a record came from ``extra`` and is logged as a field.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# Uvicorn's coloured copy of its message: the same text with terminal escapes.
_LEFT_OUT = frozenset({"color_message"})


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in _LEFT_OUT and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def json_line(message: str, *, level: str = "info", logger: str = "engram") -> str:
    """A line as JsonFormatter writes it, for output made before logging is set up."""
    record = logging.LogRecord(logger, logging.getLevelNamesMapping()[level.upper()], "", 0, message, None, None)
    return JsonFormatter().format(record)


def configure_logging(level: str, log_format: LogFormat) -> None:
    """Every logger's lines to stderr in ``log_format``; in JSON, Python's warnings too (as ``py.warnings``)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    # As basicConfig does, nothing changes where the root logger already has a handler (a test harness's).
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if log_format == "json":
        logging.captureWarnings(True)
