"""Wikitext → paragraphs of running text, per the BERT paper, Beam-free.

"For Wikipedia we extract only the text passages and ignore lists, tables, and headers"
(Devlin et al., 2019). `clean_wikitext` returns the article's paragraphs as plain text:

- dropped with their content: comments, <ref>/<references>, math/chem/code/source/
  syntaxhighlight/pre/gallery/timeline/score/… blocks, HTML tables, lists and headings
  (<ul>, <ol>, <dl>, <h1>–<h6>, nested ones too), templates (infoboxes, navboxes, citations,
  hatnotes, IPA, footnotes, maintenance tags), wiki tables `{| … |}`, File/Image links with
  their captions, Category and interlanguage links, headers, list/definition/indented
  lines, preformatted (space-led) lines, horizontal rules, magic words, and whole trailing
  sections (References, See also, External links, Notes, Further reading, Bibliography, …);
- dropped to where they would have ended: an unclosed line block (<gallery>, <math>, …) and
  an unclosed "{{" to the end of the paragraph, an unclosed File link to the end of the line;
- rendered: the text-bearing templates of `pipelines.text.wikitemplates` ({{convert|10|km}} →
  "10 km", {{lang|fr|texte}} → "texte", dates, …), internal links → their label, Media links
  and external links (every MediaWiki URL scheme, mailto: too) → their label, bold/italic
  markup removed as MediaWiki reads it (the apostrophe of "''Iliad'''s" is text), the other
  tags MediaWiki knows (HTML, parser and extension tags) removed with their content kept
  (<span>, <noinclude>, <templatestyles />, an unclosed <ref>; an unknown name, as in
  "List<T>", is text, as on Wikipedia), HTML entities resolved, <nowiki> content kept as the
  text it is ("{{cite web}}");
- tidied: no "()" (or "(; )") left where a pronunciation or template was removed, no doubled
  spaces, no space before punctuation; paragraphs with fewer than `min_words` words dropped;
- marked: where removed markup carried words of a sentence (an inline <math>, <chem>, <ce>,
  <code> or <hiero>; a template whose words cannot be rendered reproducibly, such as
  {{inflation}} or {{CURRENTYEAR}}: see `pipelines.text.wikitemplates`), the paragraph holds
  `GAP`, one private-use character, instead of nothing. The caller drops every sentence
  holding it after splitting, so that "The area of a circle is <math>A = \\pi r^2</math>
  where r is the radius." gives no sentence rather than one with a hole.

It works by regular-expression passes, innermost construct first, then one pass over lines.
That is what makes it fast (`python -m bench.extract` measures it against WikiExtractor,
`python -m bench.extract_stages` alone), and it is why the passes are ordered as they are:
see `clean_wikitext`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from functools import partial

from pipelines.text.template_renderers import GAP
from pipelines.text.wikilines import (
    drop_preformatted_lines,
    resolve_bold_line,
    resolve_quotes_apart,
)
from pipelines.text.wikitemplates import template_renderer

# MediaWiki's own limits: $wgMaxArticleSize (2 MiB) and the template expansion depth (40).
# A page beyond them does not render on Wikipedia either, so it is rejected, not guessed at.
MAX_PAGE_BYTES = 2 * 1024 * 1024
MAX_TEMPLATE_DEPTH = 40

TRAILING_SECTIONS = frozenset(
    {
        "references",
        "see also",
        "external links",
        "notes",
        "further reading",
        "bibliography",
        "sources",
        "citations",
        "footnotes",
        "notes and references",
        "references and notes",
        "works cited",
        "external sources",
        "literature",
        "references and further reading",
        "notes and citations",
        "general references",
        "endnotes",
        "explanatory notes",
        "related pages",
    }
)

# Namespace names (lower-case) whose links are not running text; siteinfo adds local names.
# A Media link ([[Media:Anthem.ogg|the anthem]]) shows its label, a File link its image.
DEFAULT_FILE_NAMESPACES = frozenset({"file", "image"})
DEFAULT_MEDIA_NAMESPACES = frozenset({"media"})
DEFAULT_CATEGORY_NAMESPACES = frozenset({"category"})
# Sister-project prefixes whose links read as text ([[wikt:word|word]]); any other short
# lower-case prefix ([[fr:Paris]]) is an interlanguage link and is dropped.
_SISTER_PREFIXES = frozenset(
    {
        "w",
        "wikt",
        "wiktionary",
        "s",
        "wikisource",
        "q",
        "wikiquote",
        "b",
        "wikibooks",
        "n",
        "wikinews",
        "v",
        "wikiversity",
        "voy",
        "wikivoyage",
        "c",
        "commons",
        "m",
        "meta",
        "species",
        "wikispecies",
        "d",
        "wikidata",
        "mw",
        "mediawikiwiki",
        "f",
        "phab",
    }
)
# Language codes as interlanguage links write them: fr, simple, be-x-old, zh-min-nan, roa-rup.
_INTERLANGUAGE_PREFIX = re.compile(r"(?:[a-z]{2,3}|simple)(?:-[a-z0-9]{1,12})*")


class WikitextError(ValueError):
    """A page that cannot be rendered (beyond MediaWiki's own limits)."""


# Blocks dropped with their content. <includeonly> content is not shown on the page itself
# (<noinclude> content is: only its tags go, with the other known tags: _KNOWN_TAG).
# Those that carry words of the sentence they sit in (formulas, code) leave GAP behind.
_GAP_BLOCK_TAGS = frozenset({"math", "chem", "ce", "code", "hiero"})
# Those written over lines of their own: left unclosed, they go to the end of the paragraph.
_LINE_BLOCK_TAGS = (
    "math|chem|ce|code|source|syntaxhighlight|pre|gallery|timeline|score|hiero|imagemap|"
    "graph|mapframe|templatedata|inputbox|categorytree|poem"
)
_OTHER_BLOCK_TAGS = "maplink|includeonly|table|charinsert|indicator|section"
_REF_TAGS = "ref|references"
_DROPPED_BLOCK_TAGS = f"{_REF_TAGS}|{_LINE_BLOCK_TAGS}|{_OTHER_BLOCK_TAGS}"
# HTML lists and headings: dropped with their content, innermost first.
_HTML_LIST_TAGS = "ul|ol|dl|h[1-6]"
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)


def _first_letters(tags: str) -> str:
    """The first letters of tag names: a cheap test before the alternatives are tried in turn
    at each "<" (most are "<ref" or "</")."""
    return "".join(sorted({tag[0] for tag in tags.split("|")}))


# "<tag …>" then anything up to the first "</tag>": written as runs of non-"<" and single "<"
# that do not close, not as a lazy ".*?" that tries the closing tag at every character.
# First every self-closing block tag and every <ref>, the most common blocks by far, by a
# pattern replaced by nothing (no Python call per match); then the other blocks. A line
# block with no "</tag>" after it goes to the end of its paragraph (a blank line). The same
# pass drops the innermost HTML lists and headings (no list or heading tag inside).
_SELF_CLOSING_BLOCK_OR_REF = re.compile(
    rf"<(?=[{_first_letters(_DROPPED_BLOCK_TAGS)}])(?:(?:{_DROPPED_BLOCK_TAGS})\b[^>]*/\s*>"
    rf"|({_REF_TAGS})\b[^>]*+>[^<]*+(?:<(?!/\1\s*>)[^<]*+)*+</\1\s*>)",
    re.I,
)
_REST_OF_PARAGRAPH = r"[^\n]*+(?:\n(?![ \t]*+(?:\n|\Z))[^\n]*+)*+"
_INNERMOST_HTML_LIST = (
    rf"(?P<list>{_HTML_LIST_TAGS})\b[^>]*+>[^<]*+(?:<(?!/?(?:{_HTML_LIST_TAGS})\b)[^<]*+)*+"
    r"</(?P=list)\s*>"
)
_BLOCK_START = _first_letters(f"{_LINE_BLOCK_TAGS}|{_OTHER_BLOCK_TAGS}|ul|ol|dl|h")
_BLOCK = re.compile(
    rf"<(?=[{_BLOCK_START}{_BLOCK_START.upper()}])"
    rf"(?:(?P<tag>(?P<line>{_LINE_BLOCK_TAGS})|{_OTHER_BLOCK_TAGS})"
    r"\b[^>]*+>(?:[^<]*+(?:<(?!/(?P=tag)\s*>)[^<]*+)*+(?P<close></(?P=tag)\s*>)"
    rf"|(?(line){_REST_OF_PARAGRAPH}|(?!)))|{_INNERMOST_HTML_LIST})",
    re.I,
)
_HTML_LIST = re.compile(rf"<{_INNERMOST_HTML_LIST}", re.I)
_NOWIKI = re.compile(r"<nowiki\s*/>|<nowiki>(.*?)</nowiki>", re.I | re.S)
# What <nowiki> content keeps from being read as markup: written as character references,
# which the tidy pass resolves at the end. Entities in it are resolved first (as on
# Wikipedia), so that "&" is one of those characters too.
_NOWIKI_ESCAPES = str.maketrans({char: f"&#{ord(char)};" for char in "&{}[]|'<>=*#:;!_~"})
# Possessive quantifiers (Python ≥ 3.11): no catastrophic backtracking on unclosed "{{".
_TEMPLATE = re.compile(r"\{\{((?:[^{}]++|\{(?!\{)|\}(?!\}))*+)\}\}")
_UNCLOSED_TEMPLATE = re.compile(rf"\{{\{{{_REST_OF_PARAGRAPH}")
_TEMPLATE_PARAMETER = re.compile(r"\{\{\{([^{}|]*+)(?:\|([^{}]*+))?\}\}\}")
# MediaWiki's URL schemes: those written with "//" (and "//" alone), then those without.
# Not re.I, which makes the engine slow to try the schemes at every "[": http and ftp, by far
# the most common, in any case; the others as MediaWiki writes them, in lower case. The URL
# ends where MediaWiki ends it, before a space, a bracket, "<", ">" or a double quote (so
# that "[http://[http://…" costs no scan to the end of the text at each "["); the label may
# follow without a space.
_EXTERNAL_LINK = re.compile(
    r"\[(?!\[)(?:(?:(?:[Hh][Tt][Tt][Pp][Ss]?|[Ff][Tt][Pp][Ss]?|sftp|ssh|git|svn|ircs?|gopher|"
    r"telnet|nntp|mms|redis|worldwind):)?//[^\s\[\]<>\"]*+|"
    r"(?:mailto|news|tel|urn|sips?|xmpp|geo|magnet|bitcoin|sms|matrix):[^\s\[\]<>\"]++)"
    r"[ \t]*+([^\]\n]*+)\]"
)
# Single brackets may sit inside a link (a File caption's "[above]"); doubled ones may not.
_LINK = re.compile(r"\[\[((?:[^\[\]]++|\[(?!\[)|\](?!\]))*+)\]\]")
# What an unclosed link left: "[[", its namespace if any, the rest of its line.
_UNCLOSED_LINK = re.compile(r"\[\[[ \t]*+([^\[\]|:\n]{1,40}+):[^\n]*+")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_HEADING = re.compile(r"(={1,6})(.+?)\1\s*$")
_BOLD_ITALIC = re.compile(r"'''*")  # '{2,} spelled so that the engine scans for "''"
_BOLD = re.compile("'''")  # searched for as a pattern: faster than str's search here
_LINE_BREAK_TAG = re.compile(r"<br\s*/?\s*>", re.I)
# The tags left after the passes above go, their content kept, if MediaWiki knows the name:
# it shows any other "<name …>" as text ("std::vector<int>", "List<T>", "x<y or y>z"). The
# HTML tags it allows (its Sanitizer's list), then Wikipedia's parser and extension tags,
# whose leftovers are markup: self-closing (<templatestyles … />, <phonos … />), unclosed
# (<ref …>, <includeonly>), a lone closing tag, or content shown (<noinclude>, <langconvert>).
# A name ends at a space, "/" or ">", as MediaWiki reads it.
_HTML_TAG_NAMES = (
    "abbr|b|bdi|bdo|big|blockquote|br|caption|center|cite|code|data|dd|del|dfn|div|dl|dt|em|"
    "font|h[1-6]|hr|i|ins|kbd|li|link|mark|meta|ol|p|pre|q|rb|rp|rt|rtc|ruby|s|samp|small|"
    "span|strike|strong|sub|sup|table|td|th|time|tr|tt|u|ul|var|wbr"
)
_PARSER_TAG_NAMES = (
    "categorytree|ce|charinsert|chem|gallery|graph|hiero|imagemap|includeonly|indicator|"
    "inputbox|langconvert|mapframe|maplink|math|noinclude|nowiki|onlyinclude|phonos|poem|ref|"
    "references|score|section|source|syntaxhighlight|templatedata|templatestyles|timeline"
)
_KNOWN_TAG = re.compile(rf"</?(?:{_HTML_TAG_NAMES}|{_PARSER_TAG_NAMES})(?=[\s/>])[^<>\n]*+>", re.I)
# The tidy-up runs on all paragraphs at once, one per line: no pattern may cross a "\n".
# Each pattern starts with a literal or a rare character where it can: a leading " *" would
# make the regex engine try every space of the text (this made tidying 2/3 of the time).
_ODD_SPACES = ("\t", "\u00a0", "\u2009", "\u200a", "\u202f", "\u3000")
_SPACE_RUN = re.compile(r"   *")  # " {2,}" spelled so that the engine scans for "  "
_PARENTHESES = re.compile(r"\(([^()\n]*)\)")
_EMPTY_SQUARE_BRACKETS = re.compile(r"\[[ ,;:]*\]")
_SPACE_TO_DROP = re.compile(r" (?:(?<=[(\[] )|(?=[,.;:!?)\]%]))")
_ADJACENT_PUNCT = re.compile(r"[,;][,;]")
_DOUBLED_PUNCT = re.compile(r"([,;])(?: *[,;])+")


def clean_wikitext(
    text: str,
    *,
    min_words: int = 0,
    file_namespaces: frozenset[str] = DEFAULT_FILE_NAMESPACES,
    category_namespaces: frozenset[str] = DEFAULT_CATEGORY_NAMESPACES,
    media_namespaces: frozenset[str] = DEFAULT_MEDIA_NAMESPACES,
) -> list[str]:
    """Return the running-text paragraphs of one article's wikitext.

    Raises WikitextError for a page beyond MediaWiki's size or template-depth limits.
    """
    if len(text) > MAX_PAGE_BYTES and len(text.encode("utf-8")) > MAX_PAGE_BYTES:
        raise WikitextError(
            f"page is {len(text.encode('utf-8'))} bytes, over MediaWiki's {MAX_PAGE_BYTES}"
        )
    # 1. Things whose content is never text. Comments first: they may hide any markup; then
    # <nowiki>, whose content is text whatever markup it holds.
    text = _COMMENT.sub("", text)
    if "<" in text:
        text = _NOWIKI.sub(_nowiki_content, text)
    # Preformatted lines (a leading space in the wikitext as written) while templates and
    # tags still show where they are. No `"\n " in text` first: its own pattern finds a
    # candidate sooner than str's search.
    text = drop_preformatted_lines(text)
    if "<" in text:
        text = _SELF_CLOSING_BLOCK_OR_REF.sub("", text)
        lists: list[str] = []
        text = _BLOCK.sub(_block_dropper(lists), text)
        while lists:  # a list held another: the outer one is innermost now
            text, count = _HTML_LIST.subn("", text)
            if not count:
                break
    # 2. Templates, innermost first, so an outer template sees rendered inner text; links
    # inside a template's arguments are still there, so the argument split respects [[…|…]].
    if "{{" in text:
        text = _expand_templates(text)
    # 3. Links: external ones first (they hold single brackets), then internal ones
    # innermost first, so a File link's caption links are gone before the File link is.
    if "[" in text:
        text = _EXTERNAL_LINK.sub(_external_link_label, text)
        render_link = _link_renderer(file_namespaces, category_namespaces, media_namespaces)
        for _ in range(MAX_TEMPLATE_DEPTH):
            text, count = _LINK.subn(render_link, text)
            if not count:
                if "[[" in text:  # unclosed: a File link goes to the end of its line
                    text = _UNCLOSED_LINK.sub(partial(_unclosed_link, file_namespaces), text)
                break
            if "[[" not in text:
                break
    # No `"__" in text` first: on text with any character past U+00FF, str's search for a
    # short needle is slower than the pattern's own scan for its literal prefix.
    text = _MAGIC_WORD.sub("", text)
    # 4. Lines: headers, lists, tables and trailing sections go; paragraphs are assembled,
    # then tidied all at once, one per line (one regex pass per rule, not one per paragraph).
    raw_paragraphs = list(_paragraph_lines(text))
    if not raw_paragraphs:
        return []
    paragraphs = []
    for paragraph in _tidy_inline("\n".join(raw_paragraphs)).split("\n"):
        paragraph = paragraph.strip()
        # Splitting at most min_words - 1 times counts words up to min_words, no further.
        if paragraph and (min_words <= 1 or len(paragraph.split(None, min_words - 1)) >= min_words):
            paragraphs.append(paragraph)
    return paragraphs


def _block_dropper(lists: list[str]):
    """The replacement of a _BLOCK match: nothing for a block that is not text (<ref>,
    <gallery>, a list), GAP for one that held words. A list or heading is noted in `lists`:
    one may have held it. Groups by number: 1 the tag, 3 its closing tag, 4 the list's tag."""

    def replacement(match: re.Match[str]) -> str:
        tag = match[1]
        if tag is None:
            lists.append(match[4])
            return ""
        if tag[0] in "mchMCH" and tag.lower() in _GAP_BLOCK_TAGS:
            return GAP
        return "" if match[3] else _cut_short(match, block=True)

    return replacement


def _cut_short(match: re.Match[str], block: bool = False) -> str:
    """What an unclosed construct leaves: GAP where text before it in its paragraph lost the
    end of its sentence, else nothing. That text is on its line or, where the construct starts
    its line, on the line above unless that one ends the paragraph (blank, or a structure line
    that `_paragraph_lines` drops): one newline does not end a sentence. Not above a line
    `block` (<gallery>, <poem>, …): shown apart from the text around it, it starts its own."""
    text, start = match.string, match.start()
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip():
        return GAP
    if block or not line_start:
        return ""
    above = text[text.rfind("\n", 0, line_start - 1) + 1 : line_start - 1].strip()
    return GAP if above and not _ends_paragraph(above) else ""


def _nowiki_content(match: re.Match[str]) -> str:
    """<nowiki> content as text: its markup characters as character references."""
    content = match.group(1)
    if not content:
        return ""
    if "&" in content:
        content = html.unescape(content)
    content = content.translate(_NOWIKI_ESCAPES).replace("\n ", "\n&#32;")
    return f"&#32;{content[1:]}" if content.startswith(" ") else content


def _unclosed_link(file_namespaces: frozenset[str], match: re.Match[str]) -> str:
    """An unclosed File link and the rest of its line go; any other "[[" stays for tidying."""
    if match.group(1).strip().lower() in file_namespaces:
        return _cut_short(match)
    return match.group(0)


def _expand_templates(text: str) -> str:
    # {{{1|default}}}; unguarded, as _MAGIC_WORD is (clean_wikitext).
    text = _TEMPLATE_PARAMETER.sub(_template_parameter_default, text)
    for _ in range(MAX_TEMPLATE_DEPTH):
        text, count = _TEMPLATE.subn(_render_template_match, text)
        if "{{" not in text:
            return text
        if not count:  # what is left is unclosed: it goes to the end of its paragraph
            return _UNCLOSED_TEMPLATE.sub(_cut_short, text)
    if _TEMPLATE.search(text):
        raise WikitextError(f"templates nested deeper than MediaWiki's {MAX_TEMPLATE_DEPTH}")
    return _UNCLOSED_TEMPLATE.sub(_cut_short, text)


def _template_parameter_default(match: re.Match[str]) -> str:
    return match.group(2) or ""


def _render_template_match(match: re.Match[str]) -> str:
    body = match.group(1)
    bar = body.find("|")
    name = body if bar < 0 else body[:bar]
    if "[[" in name:  # "{{[[x|y]]}}" is not a template call: keep nothing of it
        return ""
    renderer = template_renderer(name)
    if renderer is None:  # most templates: their arguments are never cut out nor split
        return ""
    rendered = renderer(split_template_arguments(body[bar + 1 :]) if bar >= 0 else [])
    if rendered is None:
        return ""
    if rendered == GAP and _alone_on_its_line(match):
        return ""  # page furniture ({{coord}} below the infobox), not words of a sentence
    return rendered


# What may share a line with a template that is alone on it: spaces and other templates.
_ONLY_TEMPLATES = re.compile(r"(?:[ \t]++|\{\{[^\n]*?\}\})*+")


def _alone_on_its_line(match: re.Match[str]) -> bool:
    text = match.string
    start, end = match.span()
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if line_end < 0:
        line_end = len(text)
    return bool(
        _ONLY_TEMPLATES.fullmatch(text, line_start, start)
        and _ONLY_TEMPLATES.fullmatch(text, end, line_end)
    )


def split_template_arguments(text: str) -> list[str]:
    """Split at the pipes that separate arguments, not at those inside [[target|label]]."""
    if "[[" not in text:
        return text.split("|")
    arguments, depth, start = [], 0, 0
    i, n = 0, len(text)
    while i < n:
        pair = text[i : i + 2]
        if pair == "[[":
            depth += 1
            i += 2
        elif pair == "]]" and depth:
            depth -= 1
            i += 2
        else:
            if text[i] == "|" and not depth:
                arguments.append(text[start:i])
                start = i + 1
            i += 1
    arguments.append(text[start:])
    return arguments


def _external_link_label(match: re.Match[str]) -> str:
    return match.group(1) or ""


def _link_renderer(
    file_namespaces: frozenset[str],
    category_namespaces: frozenset[str],
    media_namespaces: frozenset[str],
):
    def render(match: re.Match[str]) -> str:
        target, bar, label = match.group(1).partition("|")
        target = target.strip()
        if ":" not in target:  # most links
            pass
        elif target.startswith(":"):  # [[:Category:X]] is a visible link to X's page
            target = target[1:]
        else:
            prefix, colon, _ = target.partition(":")
            if colon:
                prefix = prefix.strip().lower()
                if prefix in media_namespaces:  # a link to the file: its label, if any
                    label = label.strip()
                    return resolve_quotes_apart(label) if "''" in label else label
                if prefix in file_namespaces or prefix in category_namespaces:
                    return ""
                if (
                    not bar
                    and prefix not in _SISTER_PREFIXES
                    and _INTERLANGUAGE_PREFIX.fullmatch(prefix)
                ):
                    return ""
        if bar:
            label = label.strip()
            if "''" in label:  # read apart from its line, as MediaWiki reads it
                label = resolve_quotes_apart(label)
            # The pipe trick, [[Paris, Texas|]], shows the target without its qualifier.
            return label if label else target.partition(" (")[0].partition(",")[0]
        return target

    return render


def _heading(line: str) -> tuple[int, str] | None:
    match = _HEADING.match(line)
    if match is None:
        return None
    title = match.group(2)
    if "<" in title:
        title = _KNOWN_TAG.sub("", title)
    if "''" in title:
        title = _BOLD_ITALIC.sub("", title)
    return len(match.group(1)), title.strip().lower()


# What a line may start with when it is not plain running text: a table, header, list,
# indent, rule, or a lone "{" that a template or table may follow.
_NOT_PLAIN_LINE_STARTS = frozenset("{=*#;:|!-") | {""}


def _ends_paragraph(stripped: str) -> bool:
    """Whether a non-blank line (stripped) is one that `_paragraph_lines` drops, ending the
    paragraph: a table, header, list, indent, rule or what an unclosed template left."""
    head = stripped[0]
    if head in "*#;:|!" or "{{" in stripped or "}}" in stripped:
        return True
    if head == "{":
        return stripped.startswith("{|")
    if head == "-":
        return stripped.startswith("----")
    return head == "=" and _heading(stripped) is not None


def _paragraph_lines(text: str) -> Iterable[str]:
    """Yield raw paragraphs: runs of text lines, with structure lines removed.

    In wikitext one newline is a soft break and a blank line ends a paragraph; a removed
    structure line (list item, table, header) ends one too.
    """
    current: list[str] = []
    table_depth = 0
    skip_level = 0  # > 0 while inside a trailing section of that heading level
    for line in text.split("\n"):
        stripped = line.strip()
        head = stripped[:1]
        if (
            head not in _NOT_PLAIN_LINE_STARTS  # "" is in it: not a blank line either
            and not table_depth
            and not skip_level
            and "{{" not in line
            and "}}" not in line
        ):  # a line of running text, as the last branch below would find, sooner
            current.append(stripped)
            continue
        if stripped.lstrip(":").startswith("{|"):
            table_depth += 1
        elif table_depth:
            if stripped.startswith("|}"):
                table_depth -= 1
        elif head == "=" and (heading := _heading(stripped)) is not None:
            level, title = heading
            if skip_level and level > skip_level:
                continue
            skip_level = level if title in TRAILING_SECTIONS else 0
        elif skip_level:
            continue
        elif not stripped:
            pass
        elif head in "*#;:|!" or stripped.startswith("----") or "{{" in line or "}}" in line:
            # Lists, indents, stray table rows, rules, and what an unclosed template left.
            pass
        else:
            current.append(stripped)
            continue
        if current:
            paragraph = " ".join(current)
            yield _resolve_bold(current) if _BOLD.search(paragraph) else paragraph
            current = []
    if current:
        paragraph = " ".join(current)
        yield _resolve_bold(current) if _BOLD.search(paragraph) else paragraph


def _resolve_bold(lines: list[str]) -> str:
    """One paragraph of lines, bold resolved line by line as MediaWiki reads it, so that
    apostrophes that are text stay ("''Iliad'''s" → "Iliad's"); the runs left, all
    markup, are removed by the tidy pass."""
    return " ".join(resolve_bold_line(line) if "'''" in line else line for line in lines)


def _tidy_inline(text: str) -> str:
    if "''" in text:  # runs that are all markup: resolve_bold_line has resolved the others
        text = _BOLD_ITALIC.sub("", text)
    if "<" in text:
        text = _LINE_BREAK_TAG.sub(" ", text)
        text = _KNOWN_TAG.sub("", text)
    if "[" in text or "]" in text:  # what an unclosed link left
        text = text.replace("[[", "").replace("]]", "")
    # Entities last of the markup: <nowiki> content, written as references, is text.
    if "&" in text:
        text = html.unescape(text)
    if "(" in text:
        text = _PARENTHESES.sub(_tidy_parenthetical, text)
    if "[" in text:
        text = _EMPTY_SQUARE_BRACKETS.sub("", text)
    for odd_space in _ODD_SPACES:
        if odd_space in text:
            text = text.replace(odd_space, " ")
    if "  " in text:
        text = _SPACE_RUN.sub(" ", text)
    # No two spaces are adjacent from here: a space after an opening bracket or before a
    # punctuation mark is dropped in one pass (no drop can create another's match).
    text = _SPACE_TO_DROP.sub("", text)
    # Nor is any space left before "," or ";": a doubled mark is two adjacent ones.
    if _ADJACENT_PUNCT.search(text):
        text = _DOUBLED_PUNCT.sub(r"\1", text)
    return text


def _tidy_parenthetical(match: re.Match[str]) -> str:
    """What removed markup left inside "( … )": "( )" → "", "(; French: x, )" → "(French: x)"."""
    inner = match.group(1)
    if not inner.strip(" ,;:.–—-"):
        return ""
    cleaned = inner.strip(" ,;:")
    return match.group(0) if cleaned == inner else f"({cleaned})"
