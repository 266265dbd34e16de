"""Where each MCP client keeps its servers, on Linux, macOS and Windows: the one location table.

Every OS-specific path of another client lives here (the proxy's own paths are ``places``').
Nothing is read from the process: the platform, the environment (``HOME``, ``USERPROFILE``,
``APPDATA``, ``XDG_CONFIG_HOME``, ``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``) and the project folder
come in an :class:`Environment`, so the macOS and Windows branches run on Linux in tests. Paths
come back as ``PurePosixPath`` or ``PureWindowsPath`` after the platform named, never touched.

A :class:`Place` is one spot in one file holding server entries: the file, its format, the key
path of the servers object inside it (``("mcpServers",)``, VS Code settings' ``("mcp", "servers")``,
Claude Code's ``("projects", "/abs/project", "mcpServers")``, Codex's ``("mcp_servers",)``), its
scope, and whether ``install`` writes there. Pure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Final, Literal

__all__ = [
    "CLIENTS",
    "CLIENT_IDS",
    "Client",
    "Environment",
    "Place",
    "Platform",
    "Scope",
    "client_named",
    "install_place",
    "places_of",
]

Platform = Literal["linux", "darwin", "win32"]
Scope = Literal["user", "project", "local"]
"""``user``: every project of this user; ``project``: a file in the project folder, shared with
whoever clones it; ``local``: this user's settings for one project (Claude Code's ``projects``)."""
Format = Literal["json", "toml"]


@dataclass(frozen=True)
class Environment:
    """What the location table depends on: the platform, its variables, the project folder."""

    platform: Platform
    env: Mapping[str, str]
    project: PurePath
    """The project whose own files are read (the current directory, or ``--project``), absolute."""

    @classmethod
    def current(cls, project: str | os.PathLike[str] | None = None) -> Environment:
        """This process's platform and environment; the project is ``project`` or the current directory."""
        platform: Platform = "win32" if sys.platform == "win32" else "darwin" if sys.platform == "darwin" else "linux"
        folder = Path(project) if project is not None else Path.cwd()
        try:
            folder = folder.resolve()  # Claude Code keys its projects by the real path
        except OSError:
            folder = folder.absolute()
        return cls(platform, dict(os.environ), folder)

    def path(self, *parts: str | PurePath) -> PurePath:
        """A path spelt as this platform spells it."""
        return PureWindowsPath(*parts) if self.platform == "win32" else PurePosixPath(*parts)

    @property
    def home(self) -> PurePath:
        """The user's home folder: ``%USERPROFILE%`` on Windows, else ``$HOME``."""
        if self.platform == "win32":
            profile = self.env.get("USERPROFILE") or (self.env.get("HOMEDRIVE", "") + self.env.get("HOMEPATH", ""))
            return self.path(profile or self.env.get("HOME") or "C:\\")
        return self.path(self.env.get("HOME") or "/")

    def folder_from(self, name: str) -> PurePath | None:
        """The folder the variable ``name`` holds, when it is set to an absolute path."""
        value = self.env.get(name)
        return self.path(value) if value and self.path(value).is_absolute() else None

    @property
    def app_data(self) -> PurePath:
        """Where desktop apps keep their settings: ``%APPDATA%``, ``~/Library/Application Support``,
        ``$XDG_CONFIG_HOME`` (else ``~/.config``)."""
        if self.platform == "win32":
            return self.folder_from("APPDATA") or self.home / "AppData" / "Roaming"
        if self.platform == "darwin":
            return self.home / "Library" / "Application Support"
        return self.folder_from("XDG_CONFIG_HOME") or self.home / ".config"

    def shorten(self, path: PurePath) -> str:
        """``path`` for people: under the home folder as ``~/...``."""
        try:
            rest = path.relative_to(self.home)
        except ValueError:
            return str(path)
        sep = "\\" if self.platform == "win32" else "/"
        return "~" + sep + str(rest) if str(rest) != "." else "~"


@dataclass(frozen=True)
class Place:
    """One object of server entries in one file."""

    client: str
    """The client's id (``CLIENTS``)."""
    file: PurePath
    format: Format
    keys: tuple[str, ...]
    """The key path of the servers object in the file."""
    scope: Scope
    installable: bool = False
    """``install`` writes here (for this scope)."""

    @property
    def label(self) -> str:
        """The key path for people: ``mcpServers``, ``mcp.servers``, ``projects["/p"].mcpServers``."""
        if self.keys[0] == "projects" and len(self.keys) == 3:
            return f'projects["{self.keys[1]}"].{self.keys[2]}'
        return ".".join(self.keys)


@dataclass(frozen=True)
class Client:
    """An MCP client: its id on the command line, its name for people, and how to spot it running."""

    id: str
    title: str
    processes: tuple[str, ...]
    """How its running processes look (``running`` matches them): a program's name without
    ``.exe`` (case counts: Claude Desktop is ``Claude``, Claude Code ``claude``), or a folder in
    the program's or script's path (an app bundle, an npm package)."""
    restart: str
    """What to do once its file changed, when it is running."""


CLIENTS: Final[tuple[Client, ...]] = (
    Client(
        "claude-desktop",
        "Claude Desktop",
        ("Claude", "claude-desktop", "Claude.app"),
        "quit Claude Desktop (from its tray or menu bar icon) and open it again",
    ),
    Client(
        "claude-code",
        "Claude Code",
        ("claude", "@anthropic-ai/claude-code"),
        "start a new claude session (running ones keep the servers they started with)",
    ),
    Client(
        "cursor",
        "Cursor",
        ("cursor", "Cursor", "Cursor.app"),
        "restart Cursor, or turn the server on in its MCP settings",
    ),
    Client(
        "vscode",
        "VS Code",
        ("code", "Code", "code-insiders", "Visual Studio Code.app"),
        "run 'MCP: List Servers' in VS Code and start it, or restart VS Code",
    ),
    Client("windsurf", "Windsurf", ("windsurf", "Windsurf", "Windsurf.app"), "press refresh in Windsurf's MCP panel"),
    Client("gemini", "Gemini CLI", ("gemini", "@google/gemini-cli"), "start a new gemini session"),
    Client("codex", "Codex", ("codex", "@openai/codex"), "start a new codex session"),
)
"""Every client, in the order ``import`` reads them (the first to hold a name keeps it)."""

CLIENT_IDS: Final = tuple(c.id for c in CLIENTS)

_ALIASES: Final[Mapping[str, str]] = {
    "claude": "claude-code",
    "claudecode": "claude-code",
    "claudedesktop": "claude-desktop",
    "desktop": "claude-desktop",
    "code": "vscode",
    "vs-code": "vscode",
    "gemini-cli": "gemini",
    "geminicli": "gemini",
    "codex-cli": "codex",
}


def client_named(word: str) -> Client | None:
    """The client a command-line word names (its id, or a common other spelling), or None."""
    key = word.strip().lower().replace("_", "-").replace(" ", "-")
    key = _ALIASES.get(key, _ALIASES.get(key.replace("-", ""), key))
    return next((c for c in CLIENTS if c.id == key), None)


def places_of(client: str, env: Environment) -> tuple[Place, ...]:
    """Every place ``client`` keeps servers in, user files first, then the project's."""
    home, project = env.home, env.project
    if client == "claude-desktop":
        return (
            Place(
                client, env.app_data / "Claude" / "claude_desktop_config.json", "json", ("mcpServers",), "user", True
            ),
        )
    if client == "claude-code":
        # CLAUDE_CONFIG_DIR moves the whole of Claude Code's state, ~/.claude.json included.
        state = env.folder_from("CLAUDE_CONFIG_DIR") or home
        user_file = state / ".claude.json"
        return (
            Place(client, user_file, "json", ("mcpServers",), "user", True),
            Place(client, user_file, "json", ("projects", str(project), "mcpServers"), "local"),
            Place(client, project / ".mcp.json", "json", ("mcpServers",), "project", True),
        )
    if client == "cursor":
        return (
            Place(client, home / ".cursor" / "mcp.json", "json", ("mcpServers",), "user", True),
            Place(client, project / ".cursor" / "mcp.json", "json", ("mcpServers",), "project", True),
        )
    if client == "vscode":
        user = env.app_data / "Code" / "User"
        return (
            Place(client, user / "mcp.json", "json", ("servers",), "user", True),
            Place(client, user / "settings.json", "json", ("mcp", "servers"), "user"),
            Place(client, project / ".vscode" / "mcp.json", "json", ("servers",), "project", True),
        )
    if client == "windsurf":
        return (
            Place(client, home / ".codeium" / "windsurf" / "mcp_config.json", "json", ("mcpServers",), "user", True),
        )
    if client == "gemini":
        return (
            Place(client, home / ".gemini" / "settings.json", "json", ("mcpServers",), "user", True),
            Place(client, project / ".gemini" / "settings.json", "json", ("mcpServers",), "project", True),
        )
    if client == "codex":
        codex_home = env.folder_from("CODEX_HOME") or home / ".codex"
        return (Place(client, codex_home / "config.toml", "toml", ("mcp_servers",), "user", True),)
    raise ValueError(f"unknown client {client!r}")


def install_place(client: str, env: Environment, scope: Scope) -> Place | None:
    """Where ``install`` writes for ``scope``, or None when the client has no such file."""
    return next((p for p in places_of(client, env) if p.installable and p.scope == scope), None)
