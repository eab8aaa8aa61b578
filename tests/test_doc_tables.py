"""Every Markdown table in docs/ and the README renders: its delimiter row and each body row
have as many cells as its header (GitHub drops a table whose delimiter row differs). A
cell's pipe escaped as `\\|` or inside a code span is part of the cell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
_DELIMITER = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$")


def cells(line: str) -> list[str]:
    """The cells of a table row: split on the pipes outside code spans and not escaped."""
    text = line.strip()
    found, current, tick, index = [], "", 0, 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            current += text[index : index + 2]
            index += 2
            continue
        if char == "`":
            run = len(text[index:]) - len(text[index:].lstrip("`"))
            if tick == 0:
                # A code span opens only where a closing run of the same length follows.
                if text.find("`" * run, index + run) != -1:
                    tick = run
            elif run == tick:
                tick = 0
            current += "`" * run
            index += run
            continue
        if char == "|" and tick == 0:
            found.append(current)
            current = ""
        else:
            current += char
        index += 1
    found.append(current)
    if text.startswith("|"):
        found = found[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        found = found[:-1]
    return [cell.strip() for cell in found]


def tables(path: Path) -> list[tuple[int, list[str]]]:
    """(line number of the header, the table's lines) of each table outside code fences."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, fenced, index = [], False, 0
    while index < len(lines):
        line = lines[index]
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif (
            not fenced
            and "|" in line
            and index + 1 < len(lines)
            and _DELIMITER.match(lines[index + 1].strip())
            and "-" in lines[index + 1]
        ):
            end = index + 2
            while end < len(lines) and lines[end].strip() and "|" in lines[end]:
                end += 1
            found.append((index + 1, lines[index:end]))
            index = end
            continue
        index += 1
    return found


def test_cells_are_split_on_bare_pipes_only():
    assert cells("| a | `x | y` | b \\| c |") == ["a", "`x | y`", "b \\| c"]
    assert cells("|---|---:|") == ["---", "---:"]
    assert cells("a | b") == ["a", "b"]
    assert cells("| ``a ` | b`` | c |") == ["``a ` | b``", "c"]


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_tables_rows_have_the_headers_cell_count(page: Path):
    wrong = []
    for number, lines in tables(page):
        width = len(cells(lines[0]))
        for offset, line in enumerate(lines[1:], start=1):
            if len(cells(line)) != width:
                wrong.append(f"line {number + offset}: {len(cells(line))} cells, header {width}")
    assert wrong == []
