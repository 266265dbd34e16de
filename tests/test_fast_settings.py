"""The fast path's one switch (issue 34): ``patchbay.fast_path``, which ``$PATCHBAY_FAST_PATH``
(``0`` or ``1``) overrides, reaching every lane on both sides.

On by default; off, every call takes the SDK's path on both sides: the gateway's server and the
stdio lane on the client's side, the stdio pipe and the HTTP lane on the upstream's. The old keys
of each side's switch (``patchbay.http_lane``, ``gateway.fast_path``) still set it, with a warning
naming the file and the key. Tests set it the way users do: in the file, or in the environment.
The gateway and its HTTP upstream run in process, as in tests/test_gateway_fastpath.py.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from mcp_patchbay.config import ConfigError, Settings, parse_config
from mcp_patchbay.fastpath.pipe_calls import RawCalls
from mcp_patchbay.fastpath.stdio_calls import CallLane
from tests.e2e_util import fault_entry, proxy_rig
from tests.harness import result_text
from tests.test_gateway_fastpath import Remote, client, gateway_before, lane_of
from tests.test_lanes import Client, call, handshake

pytestmark = pytest.mark.anyio

FILE = Path("/virtual/patchbay.json").resolve()


def switch(document: dict[str, Any], environ: dict[str, str] | None = None) -> bool:
    return parse_config(json.dumps(document), FILE, environ=environ or {}).settings.fast_path


def test_the_switch_is_on_by_default() -> None:
    assert Settings().fast_path is True
    assert switch({}) is True
    assert switch({"patchbay": {"watch": False}}) is True
    assert switch({"patchbay": {"fast_path": False}}) is False


@pytest.mark.parametrize(
    ("given", "variable", "expected"), [(True, "0", False), (False, "1", True), (None, "0", False), (False, "", False)]
)
def test_the_environment_variable_overrides_the_file(given: bool | None, variable: str, expected: bool) -> None:
    settings = {} if given is None else {"fast_path": given}
    assert switch({"patchbay": settings}, {"PATCHBAY_FAST_PATH": variable}) is expected


def test_another_value_of_the_variable_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert switch({"patchbay": {"fast_path": False}}, {"PATCHBAY_FAST_PATH": "no"}) is False
    assert "PATCHBAY_FAST_PATH='no': expected 0 or 1" in caplog.text


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"patchbay": {"http_lane": False}}, "patchbay.http_lane"),
        ({"gateway": {"fast_path": False}}, "gateway.fast_path"),
    ],
)
def test_an_old_key_sets_the_switch_with_a_warning_naming_the_file_and_key(
    document: dict[str, Any], key: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert switch(document) is False
    [record] = [r for r in caplog.records if "deprecated" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert f"{FILE}: {key} is deprecated" in record.getMessage()
    assert "patchbay.fast_path" in record.getMessage()


def test_the_switch_itself_wins_over_an_old_key_and_the_variable_over_both() -> None:
    document = {"patchbay": {"fast_path": True, "http_lane": False}, "gateway": {"fast_path": False}}
    assert switch(document) is True
    assert switch({"patchbay": {"http_lane": True}, "gateway": {"fast_path": False}}) is False
    assert switch({"patchbay": {"http_lane": False}}, {"PATCHBAY_FAST_PATH": "1"}) is True


def test_an_old_key_that_is_not_true_or_false_is_a_mistake() -> None:
    with pytest.raises(ConfigError) as caught:
        switch({"patchbay": {"http_lane": "no"}})
    assert "patchbay.http_lane: expected true or false" in str(caught.value)


async def test_the_stdio_lane_takes_no_call_with_the_switch_off() -> None:
    async def run_tool(name: str, arguments: Any, on_progress: Any, meta: Any) -> dict[str, Any]:
        raise AssertionError("not called: the SDK's path serves it")

    lane = CallLane(run_tool, fast_path=False)
    async with lane.serving(Client().send):
        handshake(lane)
        assert lane.open  # the handshake is still followed (the client's name learnt)
        assert not lane.offer(call(1))


@pytest.mark.parametrize("fast", [True, False], ids=["on", "off"])
async def test_the_switch_reaches_both_stdio_lanes(tmp_path: Path, fast: bool) -> None:
    async with proxy_rig(tmp_path, {"s": fault_entry("s")}, {"fast_path": fast, "timeout": 20}) as rig:
        await rig.ready("s")
        assert rig.proxy.lane.fast_path is fast
        raw = rig.upstream("s")._raw  # pyright: ignore[reportPrivateUsage]
        assert isinstance(raw, RawCalls) if fast else raw is None
        assert await rig.ok("s__echo", {"text": "hi"}) == "hi"


async def test_the_switch_off_sends_gateway_calls_through_the_sdk_on_both_sides() -> None:
    async with gateway_before(Remote(), patchbay={"fast_path": False}) as (gateway, base), client(base) as c:
        for n in range(3):
            assert result_text(await c.call_tool("remote__echo", {"text": f"hi {n}"})) == f"hi {n}"
        assert gateway.fast.served == 0  # the SDK's server
        assert lane_of(gateway) is None  # the SDK's client


async def test_the_switch_on_by_default_answers_gateway_calls_past_the_sdk_on_both_sides() -> None:
    async with gateway_before(Remote()) as (gateway, base), client(base) as c:
        assert result_text(await c.call_tool("remote__echo", {"text": "hi"})) == "hi"
        assert gateway.fast.served == 1
        lane = lane_of(gateway)
        assert lane is not None and lane.served == 1
