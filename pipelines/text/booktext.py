"""Beam-free helpers that turn raw book files into clean running-text paragraphs.

The BERT pre-training pipeline wraps these pure functions; nothing here imports Beam or
touches the file system, so every rule can be tested on literal strings. The Gutenberg
header and licence are `pipelines/text/gutenberg.py`'s.

Typical use for one plain-text book file::

    decoded = decode_book(raw_bytes)   # bookdecode.py; BookTextError -> record a reject,
                                       # and reject each of decoded.long_lines
    title = book_title(decoded.text, fallback=file_stem)   # gutenberg.py, reads the header
    body, had_boilerplate = strip_gutenberg(decoded.text)  # gutenberg.py
    body, cut = cut_long_paragraphs(body)          # count the paragraphs cut
    paragraphs = book_paragraphs(body)             # then sentence-split each paragraph

and for a BookCorpus-mirror file (one sentence per line), its lines read by
bookdecode.py's `book_lines` as a book's are::

    for sentences in line_documents(line_iterable):
        ...

Every rule is documented on the function that applies it, together with the reason for it.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator

from pipelines.text.nonprose import BARE_HEADING_RE as _BARE_HEADING_RE
from pipelines.text.nonprose import NUMBERED_HEADING_RE as _NUMBERED_HEADING_RE
from pipelines.text.nonprose import paragraph_rule, prose_blocks

__all__ = [
    "MAX_DOCUMENT_CHARS",
    "MAX_PARAGRAPH_CHARS",
    "book_paragraphs",
    "cut_long_paragraphs",
    "iter_book_paragraphs",
    "line_documents",
]

# A one-sentence-per-line document holds at most this many characters (rule 3 of
# line_documents), so a streaming reader never holds more, whatever the lines are.
MAX_DOCUMENT_CHARS = 16 << 20
# A paragraph's reflow and sentence split hold up to ~28 bytes a character at once (its
# lines, its words as strings, blingfire's buffers), so a paragraph of a whole book (58 MB
# hard-wrapped without a blank line) took 1.85 GB. No real paragraph comes near this
# bound: the sample's longest is a verse paragraph of Paradise Lost, 51,297 characters. It
# is the default line bound, so any line kept by default fits in one paragraph.
MAX_PARAGRAPH_CHARS = 1 << 20
# A cut of cut_long_paragraphs is a blank line of U+001E (whitespace to str.split and re,
# and removed from every line by bookdecode.py), which tells iter_book_paragraphs the
# pieces are one paragraph.
_CUT_LINE = "\x1e\n"


# --------------------------------------------------------------------------------------
# cut_long_paragraphs
# --------------------------------------------------------------------------------------


def cut_long_paragraphs(text: str, max_chars: int = MAX_PARAGRAPH_CHARS) -> tuple[str, int]:
    """Cut every block (rule 1 of book_paragraphs) over ``max_chars`` characters; count them.

    A block is cut at line boundaries into blocks of whole lines, each at most ``max_chars``
    characters long (newlines inside it counted, the one ending it not); a line longer than
    that is a block by itself (the caller bounds line length: bookdecode.py).  A cut is a
    blank line (of U+001E) after the last line that fits: each piece goes through rules 2-5
    of book_paragraphs as a block of its own (a heading line leading a piece is dropped, a
    word hyphenated across the cut is not joined) and makes paragraphs no longer than the
    bound or its one line, but rules 6-7 judge the paragraph the pieces make, keeping or
    dropping them together.  The cuts depend only on the text: the same on every run.
    Returns the text (``text`` itself when nothing is cut) and the number of blocks cut;
    raises ``ValueError`` if ``max_chars < 1``.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    if len(text) <= max_chars:
        return text, 0
    parts: list[str] = []
    done = 0  # text[:done] is in parts
    blocks_cut = 0
    for start, end in _block_spans(text):
        pieces = len(parts)
        while end - start > max_chars:
            cut = text.rfind("\n", start, start + max_chars + 1)
            if cut < 0:  # the first line alone is longer: it is a piece by itself
                cut = text.find("\n", start + max_chars + 1, end)
                if cut < 0:
                    break
            parts += (text[done : cut + 1], _CUT_LINE)
            done = start = cut + 1
        blocks_cut += len(parts) > pieces
    if not blocks_cut:
        return text, 0
    parts.append(text[done:])
    return "".join(parts), blocks_cut


def _block_spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each block: the text between blank-line separators."""
    start = 0
    for separator in _BLANK_LINES_RE.finditer(text):
        yield start, separator.start()
        start = separator.end()
    yield start, len(text)


# --------------------------------------------------------------------------------------
# book_paragraphs
# --------------------------------------------------------------------------------------

# Heading of a play's cast list: "DRAMATIS PERSONAE", "Persons Represented", ...
_CAST_HEADING_RE = re.compile(
    r"\W*(?:dramatis\s+personae|(?:the\s+)?persons\s+(?:represented|of\s+the\s+play)"
    r"|characters(?:\s+in\s+the\s+play)?)\W*$",
    re.IGNORECASE,
)
_BLANK_LINES_RE = re.compile(r"\n(?:[^\S\n]*\n)+")
# Line break after "letter-" or "--" and before a letter: joined without a space.
# (It starts with the literal "-" so that the regex engine can scan for it quickly.)
_HYPHEN_BREAK_RE = re.compile(r"-(?<=[^\W\d_]-|--)[^\S\n]*\n[^\S\n]*(?=[^\W\d_])")
_WORD_RE = re.compile(r"\S*[^\W_]\S*")  # a token with at least one letter or digit
_LETTER_RE = re.compile(r"[^\W\d_]")
# A speaker tag: 1-4 capitalised words (or all caps) and a TAB: "ROSALIND<TAB>",
# "First Lord<TAB>", "A Lord<TAB>".
_SPEAKER_TAG_RE = re.compile(r"[A-Z]\S*(?: [A-Z(]\S*){0,3}\t[\t ]*(?=\S)")
_SENTENCE_CLOSE_RE = re.compile(r"[.!?][\"'\u2019\u201d)\]]*\s*$")  # line ends a sentence
_SENTENCE_END = ".!?;:,'\"\u2019\u201d)]}\u2026-\u2014\u3002\uff01\uff1f"
_HEADING_MAX_WORDS = 8  # longest all-caps / title line treated as a heading
_CAST_MAX_BLOCKS = 80
_INDENT_TABSIZE = 8


def _indent(line: str) -> int:
    if not line[:1].isspace():
        return 0
    expanded = line.expandtabs(_INDENT_TABSIZE)
    return len(expanded) - len(expanded.lstrip())


def _split_first_line_indents(lines: list[str]) -> list[list[str]]:
    """Split a block at first-line indentation (rule 2 of book_paragraphs)."""
    indents = [_indent(line) for line in lines]
    parts: list[list[str]] = []
    start = 0
    for i in range(1, len(lines) - 1):
        if (
            indents[i] > indents[i - 1]
            and indents[i + 1] < indents[i]
            and _SENTENCE_CLOSE_RE.search(lines[i - 1])
        ):
            parts.append(lines[start:i])
            start = i
    parts.append(lines[start:])
    return parts


def _is_heading_line(line: str) -> bool:
    """Rule 3: a block's leading line that is a heading or a speaker name."""
    s = line.strip()
    return (
        not _LETTER_RE.search(s)
        or (s.isupper() and len(s.split()) <= _HEADING_MAX_WORDS)
        or bool(_NUMBERED_HEADING_RE.match(s))
        or bool(_BARE_HEADING_RE.match(s))
    )


def book_paragraphs(text: str, min_words: int = 3, drops: Counter[str] | None = None) -> list[str]:
    """Reflow hard-wrapped book text into paragraphs of running text.

    ``text`` is a decoded, Gutenberg-stripped body with "\\n" newlines.  Rules, in the
    order they are applied, and why:

    1. Blocks - one or more blank (whitespace-only) lines separate paragraphs: the
       paragraph convention of plain-text books.  (A caller bounds a block's length with
       cut_long_paragraphs first: a book without blank lines is otherwise one block.)
    2. First-line indentation - inside a block, a line indented deeper than the lines
       before and after it starts a new paragraph when the line before it ends a
       sentence (``.``, ``!`` or ``?``, optionally followed by closing quotes/brackets;
       tabs count as 8 columns).  Paradise Lost marks verse paragraphs only by a
       two-space indent, with no blank lines, so without this a whole Book (1,000+
       lines) would be one paragraph.  Hanging indents (a play's tab-indented
       continuation lines, an indented note under ``NOTES:``) are not split because the
       deeper indentation continues, and ballad stanzas that indent every other line
       are not split because those lines do not end sentences.
    3. Leading heading lines of a multi-line block are removed: lines without letters
       (``* * *``, ``+++++``, line counters such as ``00021053`` in Paradise Lost),
       all-caps lines of at most 8 words (``CHAPTER I``, ``SONG.``, a speaker name such
       as ``ORLANDO.`` on its own line), and the headings of rules 6d/6e.  They belong
       to no sentence.
    4. Plays - a speaker tag, i.e. 1-4 words that each start with a capital letter,
       separated by single spaces and followed by a TAB at the very start of the block
       (``ROSALIND<TAB>Dear Celia,``, ``First Lord<TAB>...``, ``A Lord<TAB>...``: the
       layout of As You Like It; ``She ran<TAB>...`` is no tag), is removed and the speech
       kept: the speech is running text, the name is not part of it.  A cast list - the
       blocks after a single-line ``Dramatis Personae`` / ``Persons Represented`` /
       ``Characters`` heading, up to the next numbered heading such as ``ACT I`` (at
       most 80 blocks) - is dropped: it is a table of names, not prose.  Stage
       directions standing alone are dropped by rule 6b.
    5. Reflow - leading indentation and trailing space of each line are stripped, lines
       are joined with one space and every run of whitespace collapses to one space.
       A word hyphenated across a line break (a letter, ``-``, newline, a letter) is
       joined with no space and the hyphen kept (``waistcoat-\\npocket`` ->
       ``waistcoat-pocket``): plain text cannot tell a soft hyphen from a real
       compound, and keeping it loses nothing.  Likewise an unspaced dash ``--`` at the
       end of a line joins the next word with no space (``it--\\nonce`` -> ``it--once``),
       as these texts write dashes unspaced.
    6. Headings and other non-prose paragraphs are dropped (BERT needs running text):

       a. no letter or digit at all: ``* * *``, ``-----``, ``***  ***``;
       b. one square-bracketed span and nothing else: stage directions (``[Exit]``,
          ``[Enter ORLANDO and ADAM]``), ``[Illustration]``, editorial and transcriber
          notes, ``[The End]`` (``[Aside] Speech text. [Exit]`` is kept);
       c. all-caps (every cased letter upper case, ``str.isupper``) and at most 8
          words: ``CHAPTER I``, ``THE END``, ``PRESERVATION AND IMAGING``.  Longer
          all-caps paragraphs are kept: some old etexts are set entirely in capitals and
          that is still running text;
       d. a single line that is a numbered heading: ``chapter/chap/book/part/act/scene/
          canto/stave/volume/vol/section/letter`` + a roman, arabic or spelled-out
          number, then nothing, punctuation or a capitalised title
          (``Chapter 12. The Return``, ``SCENE II<TAB>Lawn before the Duke's palace.``,
          ``Book I``) - but not ``Part one of the plan failed.``;
       e. a front/back-matter word standing alone: ``Preface``, ``Contents``,
          ``Epilogue``, ``Notes``, ``Dramatis Personae``, ``The End``, ``Finis`` ...;
       f. a chapter title: a paragraph that is a single source line of at most 8 words
          and does not end in sentence punctuation (``.!?;:,``, a closing quote or
          bracket, an ellipsis or a dash), e.g. ``Down the Rabbit-Hole``.

    7. ``min_words`` - paragraphs with fewer than ``min_words`` words (tokens that
       contain a letter or digit) are dropped: two-word fragments carry no sentence
       structure worth learning.  (This also drops one- and two-word speeches of a play
       such as ``Alas!``.)
    8. Lists, tables, contents, schedules, name lists (pipelines/text/nonprose.py, which
       says how and why): each block of rules 1-2 is first cut into the blocks of running
       text it holds (``prose_blocks``: schedule entries, table and contents lines, list
       items that are no sentence and heading lines inside a block go, a kept list item
       loses its marker; a block either side of a cut of cut_long_paragraphs is left
       whole), and a paragraph kept by rules 6-7 is still dropped if it lists topics
       inline or is a list of names and addresses (``paragraph_rule``).  ``drops``, if
       given, counts what went by rule (nonprose.RULES).

    So prose gives one paragraph per paragraph; verse gives one paragraph per stanza or
    verse paragraph (its line structure is lost, acceptable for sentence-level
    pre-training data; a poem with no blank lines or indents, like the later Books of
    Paradise Lost, yields very long paragraphs); a play gives one paragraph per speech,
    without speaker names, stage directions and cast list.
    """
    return list(iter_book_paragraphs(text, min_words, drops))


def iter_book_paragraphs(
    text: str, min_words: int = 3, drops: Counter[str] | None = None
) -> Iterator[str]:
    """book_paragraphs, one paragraph at a time: only the one being made is held."""
    drops = drops if drops is not None else Counter()
    numbered_blocks = _blocks(text, drops)
    for _, numbered in itertools.groupby(numbered_blocks, key=lambda numbered: numbered[0]):
        blocks = (block for _, block in numbered)
        lines, more = next(blocks), next(blocks, None)
        if more is not None:  # the blocks either side of cuts of cut_long_paragraphs
            pieces = itertools.chain((lines, more), blocks)
            yield from _cut_paragraph(pieces, min_words, drops)
        else:
            para, single = _reflow(lines)
            if not _dropped(para, single, min_words, drops):
                yield para


def _blocks(text: str, drops: Counter[str]) -> Iterator[tuple[int, list[str]]]:
    """The blocks of rules 1-4 and 8, numbered by paragraph: those either side of a cut are
    one."""
    cast_blocks = 0  # > 0 while skipping a cast list (rule 4)
    number, joinable = 0, False  # joinable: a cut follows the block given last
    for span_start, end in _block_spans(text):
        cut_before, joinable = joinable, False
        chunk = text[span_start:end]
        lines = chunk.split("\n")
        # Only the first/last chunk can start/end with a blank line.
        while lines and not lines[-1].strip():
            lines.pop()
        start = 0
        while start < len(lines) and not lines[start].strip():
            start += 1
        if start == len(lines):
            continue
        if start:
            lines = lines[start:]
        first = lines[0].strip()
        if cast_blocks:
            cast_blocks -= 1
            if not _NUMBERED_HEADING_RE.match(first):
                continue
            cast_blocks = 0
        if len(lines) == 1 and not cut_before and _CAST_HEADING_RE.match(first):
            cast_blocks = _CAST_MAX_BLOCKS
            continue
        if len(lines) > 2 and ("\n " in chunk or "\n\t" in chunk):
            blocks = _split_first_line_indents(lines)
        else:
            blocks = [lines]
        joinable = text.startswith(_CUT_LINE, end + 1)
        if not (cut_before or joinable):  # rule 8 (a cut block is no list, table or contents)
            blocks = [piece for block in blocks for piece in prose_blocks(block, drops)]
        for i, block in enumerate(blocks):
            number += not (cut_before and i == 0)
            yield number, block


def _cut_paragraph(
    pieces: Iterable[list[str]], min_words: int, drops: Counter[str]
) -> Iterator[str]:
    """The paragraphs of a cut block's pieces, which rules 6-7 judge as the one they make
    (joined by spaces, of many lines): held until those cannot drop it (9 words, no 6b)."""
    need = max(min_words, _HEADING_MAX_WORDS + 1)
    held: list[str] = []
    words, bracket = 0, False  # bracket: all so far is "[" and text without "]" (6b)
    paragraphs = (para for para, _ in (_reflow(lines, alone=False) for lines in pieces) if para)
    for para in paragraphs:
        bracket = (bracket and held[-1][-1] != "]") if held else para[0] == "["
        bracket = bracket and para.find("]", 0, len(para) - 1) < 0
        held.append(para)
        words += sum(1 for _ in itertools.islice(_WORD_RE.finditer(para), max(need - words, 0)))
        if words >= need and not bracket:  # kept, whatever follows
            yield from held
            yield from paragraphs
            return
    if held and not _dropped(" ".join(held), False, min_words, drops):
        yield from held


def _reflow(lines: list[str], alone: bool = True) -> tuple[str, bool]:
    """Rules 3-5 (6d-6e too if ``alone``): a block's paragraph ("" if dropped), if one line."""
    start = 0
    while start < len(lines) - 1 and _is_heading_line(lines[start]):
        start += 1
    if start:
        lines = lines[start:]
    single = len(lines) == 1
    first = lines[0].strip()
    if alone and single and (_NUMBERED_HEADING_RE.match(first) or _BARE_HEADING_RE.match(first)):
        return "", single
    tag = _SPEAKER_TAG_RE.match(lines[0])
    if tag:
        lines = [lines[0][tag.end() :], *lines[1:]]
    joined = "\n".join(lines)
    if "-" in joined:
        joined = _HYPHEN_BREAK_RE.sub("-", joined)
    return " ".join(joined.split()), single


def _dropped(para: str, single: bool, min_words: int, drops: Counter[str]) -> bool:
    """Rules 6-8 for one paragraph (of a single line: ``single``); rule 8 counted."""
    if not para:
        return True
    # Count words only as far as any rule needs to look.
    need = max(min_words, _HEADING_MAX_WORDS + 1)
    words = 0
    for _ in _WORD_RE.finditer(para):
        words += 1
        if words >= need:
            break
    if words == 0:  # 6a
        return True
    if para[0] == "[" and para.find("]") == len(para) - 1:  # 6b
        return True
    if words <= _HEADING_MAX_WORDS and para.isupper():  # 6c
        return True
    if _BARE_HEADING_RE.match(para):  # 6e (also after reflow)
        return True
    if single and words <= _HEADING_MAX_WORDS and para[-1] not in _SENTENCE_END:  # 6f
        return True
    if words < min_words:  # 7
        return True
    if (rule := paragraph_rule(para)) is not None:  # 8
        drops[rule] += 1
        return True
    return False


# --------------------------------------------------------------------------------------
# line_documents
# --------------------------------------------------------------------------------------


def line_documents(
    lines: Iterable[str], max_lines: int = 1000, max_chars: int = MAX_DOCUMENT_CHARS
) -> Iterator[list[str]]:
    """Group a one-sentence-per-line file (BookCorpus mirror format) into documents.

    Rules:

    1. Each line is stripped (lines may keep the ``"\\n"`` of file iteration) and every run
       of whitespace in it becomes one space, as a book's paragraphs are reflowed; a
       whitespace-only line is blank.
    2. A blank line ends the current document (a run of blank lines counts once).
    3. No document holds more than ``max_lines`` sentences: after ``max_lines``
       non-blank lines the document is cut and counting restarts.  BookCorpus mirrors
       lost the book boundaries, so a file without blank lines is one stream of
       sentences; fixed windows are the honest, deterministic choice (a cut depends only
       on line counts, never on content).  Nor more than ``max_chars`` characters: the
       document is cut before a line that would take it past them (a line longer than
       that on its own is a document by itself; the caller bounds line length).  Both
       caps apply to every document, so a streaming caller never holds an unbounded one.
    4. Empty documents are never yielded.

    Lazy: ``lines`` is consumed as documents are requested.  Raises ``ValueError`` at
    call time if ``max_lines < 1`` or ``max_chars < 1``.
    """
    if max_lines < 1:
        raise ValueError(f"max_lines must be >= 1, got {max_lines}")
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    return _line_documents(lines, max_lines, max_chars)


def _line_documents(lines: Iterable[str], max_lines: int, max_chars: int) -> Iterator[list[str]]:
    doc: list[str] = []
    chars = 0
    for line in lines:
        sentence = " ".join(line.split())
        if not sentence:
            if doc:
                yield doc
                doc, chars = [], 0
            continue
        if doc and chars + len(sentence) > max_chars:
            yield doc
            doc, chars = [], 0
        doc.append(sentence)
        chars += len(sentence)
        if len(doc) >= max_lines:
            yield doc
            doc, chars = [], 0
    if doc:
        yield doc
