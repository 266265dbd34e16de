"""A scripted model behind a real client: an HTTP server on 127.0.0.1 that answers a provider's
streaming API with scripted tool calls and records every request body the client sends.

The script is a list of ``Step``s. The step a request gets is the number of tool results in its
conversation (stateless: a client that retries a request gets the same answer), so step N's tool
result is what the model was shown of step N's call. A step's tool is the offered tool whose name
ends with ``Step.tool`` (each client prefixes names its own way); while it is not offered and a
client's wait tool is (Claude Code's ``WaitForMcpServers``, for servers still connecting), the
model calls that first, outside the count. A provider (``anthropic``, ``gemini``,
``openai``) says how to read its requests and write its answers; everything else is here.

Requests that are not the conversation (titles, token counts, routing classifiers) are recorded
and answered by the provider's ``side_answer`` without touching the script.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

JSON = dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One model turn: call the listed tool whose name ends with ``tool`` with ``arguments``,
    or (``tool`` None) end the turn with ``text``."""

    label: str
    tool: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())
    text: str = "All done."


@dataclass(frozen=True)
class ToolResult:
    """A tool result in a request's conversation: the call it answers and its text as the model sees it."""

    call_id: str
    name: str
    text: str
    is_error: bool | None = None
    """What the request says of it (Anthropic's ``is_error``); None when the format has no flag."""


@dataclass
class Answer:
    status: int
    content_type: str
    chunks: list[bytes]


@dataclass
class Exchange:
    """One request the client sent, and what the scripted model answered."""

    at: float
    path: str
    body: JSON
    conversation: bool
    """Part of the scripted conversation (else a side request)."""
    step: int | None = None
    """The script step answered, for a conversation request."""
    called: str | None = None
    """The tool name the answer called (as the client listed it), if any."""
    tools: tuple[str, ...] = ()
    """The tool names the request offered the model."""
    results: tuple[ToolResult, ...] = ()
    waited: bool = False
    """Answered with a wait tool's call instead of the step (see ``ScriptedModel.wait_tools``)."""


class Provider(ABC):
    """How one model API's requests read and its streaming answers are written."""

    name: str

    @abstractmethod
    def is_conversation(self, path: str, body: JSON) -> bool: ...

    @abstractmethod
    def tool_names(self, body: JSON) -> list[str]: ...

    @abstractmethod
    def tool_results(self, body: JSON) -> list[ToolResult]: ...

    @abstractmethod
    def call(self, body: JSON, step: int, call_id: str, name: str, arguments: Mapping[str, Any]) -> Answer: ...

    @abstractmethod
    def end(self, body: JSON, step: int, text: str) -> Answer: ...

    @abstractmethod
    def side_answer(self, path: str, body: JSON) -> Answer: ...


def sse(events: Sequence[tuple[str | None, JSON]]) -> list[bytes]:
    """Server-sent events: an ``event:`` line when named, a ``data:`` line of JSON."""
    chunks: list[bytes] = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        chunks.append(f"{head}data: {json.dumps(data)}\n\n".encode())
    return chunks


def json_answer(data: JSON, status: int = 200) -> Answer:
    return Answer(status, "application/json", [json.dumps(data).encode()])


class ScriptedModel:
    """The HTTP server; ``with model.running():`` serves it on ``model.url``."""

    def __init__(self, provider: Provider, script: Sequence[Step], wait_tools: Sequence[str] = ()) -> None:
        self.provider = provider
        self.script = list(script)
        self.wait_tools = tuple(wait_tools)
        """Tools a client offers while its MCP servers are still connecting (Claude Code's
        ``WaitForMcpServers``): called with no arguments when a step's tool is not offered yet.
        Their results do not count as steps (call ids ``wait_N``)."""
        self.exchanges: list[Exchange] = []
        self.errors: list[str] = []
        self._changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not running"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @contextmanager
    def running(self) -> Iterator[ScriptedModel]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_GET(self) -> None:
                self._send(model.get(self.path))

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    raw = gzip.decompress(raw)
                self._send(model.post(self.path, raw))

            def _send(self, answer: Answer) -> None:
                self.send_response(answer.status)
                self.send_header("content-type", answer.content_type)
                if answer.content_type == "application/json":
                    self.send_header("content-length", str(sum(len(c) for c in answer.chunks)))
                self.end_headers()
                for chunk in answer.chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, name=f"scripted-{self.provider.name}", daemon=True)
        self._server = server
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(10)

    def get(self, path: str) -> Answer:
        self._record(Exchange(time.monotonic(), path, {}, conversation=False))
        return json_answer({})

    def post(self, path: str, raw: bytes) -> Answer:
        try:
            loaded: object = json.loads(raw) if raw else {}
        except ValueError:
            loaded = {"unparsed": raw[:2000].decode("utf-8", "replace")}
        body = cast("JSON", loaded) if isinstance(loaded, dict) else {"value": loaded}
        try:
            return self._answer(path, body)
        except Exception as exc:  # a stub bug: say it in the test, not as a hung client
            with self._changed:
                self.errors.append(f"{type(exc).__name__}: {exc} (request to {path})")
                self._changed.notify_all()
            return json_answer({"error": {"message": f"scripted model failed: {exc}"}}, status=500)

    def _answer(self, path: str, body: JSON) -> Answer:
        provider = self.provider
        if not provider.is_conversation(path, body):
            self._record(Exchange(time.monotonic(), path, body, conversation=False))
            return provider.side_answer(path, body)
        tools = tuple(provider.tool_names(body))
        results = tuple(provider.tool_results(body))
        waits = sum(1 for r in results if "wait_" in r.call_id)
        step = len(results) - waits
        exchange = Exchange(time.monotonic(), path, body, True, step, tools=tools, results=results)
        if step >= len(self.script):
            self._record(exchange)
            return provider.end(body, step, "The script is over.")
        planned = self.script[step]
        if planned.tool is None:
            self._record(exchange)
            return provider.end(body, step, planned.text)
        name = next((t for t in tools if t.endswith(planned.tool)), None)
        wait = next((t for t in tools if t in self.wait_tools), None)
        if name is None and wait is not None and waits < 3:
            exchange.called, exchange.waited = wait, True
            self._record(exchange)
            return provider.call(body, step, f"wait_{waits}", wait, {})
        if name is None:
            # The tool is not offered: say so as the model would, and end the turn.
            self._record(exchange)
            return provider.end(body, step, f"I cannot call {planned.tool}: it is not in my tools.")
        exchange.called = name
        self._record(exchange)
        return provider.call(body, step, f"call_{step}_{planned.label}", name, planned.arguments)

    def _record(self, exchange: Exchange) -> None:
        with self._changed:
            self.exchanges.append(exchange)
            self._changed.notify_all()

    # -- what the client sent --------------------------------------------------------------

    def conversation(self) -> list[Exchange]:
        """The conversation's requests, waits included."""
        with self._changed:
            return [e for e in self.exchanges if e.conversation]

    def last_results(self) -> tuple[ToolResult, ...]:
        """The tool results of the longest conversation request, the steps' only."""
        turns = self.conversation()
        longest = max((e.results for e in turns), key=len, default=())
        return tuple(r for r in longest if "wait_" not in r.call_id)

    def calls(self) -> list[tuple[int, str]]:
        """(step, tool name) of each tool call the model made, first time each step was answered."""
        seen: dict[int, str] = {}
        for exchange in self.conversation():
            if exchange.step is not None and exchange.called is not None and not exchange.waited:
                seen.setdefault(exchange.step, exchange.called)
        return sorted(seen.items())
