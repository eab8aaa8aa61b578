"""Project Gutenberg boilerplate: where a book's own text starts and ends, and its title.

Beam-free and pure, tested on literal strings. Gutenberg files wrap the book in a licence
header and footer, marked by `*** START OF … ***` / `*** END OF … ***` lines in most files
and by nothing in some old ones; `strip_gutenberg` keeps what is between, `book_title` reads
the title from the header before it goes.
"""

from __future__ import annotations

import re

# --------------------------------------------------------------------------------------
# Project Gutenberg boilerplate
# --------------------------------------------------------------------------------------

_SP = r"[^\S\n]+"  # spaces inside one line
# Lines after which the body starts:
#   *** START OF THE/THIS PROJECT GUTENBERG EBOOK X ***
#   *END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*
_START_MARKER_RE = re.compile(
    rf"[^\w\n]*(?:start{_SP}of{_SP}(?:the|this){_SP}project{_SP}gutenberg"
    rf"|end[^\w\n]*the{_SP}small{_SP}print)",
    re.IGNORECASE,
)
# A START marker whose title wraps onto the next line(s) before its closing "***".
_WRAPPED_START_RE = re.compile(r"\s*\*{3}\s*start\b.*[^*\s]\s*$", re.IGNORECASE)
# Lines at which the body ends (the line itself is boilerplate too):
#   *** END OF THE/THIS PROJECT GUTENBERG EBOOK X ***  /  End of (the) Project Gutenberg's X
#   *START*THE SMALL PRINT! ...  /  *****SMALL PRINT!*****  (a licence at the end of the file)
_END_MARKER_RE = re.compile(
    rf"[^\w\n]*(?:(?P<pg>end{_SP}of{_SP}(?:(?:the|this){_SP})?project{_SP}gutenberg)"
    rf"|start[^\w\n]*the{_SP}small{_SP}print|small{_SP}print!)",
    re.IGNORECASE,
)
# The modern end marker; start markers after it belong to the licence, not the header.
_STRONG_END_RE = re.compile(
    rf"[^\w\n]*end{_SP}of{_SP}(?:the|this){_SP}project{_SP}gutenberg", re.IGNORECASE
)
# Every marker line contains one of these words; only such lines are tested (speed).
_MARKER_WORDS = ("gutenberg", "small")
_MARKER_WORDS_RE = re.compile(r"gutenberg|small", re.IGNORECASE)
_GUTENBERG_RE = re.compile(r"project\s+gutenberg", re.IGNORECASE)
# What the paragraphs of an unmarked old-style header talk about.
_HEADER_MENTION_RE = re.compile(r"gutenberg|\be-?texts?\b|\be-?books?\b", re.IGNORECASE)
# Producer credits that follow the header.
_CREDIT_RE = re.compile(
    r"""\W*(?:
        produced\ by | prepared\ by | e-?text\ prepared | e-?book\ prepared
      | this\ e-?(?:text|book)\ (?:was|is|has\ been)\ (?:prepared|produced|created|transcribed)
      | transcribed\ (?:from|by) | scanned\ (?:and\ proof(?:ed|read)\ )?by | digitized\ by
      | html\ version\ by
    )""",
    re.IGNORECASE | re.VERBOSE,
)
# A run of non-blank lines.
_BLOCK_RE = re.compile(r"[^\S\n]*\S[^\n]*(?:\n[^\S\n]*\S[^\n]*)*")
_LEADING_BLANK_LINES_RE = re.compile(r"(?:[^\S\n]*\n)+")
_HEADER_SCAN_LINES = 250  # an unmarked header must end within this many lines
_HEADER_GAP = 3  # ... and ends before this many consecutive paragraphs without a mention
_CREDIT_SCAN_BLOCKS = 5


def _line_offset(text: str, n_lines: int) -> int:
    """Offset just past the first ``n_lines`` lines of ``text`` (or its length)."""
    pos = -1
    for _ in range(n_lines):
        pos = text.find("\n", pos + 1)
        if pos < 0:
            return len(text)
    return pos


def _unmarked_header_end(text: str) -> int:
    """Offset where an old-style header without START marker ends; 0 if there is none."""
    limit = _line_offset(text, _HEADER_SCAN_LINES)
    header_end = 0
    gap = 0
    for n, m in enumerate(_BLOCK_RE.finditer(text, 0, limit)):
        if n == 0:
            if not _GUTENBERG_RE.search(m.group()):
                return 0
            header_end = m.end()
        elif _HEADER_MENTION_RE.search(m.group()):
            header_end, gap = m.end(), 0
        else:
            gap += 1
            if gap >= _HEADER_GAP:
                break
    return header_end


def _marker_lines(text: str) -> list[tuple[int, str]]:
    """``(offset, line)`` of every line containing a marker word, in text order."""
    low = text.lower()
    if len(low) == len(text):
        hits = []
        for word in _MARKER_WORDS:
            pos = low.find(word)
            while pos >= 0:
                hits.append(pos)
                pos = low.find(word, pos + 1)
    else:  # lower() changed some lengths (rare Unicode); offsets would not line up
        hits = [m.start() for m in _MARKER_WORDS_RE.finditer(text)]
    starts = sorted({text.rfind("\n", 0, pos) + 1 for pos in hits})
    lines = []
    for start in starts:
        stop = text.find("\n", start)
        lines.append((start, text[start : stop if stop >= 0 else len(text)]))
    return lines


def _body_span(text: str) -> tuple[int, int, bool, int]:
    """``(body_start, body_end, found, header_end)`` offsets; rules in strip_gutenberg."""
    candidates = _marker_lines(text)
    limit = next((at for at, line in candidates if _STRONG_END_RE.match(line)), len(text))
    marker = None
    for at, line in candidates:
        if at >= limit:
            break
        if _START_MARKER_RE.match(line):
            marker = (at, line)
    if marker is not None:
        found = True
        header_end = begin = marker[0] + len(marker[1])
        if _WRAPPED_START_RE.match(marker[1]):
            # "*** START OF THIS PROJECT GUTENBERG EBOOK A VERY\nLONG TITLE ***"
            pos = begin
            for _ in range(3):
                nxt = text.find("\n", pos + 1)
                nxt = len(text) if nxt < 0 else nxt
                line = text[pos + 1 : nxt]
                if not line.strip():
                    break
                if line.rstrip().endswith("***"):
                    header_end = begin = nxt
                    break
                pos = nxt
    else:
        header_end = begin = _unmarked_header_end(text)
        found = begin > 0
    end = len(text)
    for at, line in candidates:
        if at < begin:
            continue
        m = _END_MARKER_RE.match(line)
        # A small-print licence only ends the body in the second half of the file, so a
        # header licence whose closing line is damaged cannot swallow the whole book.
        if m and (m.group("pg") or 2 * at >= len(text)):
            end = at
            found = True
            break
    if found:
        for n, m in enumerate(_BLOCK_RE.finditer(text, begin, end)):
            if n >= _CREDIT_SCAN_BLOCKS:
                break
            if not (_CREDIT_RE.match(m.group()) or _GUTENBERG_RE.search(m.group())):
                break
            begin = m.end()
    return begin, end, found, header_end


def strip_gutenberg(text: str) -> tuple[str, bool]:
    """Remove Project Gutenberg header, licence and trailer; return ``(body, found)``.

    ``text`` must have "\\n" newlines (as produced by :func:`decode_book`).  When no
    boilerplate is found the text is returned unchanged with ``False`` (non-Gutenberg
    books such as the Canterbury-corpus Alice and As You Like It are left alone).  All
    markers match case-insensitively at the start of a line, after optional
    punctuation/asterisks.  Rules:

    1. Body start - after the last *start marker* that comes before the first
       ``*** END OF THE/THIS PROJECT GUTENBERG`` line (the last one, because 2000s files
       can have both a small-print block and a START line in their header):

       * ``*** START OF THE PROJECT GUTENBERG EBOOK TITLE ***`` (modern) and
         ``*** START OF THIS PROJECT GUTENBERG EBOOK TITLE ***`` (2000s); a marker whose
         title wraps onto the next line(s) is consumed up to the closing ``***``;
       * ``*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*`` (1990s: the
         licence sits in the header and this line closes it).

    2. Old header without a marker (1990s etexts such as ``plrabn12.txt`` and
       ``lcet10.txt``) - only if the very first paragraph mentions "Project Gutenberg":
       the header is the leading run of paragraphs up to the last one that mentions
       Gutenberg / etext / ebook, ending before three consecutive paragraphs that mention
       none of them, within the first 250 lines.  (A producer's introduction talks about
       "this etext" every other paragraph; a book's opening does not.)
    3. Body end - at the first of these lines after the body start (the line and all
       after it are dropped): ``*** END OF THE/THIS PROJECT GUTENBERG ...``,
       ``End of (the/this) Project Gutenberg('s) ...`` (also ``*End of ...``), and a
       licence placed at the end of an old file (``*START*THE SMALL PRINT!``,
       ``*****SMALL PRINT!``), the latter only in the second half of the text so that
       a header licence with a damaged closing line cannot swallow the book.
    4. Producer credits - once boilerplate was found, up to five leading body paragraphs
       that start with ``Produced by``, ``E-text prepared by``, ``Transcribed from``,
       ``This etext was prepared by`` (and similar) or mention Project Gutenberg are
       dropped as well: they are metadata, not book text.
    5. Leading blank lines and trailing whitespace of the body are removed.
    """
    begin, end, found, _ = _body_span(text)
    if not found:
        return text, False
    body = text[begin:end].rstrip()
    lead = _LEADING_BLANK_LINES_RE.match(body)
    return (body[lead.end() :] if lead else body), True


# --------------------------------------------------------------------------------------
# book_title
# --------------------------------------------------------------------------------------

_TITLE_FIELD_RE = re.compile(r"\s*title:\s*(.*?)\s*$", re.IGNORECASE)
_PG_OF_RE = re.compile(
    r"project\s+gutenberg(?:'s)?\s+(?:e-?text|e-?book|edition|release)\s+of\s*:?\s*(.*)$",
    re.IGNORECASE,
)
_START_TITLE_RE = re.compile(
    r"\W*start of (?:the|this) project gutenberg e-?(?:book|text)\s*(.*?)[\s*]*$",
    re.IGNORECASE,
)
_BY_AUTHOR_RE = re.compile(r"(?:,\s*by\s+.*|\s+by\s+(?:[A-Z][\w.'-]*\s*){1,4})$")


def _clean_title(raw: str) -> str:
    title = _BY_AUTHOR_RE.sub("", raw.strip().strip("*").strip())
    return title.strip().rstrip(",;:").strip()


def book_title(text: str, fallback: str) -> str:
    """Title from a Project Gutenberg header, else ``fallback``.

    Call it on the decoded text *before* :func:`strip_gutenberg` (it reads the header).
    Only the header is searched - the text before the START / small-print marker, or
    the unmarked old-style header of rule 2 of :func:`strip_gutenberg` - so a "Title:"
    line inside a book is never taken for metadata.  In order of preference:

    1. ``Title: ...`` (modern header), joined with its indented continuation lines.
    2. ``The Project Gutenberg EBook/Etext of TITLE, by AUTHOR`` (also ``...'s``, and
       ``release of:`` / ``edition of:`` with the title on the next non-blank line, as
       in ``plrabn12.txt``).
    3. The title inside ``*** START OF THE PROJECT GUTENBERG EBOOK TITLE ***``.

    A trailing ``, by AUTHOR`` is removed, and so is `` by Name Name`` (1-4 capitalised
    words ending the line: ``Paradise Lost by John Milton`` -> ``Paradise Lost``).
    Surrounding ``*``, whitespace and trailing ``,;:`` are stripped; an empty result
    falls through to the next rule and finally to ``fallback``.
    """
    header_end = _body_span(text)[3]
    header = text[:header_end].split("\n") if header_end else []
    for i, line in enumerate(header):
        m = _TITLE_FIELD_RE.match(line)
        if m and m.group(1):
            parts = [m.group(1)]
            for nxt in header[i + 1 :]:
                if not nxt[:1].isspace() or not nxt.strip():
                    break
                parts.append(nxt.strip())
            title = _clean_title(" ".join(parts))
            if title:
                return title
    for i, line in enumerate(header):
        m = _PG_OF_RE.search(line)
        if m:
            raw = m.group(1).strip(" \t*")
            if not raw:
                raw = next((nxt for nxt in header[i + 1 :] if nxt.strip()), "")
            title = _clean_title(raw)
            if title:
                return title
    for line in header:
        m = _START_TITLE_RE.match(line)
        if m:
            title = _clean_title(m.group(1))
            if title:
                return title
    return fallback
