"""The package maps stay true: every module is named in its package's docstring (issue 34). No
run-time import cycle, and the modules' lengths: ``test_structure``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "mcp_patchbay"
PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def _docstring(init: Path) -> str:
    return ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_every_module_is_in_its_packages_map(package: Path) -> None:
    doc = _docstring(package / "__init__.py")
    members = [p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")]
    members += [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    missing = [name for name in sorted(members) if f"``{name}``" not in doc and f"``{name}/``" not in doc]
    assert not missing, f"{package.relative_to(PACKAGE.parent)}/__init__.py does not map {missing}"
