"""The documentation holds together: README.md, CONTRIBUTING.md and every page under docs/.

Every relative link resolves to a file inside the repository (and an `#anchor` to a heading
of its page, slugged as GitHub slugs it), every docs/ page is one click from the README, the
README stays a short front door, no page points at what a reader cannot open (an issue
number or a design file that is not in the repository), and the file map of
docs/architecture.md names every module.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
UNREADABLE = re.compile(r"\bissues?\s+#?\d+|\bDESIGN\.md\b", re.IGNORECASE)


def pages() -> list[Path]:
    return [README, CONTRIBUTING, *sorted(DOCS.rglob("*.md"))]


def prose_lines(path: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, code marks and punctuation
    dropped (letters, digits, `_` and `-` stay), each space a hyphen."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    links = []
    for line in prose_lines(path):
        # A code span may hold "[x](y)" that is no link; link text may hold a code span.
        line = INLINE_CODE.sub(lambda m: "x" * len(m.group(2)), line)
        links += [t for t in LINK.findall(line) if not SCHEME.match(t)]
    return links


def test_the_slugs_are_githubs() -> None:
    assert slug("Why spill files and not Beam's shuffle") == "why-spill-files-and-not-beams-shuffle"
    assert slug("Extraction (`bench.extract`)") == "extraction-benchextract"
    assert slug("Stage 1a: Wikipedia → documents") == "stage-1a-wikipedia--documents"
    assert slug("The vocabulary's serial step (`bench.vocab_learn`)") == (
        "the-vocabularys-serial-step-benchvocab_learn"
    )


def test_the_link_reader_sees_links_and_only_links(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "See [a](a.md), [`b/`](b/README.md#x) and [web](https://example.com).\n"
        "`[not](a link)` in code\n```\n[nor](in/a/fence.md)\n```\n# A `heading`\n",
        encoding="utf-8",
    )
    assert relative_links(page) == ["a.md", "b/README.md#x"]
    assert anchors(page) == {"a-heading"}


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    dead = []
    for link in relative_links(page):
        target, _, anchor = link.partition("#")
        resolved = (page.parent / target).resolve() if target else page
        if not resolved.is_relative_to(ROOT):
            dead.append(f"{link}: outside the repository")
        elif not resolved.is_file():
            dead.append(f"{link}: no such file ({resolved.relative_to(ROOT)})")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            dead.append(f"{link}: {resolved.relative_to(ROOT)} has no heading #{anchor}")
    assert not dead, f"{page.relative_to(ROOT)}: dead links:\n" + "\n".join(dead)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in relative_links(README)}
    unlinked = [str(p.relative_to(ROOT)) for p in sorted(DOCS.rglob("*.md")) if p not in linked]
    assert not unlinked, f"docs pages the README does not link to: {unlinked}"


def test_the_readme_is_a_short_front_door() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move detail into docs/"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_at_what_a_reader_cannot_open(page: Path) -> None:
    hits = [
        f"line {number}: {match.group(0)!r}"
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for match in UNREADABLE.finditer(line)
    ]
    assert not hits, f"{page.relative_to(ROOT)} names an issue or an absent file: {hits}"


ARCHITECTURE = DOCS / "architecture.md"
MAPPED_PACKAGES = ("bertkit", "pipelines", "schemas", "trainer")  # every .py in them is named
CODE_NAME = re.compile(r"`([^`\s]+)`")


def file_map_names(path: Path) -> list[str]:
    """The repository paths the first column of the page's "File map" table names.

    A cell names paths in backticks: one with a `/` is from the repository root (a folder
    ends with `/`), a bare name is a sibling of the path before it in the same cell, so
    "`pipelines/text/dumpxml.py`, `dumprecords.py`" names both files of pipelines/text/."""
    names, in_map = [], False
    for line in prose_lines(path):
        heading = HEADING.match(line)
        if heading:  # the section runs to the next heading of its level: its own ### go in
            in_map = heading.group(2) == "File map" or (in_map and len(heading.group(1)) > 2)
            continue
        if not in_map or not line.startswith("|") or line.startswith("|---"):
            continue
        folder = ""
        for name in CODE_NAME.findall(line.split("|")[1]):
            if "/" in name.rstrip("/"):
                folder = name if name.endswith("/") else name.rpartition("/")[0] + "/"
            elif name.endswith("/") and not folder:
                folder = name  # a top-level folder: `bench/`
                names.append(name)
                continue
            names.append(name if "/" in name.rstrip("/") else folder + name)
    return names


def test_the_file_map_reader_resolves_siblings(tmp_path: Path) -> None:
    page = tmp_path / "architecture.md"
    page.write_text(
        "## Layers\n\n| `not/this.py` | x |\n\n## File map\n\n| file | what it does |\n|---|---|\n"
        "| `pipelines/text/dumpxml.py`, `dumprecords.py` | a |\n### Tests\n| `tests/` | b |\n"
        "| [`infra/dataflow/`](x) | c |\n| `bench/runs.py`, `venvs.py` | `not/a/name.py` |\n"
        "## Next\n| `not/mapped.py` | d |\n",
        encoding="utf-8",
    )
    assert file_map_names(page) == [
        "pipelines/text/dumpxml.py",
        "pipelines/text/dumprecords.py",
        "tests/",
        "infra/dataflow/",
        "bench/runs.py",
        "bench/venvs.py",
    ]


def test_the_file_map_names_every_module_and_only_what_exists() -> None:
    named = file_map_names(ARCHITECTURE)
    missing = [name for name in named if not (ROOT / name).exists()]
    assert not missing, f"docs/architecture.md's file map names what does not exist: {missing}"
    modules = sorted(
        str(path.relative_to(ROOT))
        for package in MAPPED_PACKAGES
        for path in (ROOT / package).rglob("*.py")
    )
    unnamed = [module for module in modules if module not in set(named)]
    assert not unnamed, f"docs/architecture.md's file map does not name: {unnamed}"


# Each command's --help: (the module whose docstring is its description, the module and name
# of its flags' config, or None where the command builds its parser by hand).
HELP_TEXTS = {
    "wikipedia": ("pipelines.wikipedia", "pipelines.wikipedia.config", "WikipediaConfig"),
    "books": ("pipelines.books", "pipelines.books.config", "BooksConfig"),
    "corpus": ("pipelines.corpus", "pipelines.corpus.config", "CorpusConfig"),
    "dedup": ("pipelines.dedup", "pipelines.dedup.config", "DedupConfig"),
    "vocab": ("pipelines.vocab", "pipelines.vocab.config", "VocabConfig"),
    "examples": ("pipelines.examples", "pipelines.examples.config", "ExamplesConfig"),
    "chain": ("pipelines.chain", "pipelines.chain.config", "ChainConfig"),
    "inspect": ("pipelines.inspect", "pipelines.inspect.cli", "InspectConfig"),
    "train": ("trainer.config", "trainer.config", "TrainConfig"),
    "export-hf": ("trainer.export_flags", None, None),
    "demo": ("bertkit.demo", None, None),
    "docs": ("bertkit.pages", None, None),
}
# A source or test file of ours, named: `pipelines/bert/pairs.py`, `shuffle.py`, `tests/…`.
SOURCE_FILE = re.compile(r"[\w/.-]*\b[a-z_]+\.py\b|\btests/|\bThis file\b")
NOT_OURS = {"create_pretraining_data.py"}  # Google's script, which users know by that name


def help_text(command: str) -> str:
    import importlib

    from pipelines.command.flags import parser_for

    module, config_module, config_name = HELP_TEXTS[command]
    description = importlib.import_module(module).__doc__ or ""
    if config_module is None:
        return description
    config = getattr(importlib.import_module(config_module), config_name)
    return parser_for(config, f"bertkit {command}", description).format_help()


@pytest.mark.parametrize("command", sorted(HELP_TEXTS))
def test_help_speaks_to_users_not_of_source_files(command: str) -> None:
    text = help_text(command)
    assert f"bertkit {command}" in text  # the real command is shown
    named = [m for m in SOURCE_FILE.findall(text) if m.rsplit("/", 1)[-1] not in NOT_OURS]
    assert not named, f"`bertkit {command} --help` speaks of source files: {named}"


def test_the_readme_leads_with_users_pages_and_links_contributors_last() -> None:
    lines = prose_lines(README)
    start = lines.index("## Read on")
    rows = [line for line in lines[start:] if line.startswith("| [")]
    first_links = [relative_links_of(row)[0] for row in rows]
    assert first_links[0] == "docs/stages/wikipedia.md"  # what a user does first
    assert first_links[-1] == "CONTRIBUTING.md"  # the code, last
    assert "docs/architecture.md" not in first_links[:-1]


def relative_links_of(line: str) -> list[str]:
    line = INLINE_CODE.sub(lambda m: "x" * len(m.group(2)), line)
    return [t for t in LINK.findall(line) if not SCHEME.match(t)]


def test_the_benchmarks_page_gives_each_goal_one_verdict() -> None:
    # The verdicts live in the "Current figures" table, one row per benchmark and goal, met
    # or not; the sections give the figures. A page that also said "not met" in prose was
    # how one goal came to be both met and not met, run after run.
    page = DOCS / "benchmarks.md"
    lines = prose_lines(page)
    start = lines.index("## Current figures")
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("| [") or line.startswith("| **"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    assert rows, "docs/benchmarks.md has no Current figures table"
    keys = [(row[0], row[2]) for row in rows]
    assert len(keys) == len(set(keys)), f"a goal with two rows: {keys}"
    assert all(row[3].split()[0] in ("yes", "no") for row in rows), rows
    prose = [line for line in lines if "not met" in line]
    assert not prose, f"a verdict outside the Current figures table (put it there): {prose}"
