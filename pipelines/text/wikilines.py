"""Two line rules of MediaWiki's renderer that the wikitext cleaner (`wikitext.py`) applies:

- preformatted lines: a line that starts with a space is shown as code (<pre>), not prose:
  `drop_preformatted_lines` blanks such lines of the raw wikitext (comments removed and
  <nowiki> content escaped, nothing else yet: a line that starts with "<ref …/> " does not
  start with a space), so that they end their paragraph as any structure line does. Only
  lines at template depth 0, outside tags opened on an earlier line (HTML block elements,
  extension tags such as <ref> or <poem>) and without a block-level tag of their own count:
  an infobox's " | name = x" and a multi-line template's closing " }}" are kept for
  template expansion, and a line in a wiki table goes with the table anyway. A line that
  opens a template it does not close is kept, so that its template still closes;
- bold and italic: `resolve_bold_line` (and `resolve_quotes_apart` for a link's label, which
  MediaWiki reads apart from its line) removes the markup runs of apostrophes of a line that
  holds a bold run (''') the way MediaWiki's doQuotes reads them, keeping the apostrophes
  that are text: of 4 the first is an apostrophe ("''Iliad'''s" → "Iliad's"), of more than
  5 all but the last 5, and where the line holds an odd number of both italic ('') and bold
  (''') runs, one bold run is an apostrophe and an italic run (the first after a one-letter
  word, else after a longer word, else after a space). On a line without a bold run every
  run is italic markup: the caller removes those in one pass over all its text.

Both are written for speed: the first looks only at the lines its own pattern finds (a
search that is also the test for whether there are any), the second is called on the lines
of running text that hold "'''" only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# The candidates: a line that starts with spaces then a character that is not "|", "}" or
# "!" (a template's or table's own line, which the line pass drops anyway at depth 0).
# Searching for it is also the cheap test: most articles have none.
_SPACE_LED_LINE = re.compile(r"\n( ++[^\s|}!][^\n]*+)")
# Elements whose lines are not preformatted, counted open and closed to know the depth: HTML
# block elements (not those often left unclosed in wikitext: <p>, <li>, <td>) and the
# extension tags, whose content the cleaner removes later (a self-closing one holds none).
_CONTAINER_TAG = re.compile(
    r"<(/?)(?:blockquote|center|div|span|font|small|big|table|ul|ol|dl|ref|references|"
    r"gallery|poem|math|chem|ce|code|source|syntaxhighlight|pre|timeline|score|hiero|imagemap|"
    r"graph|mapframe|maplink|templatedata|inputbox|categorytree|includeonly|noinclude)\b"
    r"[^>]*+(?<!/)>",
    re.I,
)
# A line that holds a block-level tag is not preformatted either (MediaWiki's own list).
_BLOCK_LEVEL_TAG = re.compile(
    r"<(?:/?(?:table|h[1-6]|pre|tr|td|th|p|ul|ol|dl|li|blockquote|div|center)|hr)\b", re.I
)


def drop_preformatted_lines(text: str) -> str:
    """The text with every preformatted (space-led) line made blank."""
    pieces: list[str] = []
    copied = 0  # text[:copied] is in pieces
    counted = 0  # template and tag depths are counted up to here
    template_depth = tag_depth = 0
    for start, line in _space_led_lines(text):
        template_depth += text.count("{{", counted, start) - text.count("}}", counted, start)
        template_depth = max(template_depth, 0)
        if text.find("<", counted, start) >= 0:
            for tag in _CONTAINER_TAG.finditer(text, counted, start):
                tag_depth = max(tag_depth + (-1 if tag.group(1) else 1), 0)
        counted = start
        if template_depth or tag_depth:
            continue
        if line.lstrip(" ").startswith("{|") or line.count("{{") != line.count("}}"):
            continue  # a table's own line; a template that goes on below
        if "<" in line and _BLOCK_LEVEL_TAG.search(line):
            continue
        pieces.append(text[copied:start])
        copied = start + len(line)
    if not pieces:
        return text
    pieces.append(text[copied:])
    return "".join(pieces)


def _space_led_lines(text: str) -> Iterator[tuple[int, str]]:
    """(start, line) of each candidate line: the first line, then those after a newline."""
    if text.startswith(" "):
        first = text.partition("\n")[0]
        if _SPACE_LED_LINE.match("\n" + first):
            yield 0, first
    for match in _SPACE_LED_LINE.finditer(text):
        yield match.start(1), match.group(1)


_QUOTE_RUN = re.compile(r"('{2,})")


def resolve_quotes_apart(text: str) -> str:
    """A link's label without its quote markup, read as MediaWiki reads it: apart from the
    line it sits in, so that "''[[Republic (Plato)|''Republic'']]''" does not make runs
    of 4 apostrophes."""
    if "'''" in text:
        text = resolve_bold_line(text)
    return _QUOTE_RUN.sub("", text)


def resolve_bold_line(line: str) -> str:
    """One line that holds a bold run (''') as MediaWiki's doQuotes reads it: its markup
    runs removed, apostrophes that are text kept. A line whose runs are all markup as they
    stand (runs of 2 and 3, not an odd number of both) is returned as it is."""
    if "''''" not in line:  # runs of 2 and 3 only: all markup unless both counts are odd,
        bolds = line.count("'''")  # which the caller removes with the italic runs
        if not bolds % 2 or not (line.count("''") - bolds) % 2:
            return line
    parts = _QUOTE_RUN.split(line)
    italics = bolds = 0
    for i in range(1, len(parts), 2):
        length = len(parts[i])
        if length == 4:  # an apostrophe, then bold
            parts[i - 1] += "'"
            length = 3
        elif length > 5:  # apostrophes, then bold italic
            parts[i - 1] += "'" * (length - 5)
            length = 5
        parts[i] = "'" * length
        if length == 2:
            italics += 1
        elif length == 3:
            bolds += 1
        else:
            italics += 1
            bolds += 1
    if italics % 2 and bolds % 2:
        single_letter = multi_letter = after_space = -1
        for i in range(1, len(parts), 2):
            if len(parts[i]) != 3:
                continue
            before = parts[i - 1]
            if before[-1:] == " ":
                if after_space < 0:
                    after_space = i
            elif before[-2:-1] == " ":
                single_letter = i
                break
            elif multi_letter < 0:
                multi_letter = i
        chosen = next((i for i in (single_letter, multi_letter, after_space) if i >= 0), -1)
        if chosen >= 0:  # an apostrophe, then italic
            parts[chosen - 1] += "'"
            parts[chosen] = "''"
    return "".join(parts[0::2])
