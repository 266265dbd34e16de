"""Servers started when needed (``on_demand``): lazy servers listed from their last listing
(``listing_cache``) until a call, a read or a prompt needs them, idle servers stopped and
started again, reloads that change only start modes, ``check``, and the early paths
(``spawn``). In memory, and over real processes where the behaviour lives there."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from mcp_patchbay.config import Config, StdioSpec, load_config
from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.upstreams.availability import State
from mcp_patchbay.upstreams.early_start import EARLY_MARK, early
from mcp_patchbay.upstreams.listing import Listing
from mcp_patchbay.upstreams.listing_cache import Cached, ListingCache, launch_key
from mcp_patchbay.upstreams.spawn import discard, starts_now
from tests.harness import (
    FakeTool,
    GatedUpstreams,
    MemoryUpstreams,
    config_from,
    connected,
    error_info,
    make_server,
    proxy_transport,
    result_text,
    text,
    until,
)
from tests.processes import running

pytestmark = pytest.mark.anyio

FAULT_SERVER = str(Path(__file__).parent / "servers" / "fault_server.py")


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own data folder: the listings it keeps are its own."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data" / "mcp-patchbay"


def _cache_file(data_dir: Path) -> Path:
    return data_dir / "listings.json"


async def _echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text(f"echo {args.get('text', '')}")


async def _slow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(float(args.get("seconds", 0.3)))  # a slow tool: time passes while it is in flight
    return text("slow done")


def _notes() -> Server[Any]:
    """Two tools, a resource one may subscribe to, a prompt."""
    plain = make_server(
        "notes",
        {"add": FakeTool(_echo), "slow": FakeTool(_slow)},
        resources=[types.Resource(uri="notes://today", name="today")],
        prompts=[types.Prompt(name="summary", description="Sum up the notes.")],
    )

    async def subscribe(ctx: Any, params: Any) -> types.EmptyResult:
        return types.EmptyResult()

    plain.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    plain.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, subscribe)
    return plain


def _lazy(**entry: Any) -> dict[str, Any]:
    return {"command": "notes-server", "start": "lazy", **entry}


async def _learn(config: Config, data_dir: Path) -> None:
    """Run the proxy once so that the lazy servers of ``config`` learn and keep their listing."""
    servers = {entry.name: _notes() for entry in config.servers}
    async with connected(config, MemoryUpstreams(servers)) as (proxy, _):
        await until(lambda: all(u.state is State.NOT_STARTED for u in proxy.supervisor.upstreams.values()))
        await until(lambda: _cache_file(data_dir).exists())
        await proxy.supervisor.listing_cache.flush()


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


def _status(result: types.ReadResourceResult) -> dict[str, Any]:
    content = result.contents[0]
    assert isinstance(content, types.TextResourceContents)
    return json.loads(content.text)


# --- the first start: learn the listing, then stop -------------------------------------------


async def test_a_lazy_server_with_no_listing_kept_is_started_once_to_learn_it_then_stopped(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()})
    upstreams = MemoryUpstreams({"notes": _notes()})
    async with connected(config, upstreams) as (proxy, client):
        upstream = proxy.supervisor.upstreams["notes"]
        await until(lambda: upstream.state is State.NOT_STARTED)
        assert not upstream.running
        assert upstreams.connects == {"notes": 1}
        assert {t.name for t in (await client.list_tools()).tools} == {"notes__add", "notes__slow"}
        await until(lambda: _cache_file(data_dir).exists())
        await proxy.supervisor.listing_cache.flush()
    path = _cache_file(data_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (record,) = json.loads(path.read_text())["servers"].values()
    assert record["server"] == "notes"
    assert [t["name"] for t in record["tools"]] == ["add", "slow"]
    assert [r["uri"] for r in record["resources"]] == ["notes://today"]
    assert [p["name"] for p in record["prompts"]] == ["summary"]


# --- a cached lazy server: no start until needed ------------------------------------------------


async def test_a_cached_lazy_server_is_listed_and_searched_without_starting_and_a_call_starts_it(
    data_dir: Path,
) -> None:
    config = config_from({"notes": _lazy()}, {"status_tool": True})
    await _learn(config, data_dir)
    upstreams = MemoryUpstreams({"notes": _notes()})
    changes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.append(message)

    async with connected(config, upstreams, message_handler=on_message) as (proxy, client):
        assert {t.name for t in (await client.list_tools()).tools} >= {"notes__add", "notes__slow"}
        assert "notes://today" in [str(r.uri) for r in (await client.list_resources()).resources]
        assert [p.name for p in (await client.list_prompts()).prompts] == ["notes__summary"]
        status = _status(await client.read_resource("patchbay://status"))
        assert status["servers"]["notes"]["state"] == "not_started"
        assert status["servers"]["notes"]["running"] is False
        assert status["servers"]["notes"]["start"] == "lazy"
        assert status["running"] == {"running": 0, "not_started": 1, "stopped_idle": 0}
        assert upstreams.connects == {}

        result = await client.call_tool("notes__add", {"text": "hi"})
        assert result_text(result) == "echo hi"
        assert upstreams.connects == {"notes": 1}
        assert proxy.supervisor.upstreams["notes"].state is State.READY
        status = _status(await client.read_resource("patchbay://status"))
        assert status["running"] == {"running": 1, "not_started": 0, "stopped_idle": 0}
        await client.list_tools()
    assert changes == []  # the same listing: starting it changed nothing the client sees


async def test_a_search_answers_from_the_cached_listing_and_starts_nothing(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()}, {"expose": "search"})
    await _learn(config, data_dir)
    upstreams = MemoryUpstreams({"notes": _notes()})
    async with connected(config, upstreams) as (_, client):
        found = await client.call_tool("patchbay__find_tools", {"query": "add"})
        assert "notes__add" in json.dumps(found.structured_content)
        assert upstreams.connects == {}
        result = await client.call_tool("patchbay__call_tool", {"name": "notes__add", "arguments": {"text": "x"}})
        assert result_text(result) == "echo x"
        assert upstreams.connects == {"notes": 1}


async def test_a_call_to_a_lazy_server_that_cannot_start_gets_the_usual_error(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()}, {"retry_attempts": 0})
    await _learn(config, data_dir)
    upstreams = MemoryUpstreams({"notes": _notes()})
    upstreams.refuse.add("notes")
    async with connected(config, upstreams) as (_, client):
        result = await client.call_tool("notes__add", {"text": "hi"})
        error = error_info(result)
        assert error["code"] == "SERVER_UNAVAILABLE"
        assert upstreams.connects == {"notes": 1}
        assert len(result_text(result)) < 500


async def test_a_call_waits_for_a_lazy_server_s_start_within_connect_timeout(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()}, {"retry_attempts": 0, "connect_timeout": 0.3})
    await _learn(config, data_dir)
    never = anyio.Event()
    async with connected(config, GatedUpstreams({"notes": _notes()}, {"notes": never})) as (proxy, client):
        with anyio.fail_after(5):
            result = await client.call_tool("notes__add", {"text": "hi"})
        error = error_info(result)
        assert error["code"] == "SERVER_UNAVAILABLE"
        assert "did not finish starting within 0.3s" in result_text(result)
        assert proxy.supervisor.upstreams["notes"].state is not State.READY


async def test_concurrent_calls_to_a_lazy_server_share_one_start(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()})
    await _learn(config, data_dir)
    upstreams = MemoryUpstreams({"notes": _notes()})
    answers: list[str] = []
    async with connected(config, upstreams) as (_, client):

        async def one(n: int) -> None:
            answers.append(result_text(await client.call_tool("notes__add", {"text": str(n)})))

        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(one, n)
    assert sorted(answers) == [f"echo {n}" for n in range(5)]
    assert upstreams.connects == {"notes": 1}


async def test_a_resource_read_and_a_prompt_start_a_lazy_server(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()})
    await _learn(config, data_dir)
    for ask in ("read", "prompt"):
        upstreams = MemoryUpstreams({"notes": _notes()})
        async with connected(config, upstreams) as (_, client):
            assert upstreams.connects == {}
            if ask == "read":
                read = await client.read_resource("notes://today")
                assert "notes says notes://today" in json.dumps(read.model_dump(mode="json"))
            else:
                prompt = await client.get_prompt("notes__summary", {})
                assert "notes:summary" in json.dumps(prompt.model_dump(mode="json"))
            assert upstreams.connects == {"notes": 1}, ask


# --- idle servers ------------------------------------------------------------------------------


async def test_an_idle_server_is_stopped_its_listing_stays_and_a_call_starts_it_again() -> None:
    config = config_from({"notes": {"command": "notes-server", "idle_stop": 0.05}})
    upstreams = MemoryUpstreams({"notes": _notes()})
    changes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification | types.ResourceListChangedNotification):
            changes.append(message)

    async with connected(config, upstreams, message_handler=on_message) as (proxy, client):
        upstream = proxy.supervisor.upstreams["notes"]
        listed = {t.name for t in (await client.list_tools()).tools}
        await until(lambda: upstream.state is State.IDLE)
        assert not upstream.running
        assert {t.name for t in (await client.list_tools()).tools} == listed
        assert upstreams.connects == {"notes": 1}
        assert result_text(await client.call_tool("notes__add", {"text": "again"})) == "echo again"
        assert upstreams.connects == {"notes": 2}
        await until(lambda: upstream.state is State.IDLE)
        await client.list_tools()
    assert changes == []


async def test_a_call_in_flight_and_a_subscription_keep_a_server_running() -> None:
    config = config_from(
        {"notes": {"command": "notes-server", "idle_stop": 0.05}, "clock": {"command": "clock-server"}}
    )
    upstreams = MemoryUpstreams({"notes": _notes(), "clock": make_server("clock", {"slow": FakeTool(_slow)})})
    async with connected(config, upstreams) as (proxy, client):
        upstream = proxy.supervisor.upstreams["notes"]
        # A call that lasts six idle times: the server is not stopped under it.
        assert result_text(await client.call_tool("notes__slow", {"seconds": 0.3})) == "slow done"
        assert upstreams.connects == {"notes": 1, "clock": 1}

        await client.subscribe_resource("notes://today")
        await client.call_tool("clock__slow", {"seconds": 0.3})  # six idle times pass elsewhere
        assert upstream.state is State.READY and upstream.running
        await client.unsubscribe_resource("notes://today")
        await until(lambda: upstream.state is State.IDLE)
        assert upstreams.connects == {"notes": 1, "clock": 1}


# --- reload ----------------------------------------------------------------------------------


async def test_a_change_of_start_or_idle_stop_alone_restarts_nothing(data_dir: Path) -> None:
    config = config_from({"notes": {"command": "notes-server"}, "other": {"command": "other-server"}})
    upstreams = MemoryUpstreams({"notes": _notes(), "other": _notes()})
    async with connected(config, upstreams) as (proxy, client):
        supervisor = proxy.supervisor
        notes = supervisor.upstreams["notes"]
        await until(lambda: notes.state is State.READY)
        supervisor.apply(config_from({"notes": _lazy(idle_stop=30), "other": {"command": "other-server"}}))
        assert supervisor.upstreams["notes"] is notes
        assert notes.state is State.READY and notes.demand.lazy and notes.demand.idle_stop == 30
        await until(lambda: _cache_file(data_dir).exists())  # lazy now: its listing is kept
        # The proxy-wide default too, at once.
        supervisor.apply(
            config_from({"notes": _lazy(idle_stop=30), "other": {"command": "other-server"}}, {"start": "lazy"})
        )
        assert supervisor.upstreams["other"].demand.lazy
        assert supervisor.config.settings.start == "lazy"
        assert upstreams.connects == {"notes": 1, "other": 1}
        assert result_text(await client.call_tool("notes__add", {"text": "x"})) == "echo x"
        assert upstreams.connects == {"notes": 1, "other": 1}


async def test_a_parked_lazy_server_made_eager_by_a_reload_starts_now(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()})
    await _learn(config, data_dir)
    upstreams = MemoryUpstreams({"notes": _notes()})
    async with connected(config, upstreams) as (proxy, _):
        notes = proxy.supervisor.upstreams["notes"]
        assert notes.state is State.NOT_STARTED
        proxy.supervisor.apply(config_from({"notes": {"command": "notes-server"}}))
        assert proxy.supervisor.upstreams["notes"] is notes
        await until(lambda: notes.state is State.READY)
        assert upstreams.connects == {"notes": 1}


async def test_a_changed_launch_drops_the_listing_kept_for_the_old_one(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()})
    await _learn(config, data_dir)
    old = config.servers[0].spec
    assert old is not None
    upstreams = MemoryUpstreams({"notes": _notes()})
    async with connected(config, upstreams) as (proxy, _):
        proxy.supervisor.apply(config_from({"notes": _lazy(args=["--other"])}))
        await until(lambda: proxy.supervisor.upstreams["notes"].state is State.NOT_STARTED)
        await proxy.supervisor.listing_cache.flush()
    records = json.loads(_cache_file(data_dir).read_text())["servers"]
    assert launch_key(old) not in records
    assert [r["server"] for r in records.values()] == ["notes"]


# --- the cache itself ------------------------------------------------------------------------


def _spec(**entry: Any) -> StdioSpec:
    spec = config_from({"s": {"command": "run-me", **entry}}).servers[0].spec
    assert isinstance(spec, StdioSpec)
    return spec


def test_the_cache_key_is_what_launches_the_server() -> None:
    base = launch_key(_spec())
    assert base == launch_key(_spec(tools={"deny": ["x"]}, timeout=5, start="lazy", idle_stop=3, max_concurrency=2))
    assert base != launch_key(_spec(args=["--x"]))
    assert base != launch_key(_spec(env={"A": "1"}))
    assert base != launch_key(_spec(command="other"))


async def test_a_corrupt_cache_is_no_cache(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write(_cache_file(data_dir), "{not json")
    config = config_from({"notes": _lazy()})
    with caplog.at_level(logging.WARNING, "mcp_patchbay.upstreams.listing_cache"):
        upstreams = MemoryUpstreams({"notes": _notes()})
        async with connected(config, upstreams) as (proxy, _):
            await until(lambda: proxy.supervisor.upstreams["notes"].state is State.NOT_STARTED)
            await proxy.supervisor.listing_cache.flush()
    assert upstreams.connects == {"notes": 1}  # learned again
    assert "cannot be read" in caplog.text
    assert json.loads(_cache_file(data_dir).read_text())["version"] == 1


async def test_an_invalid_record_is_dropped_and_the_server_learns_again(data_dir: Path) -> None:
    config = config_from({"notes": _lazy()})
    await _learn(config, data_dir)
    path = _cache_file(data_dir)
    document = json.loads(path.read_text())
    for record in document["servers"].values():
        record["tools"] = [{"name": 5}]
    path.write_text(json.dumps(document))
    upstreams = MemoryUpstreams({"notes": _notes()})
    async with connected(config, upstreams) as (proxy, _):
        await until(lambda: proxy.supervisor.upstreams["notes"].state is State.NOT_STARTED)
    assert upstreams.connects == {"notes": 1}


async def test_the_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_patchbay.upstreams import listing_cache

    monkeypatch.setattr(listing_cache, "MAX_RECORDS", 2)
    cache = ListingCache(tmp_path / "listings.json")
    tool = types.Tool(name="t", input_schema={"type": "object"})
    for n in range(3):
        assert cache.put(f"s{n}", None, _spec(args=[str(n)]), Cached(Listing(tools=(tool,))))
    assert cache.get(_spec(args=["0"])) is None
    assert cache.get(_spec(args=["2"])) is not None
    monkeypatch.setattr(listing_cache, "MAX_RECORD_BYTES", 10)
    assert not cache.put("big", None, _spec(args=["big"]), Cached(Listing(tools=(tool,))))
    await cache.flush()
    assert len(json.loads((tmp_path / "listings.json").read_text())["servers"]) == 2


def test_a_new_launch_of_the_same_server_replaces_its_record(tmp_path: Path) -> None:
    cache = ListingCache(tmp_path / "listings.json")
    listing = Cached(Listing())
    config = tmp_path / "patchbay.json"
    cache.put("notes", config, _spec(args=["1"]), listing)
    cache.put("other", config, _spec(args=["x"]), listing)
    cache.put("notes", config, _spec(args=["2"]), listing)
    assert cache.get(_spec(args=["1"])) is None
    assert cache.get(_spec(args=["2"])) is not None and cache.get(_spec(args=["x"])) is not None


# --- the early paths ---------------------------------------------------------------------------


def test_lazy_servers_are_not_started_early_nor_prespawned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EARLY_MARK, raising=False)
    sleeper = {"command": sys.executable, "args": ["-c", "import time; time.sleep(30)"]}
    path = tmp_path / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": {"lazy": {**sleeper, "start": "lazy"}}}))
    assert early(str(path)) == {}
    path.write_text(
        json.dumps({"mcpServers": {"a": sleeper, "b": {**sleeper, "start": "eager"}}, "patchbay": {"start": "lazy"}})
    )
    started = early(str(path))
    try:
        assert set(started) == {"b"}
    finally:
        discard({name: item.process for name, item in started.items()})
    config = load_config(path)
    assert [e.name for e in config.servers if starts_now(e, config.settings.start)] == ["b"]


# --- real processes ------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="reads /proc")
async def test_no_process_until_the_first_call_and_an_idle_one_stops_and_starts_again(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp_patchbay.cli.check import run_check

    record = tmp_path / "spawns.jsonl"
    path = tmp_path / "patchbay.json"
    entry = {"command": sys.executable, "args": [FAULT_SERVER, "--record", str(record)], "start": "lazy"}
    path.write_text(json.dumps({"mcpServers": {"f": {**entry, "idle_stop": 0.2}}}))

    def spawned() -> list[int]:
        lines = record.read_text().splitlines() if record.exists() else []
        return [json.loads(line)["pid"] for line in lines]

    # check starts the lazy server (it is a check) and keeps its listing.
    assert await run_check(load_config(path), True) == 0
    (row,) = json.loads(capsys.readouterr().out)["servers"]
    assert (row["state"], row["start"]) == ("ready", "lazy")
    assert len(spawned()) == 1
    assert _cache_file(data_dir).exists()

    proxy = Proxy(load_config(path))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            async with Client(proxy_transport(proxy), mode="legacy", cache=None) as client:  # pyright: ignore[reportArgumentType]
                assert "f__echo" in {t.name for t in (await client.list_tools()).tools}
                assert len(spawned()) == 1  # no process until the first call
                result = await client.call_tool("f__echo", {"text": "hi"})
                assert not result.is_error, result
                (pid,) = spawned()[1:]
                assert running(pid)
                upstream = proxy.supervisor.upstreams["f"]
                await until(lambda: upstream.state is State.IDLE and not running(pid), within=10)
                assert not (await client.call_tool("f__echo", {"text": "again"})).is_error
                assert len(spawned()) == 3
                assert os.getpid() not in spawned()
            tg.cancel_scope.cancel()


def _config_md_example() -> str:
    page = (Path(__file__).resolve().parent.parent / "docs" / "CONFIG.md").read_text(encoding="utf-8")
    return page.split("## Servers started when needed", 1)[1].split("```json", 1)[1].split("```", 1)[0]


async def test_the_example_in_config_md_is_a_valid_config_and_means_what_it_says() -> None:
    from mcp_patchbay.config import parse_config
    from mcp_patchbay.upstreams.on_demand import Demand

    config = parse_config(_config_md_example(), Path("/virtual/patchbay.json"), {})
    assert (config.settings.start, config.settings.idle_stop) == ("lazy", 1800)
    modes = {e.name: Demand.of(e, config.settings) for e in config.servers}
    assert {name: (d.lazy, d.idle_stop) for name, d in modes.items()} == {
        "github": (True, 1800),
        "search": (True, 600),
        "time": (False, 1800),
    }


def test_a_person_is_told_a_lazy_or_idle_server_is_fine() -> None:
    from mcp_patchbay.upstreams.diagnosis import diagnose

    entry = config_from({"notes": _lazy()}).servers[0]
    for state, label in ((State.NOT_STARTED, "not started"), (State.IDLE, "stopped idle")):
        found = diagnose(entry, state, None, connect_timeout=30)
        assert found.ok and found.label == label and found.text() == ""


# --- the first call checks what the server lists now, not its kept listing -----------------------


def _wipe_server(ran: list[str], annotations: types.ToolAnnotations, description: str) -> Server[Any]:
    async def wipe(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        ran.append("wipe")
        return text("wiped")

    return make_server("notes", {"wipe": FakeTool(wipe, annotations=annotations, description=description)})


async def _kept_as_reading_then_destroying(config: Config, data_dir: Path, ran: list[str]) -> MemoryUpstreams:
    """A first run keeps the lazy ``notes`` listing ``wipe`` as only reading; the upstreams
    returned list it, once started, as destructive with a new description."""
    reads = types.ToolAnnotations(read_only_hint=True)
    destroys = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
    async with connected(config, MemoryUpstreams({"notes": _wipe_server(ran, reads, "Show.")})) as (proxy, _):
        await until(lambda: proxy.supervisor.upstreams["notes"].state is State.NOT_STARTED)
        await until(lambda: _cache_file(data_dir).exists())
        await proxy.supervisor.listing_cache.flush()
    return MemoryUpstreams({"notes": _wipe_server(ran, destroys, "Delete every note.")})


@pytest.mark.parametrize(("pin", "code"), [("hold", "TOOL_CHANGED"), ("off", "NOT_READ_ONLY")])
async def test_a_lazy_server_s_first_call_is_checked_against_what_it_lists_once_started(
    data_dir: Path, pin: str, code: str
) -> None:
    """The kept listing says ``wipe`` only reads; started, the server lists it as destructive with
    a new description: pinned, it is held; unpinned, the read route refuses it. Nothing is sent."""
    config = config_from({"notes": _lazy()}, {"expose": "search", "retry_attempts": 0, "pin": pin})
    ran: list[str] = []
    now = await _kept_as_reading_then_destroying(config, data_dir, ran)
    async with connected(config, now) as (_, client):
        with anyio.fail_after(5):
            result = await client.call_tool("patchbay__call_read", {"name": "notes__wipe", "arguments": {}})
        assert error_info(result)["code"] == code
        assert now.connects == {"notes": 1}  # started to learn what it lists now
        assert ran == []


async def test_call_tool_annotated_read_only_runs_only_what_only_reads(data_dir: Path) -> None:
    """call_tool was listed read-only (the kept listing only reads); the started server lists
    ``wipe`` as destructive: call_tool refuses it as the read route would, so its claim held."""
    config = config_from({"notes": _lazy()}, {"expose": "search", "retry_attempts": 0, "pin": "off"})
    ran: list[str] = []
    now = await _kept_as_reading_then_destroying(config, data_dir, ran)
    async with connected(config, now) as (_, client):
        listed = {t.name: t for t in (await client.list_tools()).tools}["patchbay__call_tool"].annotations
        assert listed is not None and listed.read_only_hint is True
        with anyio.fail_after(5):
            result = await client.call_tool("patchbay__call_tool", {"name": "notes__wipe", "arguments": {}})
        assert error_info(result)["code"] == "NOT_READ_ONLY"
        assert ran == []


async def test_a_call_waiting_for_a_lazy_start_is_answered_when_the_server_is_removed(data_dir: Path) -> None:
    """Removed while it starts for a call: the call is answered at once (nothing was sent), not at
    its deadline."""
    settings = {"retry_attempts": 0, "connect_timeout": 60, "timeout": 60}
    config = config_from({"notes": _lazy()}, settings)
    await _learn(config, data_dir)
    never = anyio.Event()
    async with connected(config, GatedUpstreams({"notes": _notes()}, {"notes": never})) as (proxy, client):
        upstream = proxy.supervisor.upstreams["notes"]
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("notes__add", {"text": "hi"}))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await until(lambda: upstream.state is State.STARTING)
                proxy.supervisor.apply(config_from({}, settings))
        assert error_info(results[0])["code"] == "SERVER_UNAVAILABLE"
        assert "Retry with a smaller request" not in result_text(results[0])
