"""Every link between the README and the pages of docs/ leads somewhere.

The README is the first five minutes; the rest moved to docs/ and is reached by links, so a
renamed heading or a moved section must not leave a link pointing at nothing. Links are read
as GitHub renders them: a relative file path, and an anchor made from a heading (lowercased,
punctuation dropped, spaces as hyphens, a repeated heading numbered).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lowercased, punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in _HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans hold no links
    return [target for target in _LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_the_slug_is_githubs() -> None:
    assert slug("Many tools: search mode") == "many-tools-search-mode"
    assert slug('Settings (`"patchbay"`)') == "settings-patchbay"
    assert slug("The `unknown_tool` policy") == "the-unknown_tool-policy"
    assert slug("Name length: why 48") == "name-length-why-48"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    broken: list[str] = []
    for target in links(page):
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading for #{anchor}")
    assert not broken, "\n".join(broken)
