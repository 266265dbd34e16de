"""Where the logs go and how a line looks: stderr (and ``--log-file``) at the levels the
command line asked for, as text or one JSON object a line, every line redacted; and the one
status line a terminal command rewrites in place (``StatusLine``)."""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
import warnings
from typing import Any, TextIO

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


class StatusLine:
    """One line on stderr that says what is going on and is rewritten in place, shown only on a
    terminal (a pipe or a log file gets nothing of it), cleared before anything else is written."""

    _current: StatusLine | None = None

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self._shown = False
        self._at = 0.0

    @classmethod
    def current(cls) -> StatusLine:
        """The status line of this process's stderr (made again if stderr was replaced)."""
        if cls._current is None or cls._current.stream is not sys.stderr:
            cls._current = StatusLine(sys.stderr)
        return cls._current

    def show(self, text: str, *, every: float = 0.0) -> None:
        """Write ``text`` over the previous line (not more often than ``every`` seconds)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if every and self._shown and now - self._at < every:
            return
        self._at = now
        width = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
        self.stream.write("\r\x1b[K" + _cut(text, width))
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
