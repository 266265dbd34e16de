"""The package's metadata agrees with itself, so a release is what pyproject.toml says.

Fast: nothing is built here. Building is ``python -m build`` then ``twine check --strict dist/*``
(the README's Development section, and ``.github/workflows/release.yml`` on a tag); these tests
hold the facts those rely on: one version, a console script that runs, a Python floor that the
classifiers, ruff and pyright agree on, and an sdist that carries what its tests import.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

import mcp_patchbay

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT: dict[str, Any] = PYPROJECT["project"]
HATCH_TARGETS: dict[str, Any] = PYPROJECT["tool"]["hatch"]["build"]["targets"]


def _floor() -> tuple[int, int]:
    match = re.fullmatch(r">=\s*3\.(\d+)", PROJECT["requires-python"])
    assert match, PROJECT["requires-python"]
    return 3, int(match[1])


def test_one_version_in_pyproject_and_the_package() -> None:
    assert PROJECT["version"] == mcp_patchbay.__version__


def test_the_console_script_points_at_a_callable() -> None:
    assert set(PROJECT["scripts"]) == {"mcp-patchbay"}
    module_name, _, attribute = PROJECT["scripts"]["mcp-patchbay"].partition(":")
    assert callable(getattr(importlib.import_module(module_name), attribute))


def test_python_m_runs_the_same_main() -> None:
    source = (ROOT / "src" / "mcp_patchbay" / "__main__.py").read_text(encoding="utf-8")
    assert "from mcp_patchbay.cli import main" in source


def test_the_python_floor_is_the_same_everywhere() -> None:
    major, minor = _floor()
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert PYPROJECT["tool"]["pyright"]["pythonVersion"] == f"{major}.{minor}"
    listed = sorted(
        tuple(int(part) for part in classifier.rsplit(" :: ", 1)[1].split("."))
        for classifier in PROJECT["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", classifier)
    )
    assert listed, "no Python version classifier"
    assert listed[0] == (major, minor), f"the lowest classifier {listed[0]} is not requires-python's {major}.{minor}"


def test_typed_as_the_classifier_says() -> None:
    assert "Typing :: Typed" in PROJECT["classifiers"]
    assert (ROOT / "src" / "mcp_patchbay" / "py.typed").is_file()


def test_the_readme_is_the_long_description() -> None:
    assert PROJECT["readme"] == "README.md"
    assert (ROOT / "README.md").is_file()


def test_the_wheel_holds_the_package() -> None:
    assert HATCH_TARGETS["wheel"]["packages"] == ["src/mcp_patchbay"]


def test_core_metadata_stays_at_2_4() -> None:
    # 2.5 is refused by uploads whose packaging library predates it (see pyproject.toml).
    assert HATCH_TARGETS["wheel"]["core-metadata-version"] == "2.4"
    assert HATCH_TARGETS["sdist"]["core-metadata-version"] == "2.4"


def test_the_sdist_includes_exist_and_carry_what_the_tests_import() -> None:
    included = HATCH_TARGETS["sdist"]["include"]
    for pattern in included:
        assert (ROOT / pattern.lstrip("/")).exists(), pattern
    # tests/ read benchmarks/search_data/catalog.json, and the README's first command reads configs/.
    for needed in ("/src", "/tests", "/benchmarks", "/configs", "/README.md"):
        assert needed in included, needed


def test_the_dev_extra_can_build_and_check_a_release() -> None:
    names = {
        re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0] for requirement in PROJECT["optional-dependencies"]["dev"]
    }
    assert {"build", "twine"} <= names


def test_the_release_workflow_publishes_tags_with_trusted_publishing() -> None:
    if not (ROOT / ".git").exists() and not (ROOT / ".github").exists():
        pytest.skip("an unpacked sdist: the release workflow is the repository's, not the sdist's")
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    assert 'tags: ["v*"]' in workflow
    assert "id-token: write" in workflow
    assert "pypa/gh-action-pypi-publish@" in workflow
    assert "NOT RUN FROM HERE" in workflow
