"""The last listing of each lazy server, kept in the data folder so the proxy can serve it
without starting the server (``upstreams.on_demand``).

One file, ``places.data_dir()/listings.json`` (0600, written whole and atomically: a
temporary file renamed over it), holding per server its tools, resources, templates and
prompts as the server listed them, and what its ``initialize`` said (capabilities, server
info, instructions). A record is keyed by a hash of what launches the server (the entry's
keys less those that only shape what the proxy makes of it: ``tools``, timeouts, ``start``,
``idle_stop`` ...), so a changed entry finds no record and is started once to learn its list;
the record of that config's server under its old launch is dropped then (and at a reload).

Bounded: at most ``MAX_RECORDS`` records (the most recently stored kept), a record over
``MAX_RECORD_BYTES`` is not kept (its server is started to learn its list at every start), a
file over ``MAX_FILE_BYTES`` is not read. A file that cannot be read or parsed, or a record
that does not validate, is no cache: logged, and the servers concerned learn their lists
again. Never fails its caller.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread
import mcp_types as types

from mcp_patchbay import places
from mcp_patchbay.bounded_read import read_bytes
from mcp_patchbay.config import RemoteSpec, StdioSpec
from mcp_patchbay.config.models import SpecBase
from mcp_patchbay.upstreams.listing import Listing

__all__ = ["MAX_FILE_BYTES", "MAX_RECORDS", "MAX_RECORD_BYTES", "Cached", "ListingCache", "launch_key"]

logger = logging.getLogger(__name__)

FILE_NAME = "listings.json"
VERSION = 1
MAX_RECORDS = 200
"""Servers whose listing is kept (the least recently stored is dropped past this)."""
MAX_RECORD_BYTES = 4 * 1024 * 1024
"""Largest listing kept for one server, as JSON."""
MAX_FILE_BYTES = 32 * 1024 * 1024
"""A larger file is not read (no cache)."""

_NOT_LAUNCH = frozenset(SpecBase.model_fields)
"""The keys every entry takes (filters, timeouts, start modes, ...): none changes what the server lists."""


def launch_key(spec: StdioSpec | RemoteSpec) -> str:
    """A hash of what launches the server and how it is reached (the record's key)."""
    launch = spec.model_dump(mode="json", exclude=set(_NOT_LAUNCH))
    text = json.dumps(launch, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Cached:
    """A server's last listing and what its ``initialize`` said."""

    listing: Listing
    capabilities: types.ServerCapabilities | None = None
    server_info: types.Implementation | None = None
    instructions: str | None = None


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def _record(server: str, config: str, cached: Cached) -> dict[str, Any]:
    listing = cached.listing
    return {
        "server": server,
        "config": config,
        "at": time.time(),
        "tools": [_dump(t) for t in listing.tools],
        "resources": [_dump(r) for r in listing.resources],
        "templates": [_dump(t) for t in listing.templates],
        "prompts": [_dump(p) for p in listing.prompts],
        "capabilities": _dump(cached.capabilities) if cached.capabilities is not None else None,
        "server_info": _dump(cached.server_info) if cached.server_info is not None else None,
        "instructions": cached.instructions,
    }


def _parse(record: dict[str, Any]) -> Cached:
    """A stored record as values; raises (ValueError, TypeError, pydantic's) on a bad one."""
    listing = Listing(
        tools=tuple(types.Tool.model_validate(t) for t in record["tools"]),
        resources=tuple(types.Resource.model_validate(r) for r in record["resources"]),
        templates=tuple(types.ResourceTemplate.model_validate(t) for t in record["templates"]),
        prompts=tuple(types.Prompt.model_validate(p) for p in record["prompts"]),
    )
    capabilities, info, instructions = record["capabilities"], record["server_info"], record["instructions"]
    if instructions is not None and not isinstance(instructions, str):
        raise TypeError("instructions is not a string")
    return Cached(
        listing,
        types.ServerCapabilities.model_validate(capabilities) if capabilities is not None else None,
        types.Implementation.model_validate(info) if info is not None else None,
        instructions,
    )


class ListingCache:
    """The file's records in memory: read once (``load``), changed in memory, written by ``flush``."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._records: dict[str, dict[str, Any]] | None = None
        self._dirty = False
        self._lock: anyio.Lock | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = places.data_dir() / FILE_NAME
        return self._path

    def load(self) -> None:
        """Read the file (once); a missing one is an empty cache, a bad one too (logged)."""
        if self._records is not None:
            return
        self._records = {}
        path = self.path
        try:
            document = json.loads(read_bytes(path, MAX_FILE_BYTES, "the saved listings"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            logger.warning("listing cache %s cannot be read (%s): the lazy servers learn their lists again", path, exc)
            return
        found = cast("dict[str, Any]", document) if isinstance(document, dict) else {}
        records = found.get("servers")
        if found.get("version") != VERSION or not isinstance(records, dict):
            logger.warning(
                "listing cache %s is not in the expected form: the lazy servers learn their lists again", path
            )
            return
        self._records = {
            key: cast("dict[str, Any]", record)
            for key, record in cast("dict[str, Any]", records).items()
            if isinstance(record, dict)
        }

    def get(self, spec: StdioSpec | RemoteSpec) -> Cached | None:
        """The last listing of the server ``spec`` launches, if kept and valid."""
        self.load()
        assert self._records is not None
        key = launch_key(spec)
        record = self._records.get(key)
        if record is None:
            return None
        try:
            return _parse(record)
        except Exception as exc:  # a record edited by hand, or from another version
            logger.warning("listing cache: a record is invalid (%s); its server learns its list again", exc)
            del self._records[key]
            return None

    def put(self, server: str, config: Path | None, spec: StdioSpec | RemoteSpec, cached: Cached) -> bool:
        """Keep ``cached`` for the server ``spec`` launches, in place of the record of the same
        config's same server under another launch; whether anything is to be written."""
        self.load()
        assert self._records is not None
        where = str(config) if config is not None else ""
        record = _record(server, where, cached)
        size = len(json.dumps(record))
        if size > MAX_RECORD_BYTES:
            logger.warning(
                "listing of server '%s' is %d bytes, over %d: not cached (it is started to learn it at each start)",
                server,
                size,
                MAX_RECORD_BYTES,
            )
            return False
        key = launch_key(spec)
        for other, kept in list(self._records.items()):
            if other != key and kept.get("server") == server and kept.get("config") == where:
                del self._records[other]
        self._records.pop(key, None)  # re-inserted last: the newest
        self._records[key] = record
        while len(self._records) > MAX_RECORDS:
            del self._records[next(iter(self._records))]
        self._dirty = True
        return True

    def drop(self, spec: StdioSpec | RemoteSpec) -> bool:
        """Forget the record of the server ``spec`` launches (its entry changed); whether there was one."""
        self.load()
        assert self._records is not None
        dropped = self._records.pop(launch_key(spec), None) is not None
        self._dirty = self._dirty or dropped
        return dropped

    async def flush(self) -> None:
        """Write what changed since the last write, in a thread; returns once it is written (one
        write at a time: a change made while one runs is written by the next)."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if not self._dirty:
                return
            self._dirty = False
            records = dict(self._records or {})
            await anyio.to_thread.run_sync(self._write, records)

    def _write(self, records: dict[str, dict[str, Any]]) -> None:
        text = json.dumps({"version": VERSION, "servers": records}, ensure_ascii=False)
        try:
            places.write_private(self.path, text)
        except OSError as exc:
            logger.warning("could not write the listing cache %s: %s", self.path, exc)
