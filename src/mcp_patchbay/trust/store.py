"""Where pins are kept: ``pins.json`` in the proxy's data folder, beside the sign-in tokens.

One file for every config and server (``places.data_dir()``: ``$XDG_DATA_HOME/mcp-patchbay``
on Linux), with the care of ``oauth.store``: mode 0600 in a folder of mode 0700, written
whole (a temporary file renamed over the old one), read back bounded (``MAX_FILE_BYTES``).

Keyed per server entry: ``entry_key(config_path, server)`` hashes the config file's absolute
path (not symlink-resolved: a Kubernetes ConfigMap mounts the file through a ``..data``
symlink whose target changes with every update) and the server's name, so two configs never
approve for each other. What launches the server is recorded for a person, not keyed: keyed,
a changed launch (``pkg@1`` to ``pkg@2``, exactly when definitions change) would look like a
first sight and pin the new definitions unreviewed.

Several processes share the file (stdio proxies of several clients, the ``trust`` command,
gateway replicas on a shared volume): every change is a read-modify-write under an exclusive
lock on ``pins.json.lock`` (``locking``), looking at the file again once the lock is held: it
is opened and, unless it is the very file this store last read or wrote (the same inode,
size and modification time, from the opened file's ``fstat``), read again. ``update_many``
changes several records under one lock with one write: a proxy pins every server first seen
in one catalog rebuild at once. A file that cannot be read as pins (not JSON, too large)
raises ``PinsUnreadable`` and is never written over: the caller reports it and a person moves
it aside.

Reads outside the lock (``record``, ``load``: what a serving proxy decides from when it has
nothing to write) are answered from the last read while the file's version (a ``stat``) is
the same, so a catalog rebuild costs a ``stat`` per server, not a parse of the file;
``last_record`` answers from that last read, never reading (the event loop's question).

``MemoryPinStore`` keeps the same records in memory, for a config that is no file (built in
memory: tests, an embedding program): there is no path to key them by, so they last as long
as the proxy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, cast

from mcp_patchbay import places
from mcp_patchbay.bounded_read import FileRefused, read_changed
from mcp_patchbay.trust.decide import Pending, Pin, ServerPins
from mcp_patchbay.trust.locking import locked

logger = logging.getLogger(__name__)

__all__ = [
    "FILE_NAME",
    "MAX_FILE_BYTES",
    "MemoryPinStore",
    "PinStore",
    "PinsFull",
    "PinsUnreadable",
    "default_path",
    "entry_key",
]

FILE_NAME = "pins.json"
_Item = TypeVar("_Item", Pin, Pending)
Change = Callable[["ServerPins | None"], "ServerPins | None"]
"""A record as the file has it now (None: none yet) to the record to keep (the same pins, or
None: nothing to write)."""
Version = tuple[int, int, int]
"""A file's modification time (ns), inode and size: each write renames a new file over the old
one, so the inode changes even within the clock's step."""
MAX_FILE_BYTES = 16 * 1024 * 1024
"""The largest pins file read or written. Real servers' definitions are 0.5 to 5 KB each (the
largest in the search benchmark's catalog, 30 KB): some thousands of tools fit many times. A write
that would pass it cuts the server it changes to fingerprints only; still too large, it is not
written (``PinsFull``) and that server's changes are held: other servers' records never give way."""
MAX_DEFINITION_BYTES = 64 * 1024
"""The largest definition kept whole in a record (twice the largest real one seen); a larger
one, approved or pending, is kept as its fingerprint only."""
MAX_WHOLE_DEFINITIONS = 2000
"""Definitions of one kind kept whole per server record; past it, fingerprints only."""
FORMAT = 1


class PinsUnreadable(Exception):
    """The pins file exists and is not pins: reported, never emptied."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"the pins file {path} cannot be used ({why}); move it aside to start pinning afresh")
        self.path = path
        self.why = why


class PinsFull(PinsUnreadable):
    """A server's record does not fit in the file, even as fingerprints: nothing is written, and
    that server's changes and new definitions are held (``guard``); the other records stay."""

    def __init__(self, path: Path, why: str) -> None:
        Exception.__init__(self, f"the pins file {path} has no room for this server ({why})")
        self.path = path
        self.why = why


def default_path() -> Path:
    from mcp_patchbay import places

    return places.data_dir() / FILE_NAME


def entry_key(config_path: str | os.PathLike[str], server: str) -> str:
    """The store's key of one server entry of one config file."""
    where = os.path.normcase(os.path.normpath(Path(config_path).absolute()))  # never resolved: see above
    return hashlib.sha256(f"{where}\0{server}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


class PinStore:
    """The pins file. Reads are answered from the last read while the file is the same; every
    change locks it, reads it when another process changed it, and writes it."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        max_bytes: int = MAX_FILE_BYTES,
        write: Callable[[Path, str], None] = places.write_private,
    ) -> None:
        """``write`` puts the file's whole text in place (``places.write_private``: a private file
        renamed over the old one); a program embedding the proxy may wrap it, to audit each write."""
        self.path = path or default_path()
        self.max_bytes = max_bytes
        self.write = write
        self._version: Version | None = None
        self._last: tuple[Version | None, dict[str, ServerPins]] | None = None
        """The file's version (None: there was none) and its records, as last read or written
        (``_cached``); replaced whole, never changed in place, so the event loop may read it while
        a worker thread writes."""

    # --- reading ------------------------------------------------------------------------------

    def load(self) -> dict[str, ServerPins]:
        """Every record, by key ({} when there is no file); ``PinsUnreadable`` when it is not pins."""
        return self._cached()

    def record(self, key: str) -> ServerPins | None:
        return self._cached().get(key)

    def last_record(self, key: str) -> tuple[bool, ServerPins | None]:
        """The record as this store last read or wrote it (None: none, or nothing read yet), and
        whether the file is still that one (a ``stat``, nothing read)."""
        last = self._last
        if last is None:
            return False, None
        return last[0] == self._stat(), last[1].get(key)

    def version(self) -> Version | None:
        """The file's version now (a stat: time, inode, size; None when there is none)."""
        return self._stat()

    def changed(self) -> bool:
        """The file changed since this store last read or wrote it (another process approved, or
        pinned): poll it (a stat, no read) and review the servers' listings again when True."""
        return self._stat() != self._version

    # --- changing -------------------------------------------------------------------------------

    def update(self, key: str, change: Change) -> ServerPins | None:
        """Read-modify-write of one record under the lock: ``change`` gets the record as the file
        has it now and returns the new one (the same pins: nothing is written)."""
        return self.update_many({key: change})[key]

    def update_many(self, changes: Mapping[str, Change]) -> dict[str, ServerPins | None]:
        """``update`` of several records under one lock, with one write at most (none when every
        change keeps the same pins): each key's record as kept (or as ``change`` returned it).
        ``PinsFull`` when they do not all fit: nothing of them is written."""
        with self._locked():
            records = self._current()
            kept: dict[str, ServerPins | None] = {}
            grown: list[str] = []
            for key, change in changes.items():
                before = records.get(key)
                after = change(before)
                if after is None or (before is not None and after.same_pins(before)):
                    kept[key] = after
                    continue
                records[key] = kept[key] = _record_bounded(after)
                grown.append(key)
            if grown:
                self._write(records, grown)
            return kept

    # --- the file -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Generator[None]:
        self._folder()
        with locked(self.path.with_name(self.path.name + ".lock")):
            yield

    def _folder(self) -> None:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.name != "nt" and folder.stat().st_mode & 0o077:
            folder.chmod(0o700)  # ours alone, whoever made it (mkdir's mode obeys the umask)

    def _stat(self) -> Version | None:
        try:
            status = self.path.stat()
        except OSError:
            return None
        return _version_of(status)

    def _cached(self) -> dict[str, ServerPins]:
        """The records, read again only when the file's version changed since the last read."""
        last = self._last
        if last is not None and last[0] == self._stat():
            self._version = last[0]
            return dict(last[1])
        return self._read()

    def _read(self) -> dict[str, ServerPins]:
        return self._read_file(reuse=False)

    def _current(self) -> dict[str, ServerPins]:
        """The records under the lock: read again only when the file is not the one last read or
        written here (another process wrote it since)."""
        return self._read_file(reuse=True)

    def _read_file(self, *, reuse: bool) -> dict[str, ServerPins]:
        last = self._last

        def known(status: os.stat_result) -> bool:
            return reuse and last is not None and _version_of(status) == last[0]

        try:
            status, raw = read_changed(self.path, self.max_bytes, "the pins file", known)
        except FileNotFoundError:
            self._version = None
            self._last = (None, {})
            return {}
        except FileRefused as exc:  # a directory, a device, a FIFO; or larger than max_bytes
            raise PinsUnreadable(self.path, exc.why) from None
        except OSError as exc:
            raise PinsUnreadable(self.path, exc.strerror or type(exc).__name__) from None
        version = _version_of(status)
        if raw is None and last is not None:
            self._version = version
            return dict(last[1])
        try:
            data = json.loads((raw or b"").decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(cast("dict[str, Any]", data).get("servers"), dict):
                raise ValueError("no 'servers' object")
            servers = cast("dict[str, Any]", cast("dict[str, Any]", data)["servers"])
            records = {str(key): ServerPins.from_json(value) for key, value in servers.items()}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise PinsUnreadable(self.path, f"not a pins file: {exc}") from None
        self._version = version
        self._last = (version, dict(records))
        return records

    def _write(self, records: Mapping[str, ServerPins], grown: Sequence[str] = ()) -> None:
        kept = dict(records)
        text = self._bounded(kept, grown)
        self.write(self.path, text)
        self._version = self._stat()
        self._last = None if self._version is None else (self._version, kept)

    def _bounded(self, records: dict[str, ServerPins], grown: Sequence[str]) -> str:
        """The file's text within ``max_bytes``. Only the records in ``grown`` (the ones this write
        changes) give way, the last changed first: each cut to its fingerprints until the text fits;
        still too large, nothing is written (``PinsFull``): another server's record is never dropped
        because one server grew."""
        text = _dumps(records)
        for key in reversed(grown):
            if len(text.encode()) <= self.max_bytes:
                return text
            records[key] = _fingerprints_only(records[key])
            logger.warning(
                "pins: server '%s' is kept as fingerprints only, to keep the file within %s bytes",
                _escaped(records[key].server),
                f"{self.max_bytes:,}",
            )
            text = _dumps(records)
        if len(text.encode()) > self.max_bytes:
            raise PinsFull(self.path, f"it would grow past {self.max_bytes:,} bytes")
        return text


class MemoryPinStore(PinStore):
    """Pins kept in memory, for a config that is no file (see the module's docstring): the same
    records and rules, no file, no lock (one process)."""

    def __init__(self) -> None:
        super().__init__(Path("<memory>"))
        self._records: dict[str, ServerPins] = {}
        self._writes = 0

    @contextlib.contextmanager
    def _locked(self) -> Generator[None]:
        yield

    def _stat(self) -> Version | None:
        return (self._writes, 0, 0) if self._writes else None

    def last_record(self, key: str) -> tuple[bool, ServerPins | None]:
        return True, self._records.get(key)

    def _read(self) -> dict[str, ServerPins]:
        self._version = self._stat()
        return dict(self._records)

    def _cached(self) -> dict[str, ServerPins]:
        return self._read()

    def _current(self) -> dict[str, ServerPins]:
        return self._read()

    def _write(self, records: Mapping[str, ServerPins], grown: Sequence[str] = ()) -> None:
        self._records = dict(records)
        self._writes += 1
        self._version = self._stat()


def _version_of(status: os.stat_result) -> Version:
    return (status.st_mtime_ns, status.st_ino, status.st_size)


def _dumps(records: Mapping[str, ServerPins]) -> str:
    """The file's text: one line per server record, compact. Indented JSON goes through the
    standard library's Python encoder, and each first sight rewrites the whole file: 35 servers
    pinned at a first start cost 1.5 s on the event loop that way, most of it in ``json``."""
    lines = ",\n".join(f"  {_compact(key)}: {_compact(records[key].as_json())}" for key in sorted(records))
    return f'{{"format": {_compact(FORMAT)}, "servers": {{\n{lines}\n}}}}\n'


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _fingerprints_only(record: ServerPins) -> ServerPins:
    approved = {
        kind: {name: replace(pin, definition={}) for name, pin in pins.items()}
        for kind, pins in record.approved.items()
    }
    pending = {
        kind: {name: replace(item, definition={}) for name, item in items.items()}
        for kind, items in record.pending.items()
    }
    return replace(record, approved=approved, pending=pending)


def _record_bounded(record: ServerPins) -> ServerPins:
    """One record within its bounds: a definition over ``MAX_DEFINITION_BYTES``, or past the
    first ``MAX_WHOLE_DEFINITIONS`` of its kind, is kept as its fingerprint only (its diff can no
    longer be shown; what is approved or held is the same)."""

    def cut(items: Mapping[str, _Item]) -> dict[str, _Item]:
        kept: dict[str, _Item] = {}
        for index, (name, item) in enumerate(sorted(items.items())):
            whole = index < MAX_WHOLE_DEFINITIONS and _size(item.definition) <= MAX_DEFINITION_BYTES
            kept[name] = item if whole or not item.definition else replace(item, definition={})
        return kept

    approved = {kind: cut(pins) for kind, pins in record.approved.items()}
    pending = {kind: cut(items) for kind, items in record.pending.items()}
    return replace(record, approved=approved, pending=pending)


def _size(definition: Mapping[str, Any]) -> int:
    return len(json.dumps(definition, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _escaped(text: str) -> str:
    return repr(text)[1:-1]
