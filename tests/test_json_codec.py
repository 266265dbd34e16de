"""``jsonrpc.encode`` and ``jsonrpc.loads``: pydantic-core on the stdio hot path, ``json``'s results.

Each reads and writes what ``json`` did, byte for byte and value for value; what pydantic-core
refuses goes to ``json``, which reads it, or refuses it, as before.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from mcp_patchbay.wire.jsonrpc import encode, loads


def old_encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


MESSAGES: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hello"}], "isError": False}},
    {"jsonrpc": "2.0", "id": "pb-7", "method": "tools/call", "params": {"name": "t", "arguments": {"a": None}}},
    {"text": 'é ü 日本 \u2028 \x00 \t \n " \\ /', "emoji": "🙂"},
    {"numbers": [0, -0.0, 1.0, 1e100, 1.5e-300, 2**70, -(2**63), 0.1 + 0.2]},
    {"special": [math.inf, -math.inf]},
    {"nested": [[[{"k": [True, False, None]}]]], "empty": {}, "list": []},
]


@pytest.mark.parametrize("message", MESSAGES)
def test_encode_writes_what_json_wrote(message: dict[str, Any]) -> None:
    assert encode(message) == old_encode(message)


def test_encode_of_a_lone_surrogate_fails_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        encode({"text": "\ud800"})


LINES = [
    *(old_encode(m) for m in MESSAGES),
    b'{"a":"\\ud800"}',  # a lone surrogate escaped: json reads it, pydantic-core does not
    b'\xef\xbb\xbf{"a":1}',  # a UTF-8 BOM
    b"[" * 300 + b"]" * 300,  # deeper than pydantic-core's own limit
    b'{"a":1,"a":2}',
    b'{"n":NaN}',
    b'  {"a":123456789012345678901234567890}  \n',
]


@pytest.mark.parametrize("line", LINES)
def test_loads_reads_what_json_read(line: bytes) -> None:
    got, want = loads(line), json.loads(line)
    assert json.dumps(got) == json.dumps(want)  # NaN != NaN: compared as text


@pytest.mark.parametrize("line", [b'{"a":1,}', b'"\\x"', b'"a\tb"', b"\xff", b"tru", b'{"a":1} x', b""])
def test_loads_refuses_what_json_refused(line: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(line)
    with pytest.raises(ValueError):
        loads(line)
