"""`bertkit docs`: the user's pages from any install, found by the names the help texts and
links give them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bertkit import pages

ROOT = Path(__file__).resolve().parents[1]


def test_the_pages_are_the_checkouts_docs() -> None:
    assert pages.PAGES_DIR == ROOT / "docs"
    known = pages.pages()
    assert list(known) == sorted(known)
    assert {name for name in known if name.startswith("stages/")} == {
        "stages/books",
        "stages/chain",
        "stages/corpus",
        "stages/dedup",
        "stages/examples",
        "stages/inspect",
        "stages/vocab",
        "stages/wikipedia",
    }
    assert known["training"] == ROOT / "docs" / "training.md"


@pytest.mark.parametrize(
    ("name", "page"),
    [
        ("training", "training.md"),
        ("training.md", "training.md"),
        ("docs/training.md", "training.md"),
        ("./docs/training.md#preemption-and-resume", "training.md"),
        ("examples", "stages/examples.md"),
        ("stages/examples", "stages/examples.md"),
        ("docs/stages/examples.md#masking", "stages/examples.md"),
        ("bad-input", "bad-input.md"),
        ("stages", None),
        ("train", None),
        ("", None),
    ],
)
def test_a_page_is_found_as_help_texts_and_links_name_it(name: str, page: str | None) -> None:
    found = pages.find(name, pages.pages())
    assert found == (None if page is None else ROOT / "docs" / page)


def test_a_name_in_two_folders_is_not_guessed(tmp_path: Path) -> None:
    known = {"examples": tmp_path / "a.md", "stages/examples": tmp_path / "b.md"}
    assert pages.find("examples", known) == tmp_path / "a.md"  # the exact name first
    assert pages.find("other/examples", known) is None
    known = {"a/x": tmp_path / "a.md", "b/x": tmp_path / "b.md"}
    assert pages.find("x", known) is None


def test_a_title_is_the_first_heading(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("intro line\n\n## Stage 9: `x` → y\n# later\n", encoding="utf-8")
    assert pages.title(page) == "Stage 9: `x` → y"
    page.write_text("no heading\n", encoding="utf-8")
    assert pages.title(page) == ""


def _bertkit_docs(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bertkit", "docs", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT.parent,  # not the checkout: the pages come from the package
    )


def test_bertkit_docs_lists_and_prints_pages() -> None:
    listed = _bertkit_docs()
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == "bertkit's pages (bertkit docs NAME prints one):"
    assert "  training          Training" in lines
    assert "  stages/examples   Stage 3: pre-training examples" in lines
    assert lines[-1] == f"They are the files in {ROOT / 'docs'}."
    assert len(lines) == len(pages.pages()) + 2
    shown = _bertkit_docs("docs/stages/examples.md#masking")
    assert shown.returncode == 0
    assert shown.stdout == (ROOT / "docs/stages/examples.md").read_text(encoding="utf-8")


def test_an_unknown_page_names_the_pages() -> None:
    done = _bertkit_docs("trainng")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"bertkit docs: error: no page 'trainng'; the pages: {', '.join(pages.pages())}\n"
    )
