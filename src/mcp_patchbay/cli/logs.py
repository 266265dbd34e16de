"""Where the logs go and how a line looks: stderr (and ``--log-file``) at the levels the
command line asked for, as text or one JSON object a line, every line redacted."""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings
from typing import Any

from mcp_patchbay.cli.options import DEFAULT_FILE_LEVEL, DEFAULT_STDERR_LEVEL


def setup_logging(level: str | None, log_file: str | None, log_format: str = "text") -> None:
    """stderr at ``level`` (default WARNING); the log file at ``level`` or INFO, whichever says more;
    each line as text or as one JSON object (``log_format``)."""
    stderr_level = logging.getLevelNamesMapping()[level or DEFAULT_STDERR_LEVEL]
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(stderr_level)
    handlers: list[logging.Handler] = [stderr]
    lowest = stderr_level
    if log_file:
        file_level = min(stderr_level, logging.getLevelNamesMapping()[DEFAULT_FILE_LEVEL])
        file = logging.FileHandler(log_file, encoding="utf-8")
        file.setLevel(file_level)
        handlers.append(file)
        lowest = file_level
    logging.basicConfig(level=lowest, handlers=handlers, force=True)
    formatter = _JsonFormatter() if log_format == "json" else _RedactingFormatter(TEXT_FORMAT)
    for handler in handlers:  # secrets never: whatever a library quotes (an OAuth server's answer)
        handler.setFormatter(formatter)
    # Our own logs say it better; the SDK's per-message chatter is for debugging the SDK.
    if logging.getLogger().level > logging.DEBUG:
        for noisy in ("mcp", "httpx", "httpx2", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"mcp\..*")


TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class _RedactingFormatter(logging.Formatter):
    """Log lines, tracebacks included, with credential-like values cut (``redaction.redact``)."""

    def format(self, record: logging.LogRecord) -> str:
        from mcp_patchbay.redaction import redact

        return redact(super().format(record))


class _JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, and
    ``exception`` (the traceback) when there is one; every text redacted."""

    def format(self, record: logging.LogRecord) -> str:
        from mcp_patchbay.redaction import redact

        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact(record.exc_text)
        return json.dumps(line, ensure_ascii=False)
