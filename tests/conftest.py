import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def opened_connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every connection the HTTP lanes' pools open during the test (keep-alive works when
    one is opened for many calls)."""
    from mcp_patchbay.fastpath import http1

    opened: list[object] = []

    class Counted(http1.Connection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr(http1, "Connection", Counted)
    return opened


@pytest.fixture(autouse=True, scope="session")
def _no_user_config(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test reads or writes the files of whoever runs the suite: the default config and the
    data folder (``places``) are empty folders, in this process and every process a test starts."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """A test that runs the command line sets up the process's logging as the CLI does (handlers
    on that test's captured stderr); the next test gets the logging it had back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level
