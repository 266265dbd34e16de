"""What ``install`` did, kept so ``uninstall`` can undo it: ``installs.json`` in the proxy's data folder.

One :class:`Record` per install: the client, its file, the entry's name, the backup taken (None
when the file did not exist), the file's sha256 right after the install, and the entries
it took out or replaced. ``uninstall`` restores the backup byte for byte while the file still has
that sha256, and otherwise edits out only the proxy's entry. The file is written atomically.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePath
from typing import Any, Literal, cast

from mcp_patchbay.bounded_read import DATA_FILE_BYTES, FileRefused, read_text
from mcp_patchbay.clients.files import write_atomic
from mcp_patchbay.clients.locations import Place

__all__ = ["RECORDS_NAME", "Record", "load_records", "save_records"]

RECORDS_NAME = "installs.json"


@dataclass(frozen=True)
class Record:
    client: str
    file: str
    name: str
    backup: str | None
    """The copy taken before the install; None: the install created the file."""
    sha256: str
    """The file's digest right after the install."""
    when: str
    removed: dict[str, Any] = field(default_factory=dict[str, Any])
    """The entries install took out (``--replace``) or replaced (an earlier proxy entry of the same
    name), to be put back when the file has changed since."""
    format: Literal["json", "toml"] = "json"
    keys: list[str] = field(default_factory=lambda: ["mcpServers"])
    """Where the servers are in the file (``locations.Place.keys``)."""

    @property
    def place(self) -> Place:
        """The place the entry was written to (the project then may not be the current one)."""
        return Place(self.client, PurePath(self.file), self.format, tuple(self.keys), "user")


def load_records(path: Path) -> list[Record]:
    """The records in ``path`` (none when it does not exist); a damaged file raises ``ValueError``."""
    try:
        data: object = json.loads(read_text(path, DATA_FILE_BYTES, "the install records"))
    except FileNotFoundError:
        return []
    except FileRefused as exc:
        raise ValueError(f"{path}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not the JSON install wrote ({exc})") from None
    items = cast("dict[str, Any]", data).get("installs") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"{path}: no 'installs' list")
    records: list[Record] = []
    for item in cast("list[object]", items):
        try:
            records.append(Record(**cast("dict[str, Any]", item)))
        except TypeError:
            continue  # a record of another version; the rest still count
    return records


def save_records(path: Path, records: list[Record]) -> None:
    text = json.dumps({"installs": [asdict(r) for r in records]}, indent=2, ensure_ascii=False) + "\n"
    write_atomic(path, text.encode("utf-8"))
