"""Sections of a generated document that other scripts own.

``docs/PERFORMANCE.md`` is written whole by ``report.py``; other benchmarks
(``search.py``) own a section of it, between ``<!-- section:NAME -->`` and
``<!-- /section:NAME -->``. Each writer replaces only its own section, and
``report.py`` carries the others over when it rewrites the document.
"""

from __future__ import annotations

import re
from pathlib import Path

_SECTION = re.compile(r"<!-- section:(?P<name>[\w-]+) -->\n.*?<!-- /section:(?P=name) -->\n", re.DOTALL)


def sections(text: str) -> dict[str, str]:
    """The owned sections of a document, by name, each with its markers."""
    return {match["name"]: match[0] for match in _SECTION.finditer(text)}


def wrap(name: str, body: str) -> str:
    return f"<!-- section:{name} -->\n{body.strip()}\n<!-- /section:{name} -->\n"


def replace_section(path: Path, name: str, body: str) -> None:
    """Put ``body`` in section ``name`` of ``path`` (appended if the document has none yet)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = wrap(name, body)
    if name in sections(text):
        text = _SECTION.sub(lambda m: block if m["name"] == name else m[0], text)
    else:
        text = text.rstrip() + "\n\n" + block
    path.write_text(text, encoding="utf-8")


def carry_over(old: Path, new_text: str) -> str:
    """``new_text`` with the owned sections of the document at ``old`` appended."""
    if not old.exists():
        return new_text
    kept = sections(old.read_text(encoding="utf-8"))
    missing = [block for name, block in kept.items() if name not in sections(new_text)]
    return new_text.rstrip() + "\n\n" + "\n".join(missing) if missing else new_text
