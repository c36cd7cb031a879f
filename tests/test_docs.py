"""The docs' guarantee tables name tests that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: `tests/x.py`, `tests/x.py::test_name`, or `::test_name` (same file as the last path named).
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+)\*?)?`")


def references(doc: Path) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for line in doc.read_text(encoding="utf-8").splitlines():
        path = None
        for match in REFERENCE.finditer(line):
            path = match.group(1) or path
            if path is not None and (match.group(1) or match.group(2)):
                found.append((path, match.group(2)))
    return found


@pytest.mark.parametrize("doc", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_test_a_doc_names_exists(doc: Path) -> None:
    missing = []
    for path, name in references(doc):
        source = ROOT / path
        if not source.is_file():
            missing.append(path)
        elif name is not None and f"def {name}" not in source.read_text(encoding="utf-8"):
            missing.append(f"{path}::{name}")
    assert missing == []
