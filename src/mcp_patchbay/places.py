"""Where the proxy keeps its own files on this OS: the one owner of those paths.

``platformdirs`` gives each platform's convention (imported only when a path is asked for):

========  ===========================================  ==========================================
OS        config (``default_config``)                  data (sign-ins, ``data_dir``)
========  ===========================================  ==========================================
Linux     ``$XDG_CONFIG_HOME/mcp-patchbay/config.json``  ``$XDG_DATA_HOME/mcp-patchbay``
macOS     ``~/Library/Application Support/mcp-patchbay``  the same folder
Windows   ``%LOCALAPPDATA%\\mcp-patchbay``               the same folder
========  ===========================================  ==========================================

Where each MCP client keeps its config is ``clients``' to say, not this module's.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["APP_NAME", "CONFIG_NAME", "config_dir", "data_dir", "default_config"]

APP_NAME = "mcp-patchbay"
CONFIG_NAME = "config.json"
"""The file name ``import`` writes and every command reads when no config is named."""


def config_dir() -> Path:
    """The folder of the user's patchbay config."""
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def default_config() -> Path:
    """The config every command reads when none is named (``import`` writes it)."""
    return config_dir() / CONFIG_NAME


def data_dir() -> Path:
    """The folder of the proxy's data: sign-in tokens (and, later, pinned tool definitions)."""
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
