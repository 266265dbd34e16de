import os

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def _no_user_config(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test reads the config of whoever runs the suite: the default config (``places``) is
    looked for in an empty folder, in this process and in every process a test starts."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
