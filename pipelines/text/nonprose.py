"""What in a plain-text book is not running text: lists, tables, tables of contents,
schedules, directories of names and addresses, headings inside a block (Beam-free, pure).

BERT learns from running text; a list's items, a table's cells or a directory's addresses
are no sentences. `booktext.book_paragraphs` asks this module twice: `prose_blocks` splits
each block (lines between blank lines) into the blocks of running text it holds, by these
line rules, and `paragraph_rule` judges each reflowed paragraph. Every rule is conservative:
what it drops has no sentence to lose (it does not end like one, or it is laid out as a
table); a list item that is a sentence is kept, without its marker. Measured on the sample
books in docs/stages/books.md. The rules, each with the name it is counted under:

- ``schedule_entries``: a programme's entry at the start of a block: a clock time (``9:00``,
  ``9:l5 AM``, ``9.30 a.m.``: a colon, or a point before a.m./p.m., so that a section
  number such as ``2.15`` or ``3.10`` is no time), then two spaces and a capitalised title,
  or nothing, or a dash ending the line (``10:30-`` / ``11:00 AM  Break``); with the
  entries right after it, and the lines indented deeper than it while its title ends no
  sentence (the title wrapped). The entry goes; what follows it in the block stays, unless
  it starts in lower case (the entry's sentence goes on: then nothing goes).
- ``table_lines``: two or more lines in a row, each with two or more ``|``
  (``| Name | Age |``, ``|----|---|``), or each with two or more runs of three or more
  spaces between its words whose columns line up (a run that starts or ends at the same
  place on the next line: ``Elizabeth    20    Longbourn`` over ``Jane    22    Longbourn``).
  Those lines go and the block is split there, unless that would cut a sentence (the line
  before ends none, or the line after starts in lower case): one line of justified prose
  (``It  was  the  best  of  times,   it  was   the``) is no table.
- ``contents_lines``: a line ending in a page number after dot leaders
  (``The Return ........ 12``) or after three or more spaces, when its title is mostly
  capitalised (``The Assembly at Meryton        12``; a verse line with its number in the
  margin is not). The line goes and the block is split there.
- ``list_items``: a block whose first line starts with a list marker (``* ``, ``- ``,
  ``• ``, ``1. ``, ``1) ``, ``(a) ``, ``(1) ``, ``a) ``) is split into its items, at each
  line that starts with a marker of the same kind; each item loses its marker, and an item
  that does not end a clause (``.!?;:,``, a dash or an ellipsis, before closing quotes and
  brackets) is dropped: ``* Imaging``. An item that is a sentence is running text and kept.
  A paragraph that lists topics inline, ``NAME * Topic one * Topic two *``, none of them a
  sentence, is dropped as one item.
- ``headings``: inside a block, a line after a line that ends a sentence that is a numbered
  or front-matter heading (``Chapter 2``, ``Contents``: rules 6d-6e of book_paragraphs), or,
  in a book with one paragraph a line (the next line over 100 characters), a title: at most
  8 words, no clause end, mostly capitalised (``Down the Rabbit-Hole``); or, at the start
  of a block of more lines too, a section number alone or before such a title (``3.10``,
  ``2.15  The Theory of Sets``). The line goes and the block is split there, so it glues
  onto no sentence.
- ``name_lists``: a paragraph that does not end a clause and whose words are mostly (60 %)
  capitalised or numbers: names with affiliations, addresses and phone numbers, a table of
  contents reflowed into one line (``The Assembly at Meryton 12 Mr. Darcy's Proposal 20``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

__all__ = [
    "BARE_HEADING_RE",
    "NUMBERED_HEADING_RE",
    "RULES",
    "caps_share",
    "paragraph_rule",
    "prose_blocks",
]

RULES = (
    "schedule_entries",
    "table_lines",
    "contents_lines",
    "list_items",
    "headings",
    "name_lists",
)

_ROMAN = r"[ivxlcdm]+"
_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    r"|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty"
    r"|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|last|the\s+first|the\s+last"
)
# "CHAPTER I", "Chapter 12. The Return", "BOOK 1", "Book the First", "ACT II",
# "SCENE III<TAB>A room.", "Part Two: Spring", "STAVE ONE".  After the number: the end,
# punctuation, or a capitalised title - so "Part one of the plan failed." is no heading.
NUMBERED_HEADING_RE = re.compile(
    rf"""\W*(?i:chapter|chap|book|part|act|scene|canto|stave|volume|vol|section|letter)\.?
        \s+(?i:{_ROMAN}|\d+|{_NUMBER_WORDS})\b
        (?:\W*$|\s*[.:\-\u2014]|\s+[\W\d]*[A-Z])""",
    re.VERBOSE,
)
# Front/back-matter headings standing alone.
BARE_HEADING_RE = re.compile(
    r"""\W*(?:prologue|epilogue|preface|foreword|introduction|contents|table\ of\ contents
        |appendix|index|footnotes|notes|dramatis\ personae|acknowledge?ments|afterword
        |glossary|bibliography|finis|fin|the\ end)\W*$""",
    re.IGNORECASE | re.VERBOSE,
)

_CLOSERS = "\"')]}\u2019\u201d\u00bb"
_SENTENCE_FINAL = ".!?\u2026"
_CLAUSE_FINAL = ".!?\u2026;:,-\u2013\u2014"
_ALNUM_RE = re.compile(r"[^\W_]")
_TITLE_MAX_WORDS = 8
_NAMES_CAPS_SHARE = 0.6  # name lists, titles
_CONTENTS_CAPS_SHARE = 0.5  # the title of a contents line, what follows a clock time
_UNWRAPPED_CHARS = 100  # a longer line is a paragraph on one line: no book wraps so wide
# A clock time: 9:00, 9:l5 (OCR's l and O), 11:00 AM; with a point only before a.m./p.m.
# (9.30 a.m.): "2.15" or "3.10" alone is a section number.
_CLOCK = r"\d{1,2}(?::[0-5lO][0-9lO]\s*(?:[AaPp]\.?[Mm]\.?)?|\.[0-5lO][0-9lO]\s*[AaPp]\.?[Mm]\.?)"
_SCHEDULE_RE = re.compile(rf"\s*{_CLOCK}(?:\s*[-\u2013]\s*$|\s{{2,}}(?P<title>\S.*)|\s*$)")
# A section number (2.15, 3.10, 1.2.3), alone or before a title.
_SECTION_RE = re.compile(r"\d{1,3}(?:\.\d{1,3})+\.?(?:\s+(?P<title>.*))?")
_GAP_RE = re.compile(r"\S {3,}(?=\S)")
_LEADERS_RE = re.compile(
    r"(?P<title>.*?[^\W_].*?)\s*(?:\.\s?){3,}\s*(?:\d{1,4}|[ivxlcdm]{1,7})\s*$", re.I
)
_PAGE_NUMBER_RE = re.compile(r"(?P<title>.*?[^\W_].*?\S) {3,}\d{1,4}\s*$")
_MARKER_RE = re.compile(
    r"""\s*(?:(?P<bullet>[*\u2022\u2023\u25e6\u25aa\-\u2013])\s+(?=[^\W_]|["'\u201c\u2018(\[])
        |(?P<number>\d{1,2}[.)])\s+(?=\S)
        |(?P<paren>\((?:\d{1,2}|[a-zA-Z]|[ivxIVX]{1,4})\))\s+(?=\S)
        |(?P<letter>[a-zA-Z]\))\s+(?=\S))""",
    re.VERBOSE,
)
_INLINE_BULLET_RE = re.compile(r"(?:^|\s)\*(?=\s|$)")


def caps_share(text: str) -> float:
    """The share of the words (tokens with a letter or digit) that start with a capital or
    a digit: about 0.1-0.3 in prose and verse, 0.6-1 in titles, names and addresses."""
    words = capitalised = 0
    for token in text.split():
        first = _ALNUM_RE.search(token)
        if first is not None:
            words += 1
            capitalised += first.group().isupper() or first.group().isdigit()
    return capitalised / words if words else 0.0


def _ends(text: str, finals: str) -> bool:
    """Whether ``text`` ends with one of ``finals``, before closing quotes and brackets."""
    text = text.rstrip().rstrip(_CLOSERS)
    return bool(text) and text[-1] in finals


def _title_like(line: str) -> bool:
    """A short, mostly capitalised line that ends no clause: a title, a name."""
    return (
        len(line.split()) <= _TITLE_MAX_WORDS
        and not _ends(line, _CLAUSE_FINAL)
        and caps_share(line) >= _NAMES_CAPS_SHARE
    )


def prose_blocks(lines: list[str], drops: Counter[str] | None = None) -> list[list[str]]:
    """A block's lines → the blocks of running text in it (the line rules of the module),
    each a list of lines; ``drops`` counts what went, by rule."""
    drops = drops if drops is not None else Counter()
    if entry := _schedule_entry(lines):
        drops["schedule_entries"] += 1
        lines = lines[entry:]
        if not lines:
            return []
    pieces = _split(lines, drops, _layout_rule(lines))
    blocks = [block for piece in pieces for block in _list_items(piece, drops)]
    return [block for piece in blocks for block in _split(piece, drops, _heading_rule)]


def _split(lines: list[str], drops: Counter[str], rule) -> list[list[str]]:
    """``lines`` cut at each line ``rule(lines, i)`` names (that line counted, and gone)."""
    pieces: list[list[str]] = []
    start = 0
    for i in range(len(lines)):
        if (name := rule(lines, i)) is not None:
            drops[name] += 1
            pieces.append(lines[start:i])
            start = i + 1
    pieces.append(lines[start:])
    return [piece for piece in pieces if piece]


def _schedule_entry(lines: list[str]) -> int:
    """How many of a block's first lines are a programme's entry (see the module), or 0."""
    if not _clock_line(lines[0]):
        return 0
    indent = _indent(lines[0])
    end = 1
    while end < len(lines) and (
        _clock_line(lines[end])
        or (_indent(lines[end]) > indent and not _ends(lines[end - 1], _SENTENCE_FINAL))
    ):
        end += 1
    if end < len(lines) and lines[end].lstrip()[:1].islower():
        return 0  # the entry's sentence goes on: prose
    return end


def _clock_line(line: str) -> bool:
    """A clock time alone, before a dash, or before a mostly capitalised title."""
    schedule = _SCHEDULE_RE.match(line)
    if schedule is None:
        return False
    title = schedule.group("title")  # None: a time alone, or the start of a time range
    return title is None or caps_share(title) >= _CONTENTS_CAPS_SHARE


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _layout_rule(lines: list[str]) -> Callable[[list[str], int], str | None]:
    """The rule `_split` cuts ``lines`` by: ``table_lines`` for the lines of a table,
    ``contents_lines`` for a line laid out as one, else None."""
    tables = _table_lines(lines)
    return lambda lines, i: "table_lines" if i in tables else _contents_rule(lines[i].strip())


def _table_lines(lines: list[str]) -> set[int]:
    """The numbers of the lines that are a table's: runs of two or more table lines, each
    in line with the next, that cut no sentence."""
    pipes = [line.count("|") >= 2 for line in lines]
    edges = [_column_edges(line) for line in lines]
    tables: set[int] = set()
    i = 0
    while i < len(lines):
        end = i + 1
        while end < len(lines) and (
            (pipes[end - 1] and pipes[end]) or edges[end - 1] & edges[end]  # their columns meet
        ):
            end += 1
        before = lines[i - 1] if i else ""
        after = lines[end].lstrip() if end < len(lines) else ""
        if (
            end - i >= 2
            and (
                not before
                or i - 1 in tables
                or _ends(before, _SENTENCE_FINAL + ":")
                or _title_like(before)
            )
            and not after[:1].islower()
        ):
            tables.update(range(i, end))
        i = end
    return tables


def _column_edges(line: str) -> set[tuple[str, int]]:
    """Where each run of three or more spaces between words of ``line`` starts and ends
    (the columns either side of it); empty for a line with fewer than two such runs."""
    if _ALNUM_RE.search(line) is None:
        return set()
    gaps = list(_GAP_RE.finditer(line))
    if len(gaps) < 2:
        return set()
    return {("end", gap.start() + 1) for gap in gaps} | {("start", gap.end()) for gap in gaps}


def _contents_rule(line: str) -> str | None:
    """``contents_lines`` for a line laid out as a table of contents' line, else None."""
    if _LEADERS_RE.match(line):
        return "contents_lines"
    page = _PAGE_NUMBER_RE.match(line)
    if page and caps_share(page.group("title")) >= _CONTENTS_CAPS_SHARE:
        return "contents_lines"
    return None


def _heading_rule(lines: list[str], i: int) -> str | None:
    """``headings`` for a heading line inside a block (see the module), else None."""
    if i > 0 and not _ends(lines[i - 1], _SENTENCE_FINAL):
        return None
    line = lines[i].strip()
    if i > 0 and (NUMBERED_HEADING_RE.match(line) or BARE_HEADING_RE.match(line)):
        return "headings"
    following = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if len(following) > _UNWRAPPED_CHARS and _title_like(line):
        return "headings"
    if following and (section := _SECTION_RE.fullmatch(line)) is not None:
        title = section.group("title")
        return "headings" if title is None or _title_like(title) else None
    return None


def _list_items(lines: list[str], drops: Counter[str]) -> list[list[str]]:
    """A list block's items that are sentences, without their markers; any other block."""
    first = _MARKER_RE.match(lines[0])
    if first is None:
        return [lines]
    kind = first.lastgroup
    items: list[list[str]] = []
    for line in lines:
        marker = _MARKER_RE.match(line)
        if marker is not None and marker.lastgroup == kind:
            items.append([line[marker.end() :]])
        else:
            items[-1].append(line)
    kept = [item for item in items if _ends(item[-1], _CLAUSE_FINAL)]
    drops["list_items"] += len(items) - len(kept)
    return kept


def paragraph_rule(paragraph: str) -> str | None:
    """The rule that drops a reflowed paragraph (``list_items`` for topics listed inline,
    ``name_lists``), or None for running text."""
    if _ends(paragraph, _CLAUSE_FINAL):
        return None
    bullets = _INLINE_BULLET_RE.split(paragraph)
    if len(bullets) >= 3 and not any(_ends(part, _SENTENCE_FINAL) for part in bullets):
        return "list_items"
    if caps_share(paragraph) >= _NAMES_CAPS_SHARE:
        return "name_lists"
    return None
