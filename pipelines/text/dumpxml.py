"""The streaming XML parser under `wikidump`: a dump split's bytes → SiteInfo and RawPage.

expat's callbacks keep only the fields a page needs, and the bytes are cut after each
`</page>`, so memory stays bounded by `PageLimits` (elements, characters and XML bytes per
page) plus one chunk, however large or hostile the dump. Tags are matched by local name, so
export schema 0.10, 0.11 (and older) read the same. A second dump after the first's
`</mediawiki>` is read too; anything else after a root element is an error naming the byte.

Encodings: MediaWiki writes UTF-8, and a file is read as UTF-8 unless its bytes say
otherwise, whatever its declaration claims. A file that starts with a UTF-16 byte-order mark
is UTF-16 beyond doubt: it is converted to UTF-8 as it streams (chunk by chunk, so memory
stays bounded; the page splitting and limits then see UTF-8), and the splits of a multistream
dump after the first, which have no mark of their own, are converted the same way
(`DumpSplit.encoding`). A declaration must agree with the bytes: one naming anything but
UTF-8 (or ASCII) over UTF-8 bytes, or anything but UTF-16 over UTF-16 bytes, is refused
(`unsupported_encoding`), never honoured or guessed at; so are UTF-32 and UTF-16 without a
mark. In a UTF-16 dump, the "decompressed byte" positions of messages count its UTF-8 form.

The records it yields (`SiteInfo`, `RawPage`, `DumpSplit`, `DumpReadError`, in
pipelines/text/dumprecords.py) and the encoding detection (pipelines/text/dumpencoding.py)
are re-exported by `pipelines.text.wikidump`, which is what the stages import.
"""

from __future__ import annotations

import codecs
import dataclasses
import re
from collections.abc import Iterator
from xml.parsers import expat

from pipelines.io.compressed import (
    InputReadError,
    Position,
    decompressed_chunks,
)
from pipelines.io.storage import Reader
from pipelines.text.dumpencoding import (
    UTF8,
    UTF16_MARKS,
    UTF32_MARKS,
    as_utf8,
    canonical_encoding,
    sniff_encoding,
)
from pipelines.text.dumprecords import (
    DumpReadError,
    DumpSplit,
    PageLimits,
    RawPage,
    SiteInfo,
)

# Pages of a split that does not start at byte 0 have no root element: give them one.
_SYNTHETIC_ROOT_OPEN = b"<mediawiki>"
_SYNTHETIC_ROOT_CLOSE = b"</mediawiki>"
_XML_DECLARATION = re.compile(rb"^\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")


def _local(tag: str) -> str:
    return tag.rpartition(":")[2]  # no namespace processing: "mw:page" → "page"


class _OverLimit(Exception):
    """Raised inside an expat handler to stop parsing a page that breaks a PageLimits bound."""

    def __init__(self, reason: str, problem: str) -> None:
        super().__init__(problem)
        self.reason = reason
        self.problem = problem


class _RootClosed(Exception):
    """Raised inside an expat handler when a document's root element ends."""

    def __init__(self, byte_index: int) -> None:
        super().__init__(byte_index)
        self.byte_index = byte_index  # where the root's end tag starts, in the parser's bytes


_PAGE_FIELDS = {"title": "title", "ns": "ns", "id": "id"}
_REVISION_FIELDS = {"id": "revision_id", "text": "text"}


class _Handlers:
    """expat callbacks that keep only what a SiteInfo or RawPage needs, within PageLimits."""

    def __init__(self, parser, limits: PageLimits) -> None:
        self.parser = parser
        self.limits = limits
        self.depth = 0  # 1: the root; 2: a page or the siteinfo
        self.items: list[SiteInfo | dict] = []  # finished siteinfo and page fields
        self.top: str | None = None  # local name of the open top-level element
        self.top_start = 0  # its byte index in the parser's input
        self.stack: list[str] = []  # local names below the top-level element
        self.elements = 0
        self.field_chars = 0  # characters kept of the fields other than <text>
        self.text_chars = 0  # characters of the <text> being read
        self.fields: dict = {}
        self.collecting: list[str] | None = None  # character data of the field being read
        self.field = ""
        self.field_depth = 0
        self.mark = 0  # byte index of the last top-level boundary, in the parser's input

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        self.depth += 1
        if self.depth == 1:
            self.mark = self.parser.CurrentByteIndex
            return
        name = _local(tag)
        if self.depth == 2:
            self.top, self.top_start = name, self.parser.CurrentByteIndex
            self.stack, self.elements, self.field_chars = [], 1, 0
            self.fields = {"redirect": False, "namespaces": {}}
            return
        self.elements += 1
        if self.elements > self.limits.elements:
            raise _OverLimit(
                "page_too_many_elements",
                f"over {self.limits.elements} XML elements in one <{self.top}> (a page "
                "holds about 16): skipped to its end",
            )
        self._end_field()  # a field's text is what comes before its first child element
        # Only direct children of the top-level element (and of its <revision> or
        # <namespaces>) are read, as the dump's schema places them.
        child_of_top = not self.stack
        parent = self.stack[-1] if len(self.stack) == 1 else None
        self.stack.append(name)
        if self.top == "page":
            if child_of_top and name in _PAGE_FIELDS:
                self._start_field(_PAGE_FIELDS[name])
            elif child_of_top and name == "redirect":
                self.fields["redirect"] = True
            elif parent == "revision" and name in _REVISION_FIELDS:
                self._start_field(_REVISION_FIELDS[name])
        elif self.top == "siteinfo":
            if child_of_top and name in ("dbname", "base"):
                self._start_field(name)
            elif parent == "namespaces" and name == "namespace":
                self.fields["key"] = attributes.get("key")
                self._start_field("namespace")

    def end(self, tag: str) -> None:
        self.depth -= 1
        if self.depth == 0:
            raise _RootClosed(self.parser.CurrentByteIndex)
        if self.depth == 1:
            self._end_field()
            self.mark = self.parser.CurrentByteIndex
            if self.top == "page":
                self.items.append(self.fields)
            elif self.top == "siteinfo":
                self.items.append(_siteinfo_from_fields(self.fields))
            self.top = None
            return
        if self.collecting is not None and len(self.stack) == self.field_depth:
            self._end_field()
        self.stack.pop()

    def characters(self, data: str) -> None:
        if self.collecting is None:
            return
        if self.field == "text":
            self.text_chars += len(data)
            if self.text_chars > self.limits.text_chars:
                raise _OverLimit(
                    "page_too_large",
                    f"over {self.limits.text_chars} characters in one <text> (MediaWiki's "
                    "page size limit): skipped to its end",
                )
        else:
            self.field_chars += len(data)
            if self.field_chars > self.limits.field_chars:
                raise _OverLimit(
                    "page_too_large",
                    f"over {self.limits.field_chars} characters in the fields of one "
                    f"<{self.top}> other than its text: skipped to its end",
                )
        self.collecting.append(data)

    def _start_field(self, field: str) -> None:
        self.collecting, self.field, self.field_depth = [], field, len(self.stack)
        self.text_chars = 0

    def _end_field(self) -> None:
        if self.collecting is None:
            return
        value = "".join(self.collecting)
        self.collecting = None
        if self.field == "namespace":
            key = self.fields.pop("key", None)
            if key is not None and key.lstrip("-").isdigit():
                self.fields["namespaces"][int(key)] = value.strip()
        else:
            self.fields[self.field] = value


def _siteinfo_from_fields(fields: dict) -> SiteInfo:
    dbname = fields["dbname"].strip() if fields.get("dbname") else "wiki"
    # "https://en.wikipedia.org/wiki/Main_Page" → "https://en.wikipedia.org/wiki/"
    base_url = fields["base"].strip().rpartition("/")[0] + "/" if fields.get("base") else ""
    return SiteInfo(dbname=dbname, base_url=base_url, namespaces=fields["namespaces"])


def _page_from_fields(fields: dict, ordinal: int) -> RawPage:
    # An empty element has no text (ElementTree's None), which is not an empty string.
    page_id_text = fields.get("id") or None
    namespace_text = fields.get("ns") or None
    title = (fields.get("title") or "").strip()
    text = fields.get("text")
    problems = []
    page_id = _parse_int(page_id_text)
    if page_id is None:
        problems.append(f"page id {page_id_text!r} is not an integer")
    namespace = _parse_int(namespace_text)
    if namespace is None and namespace_text is not None:
        problems.append(f"namespace {namespace_text!r} is not an integer")
    if not title:
        problems.append("no <title>")
    if text is None:
        problems.append("no <revision><text>")
    return RawPage(
        page_id=page_id,
        title=title,
        namespace=namespace,
        redirect=fields["redirect"],
        revision_id=_parse_int(fields.get("revision_id") or None),
        text=text,
        ordinal=ordinal,
        problem="; ".join(problems) or None,
    )


_PAGE_END = b"</page>"
_XML_WHITESPACE = b" \t\r\n"


class _SplitParser:
    """Feeds a split's decompressed bytes to expat one page at a time, within PageLimits.

    The bytes are cut after each `</page>` before expat sees them, so a page over a limit
    can be dropped where it ends: the rest of it is skipped unparsed (nothing of it is
    held), and a fresh parser, under a synthetic root, reads on from the next page. A
    document whose root closes may be followed by another whole dump (`cat a.xml b.xml`,
    or two .bz2 files concatenated): it is read too, with its own <siteinfo>.
    """

    def __init__(self, split: DumpSplit, limits: PageLimits) -> None:
        self.split = split
        self.limits = limits
        self.encoding = UTF8  # of the split's bytes; UTF-16 reaches here as UTF-8
        self.ordinal = 0
        self.last_page: str | None = None
        self.base = 0  # offset in the decompressed split of the next chunk fed
        self.carry = b""  # the last bytes of a chunk, in case a `</page>` starts there
        self.parser = None
        self.handlers: _Handlers | None = None
        self.documents = 1 if split.start else 0  # XML documents begun in this split
        self.fed = 0  # bytes given to the current parser, a synthetic root included
        self.origin = 0  # offset in the split where the current parser's input starts
        self.synthetic = 0  # bytes of synthetic root before the current parser's input
        self.previous = b""  # the last bytes given to the current parser
        self.skipping: RawPage | None = None  # an over-limit page, skipped to its </page>
        self.skipping_from = 0  # where that page starts in the split
        if split.start:
            self._new_parser(0, synthetic_root=True)

    # -- public: feed chunks, then close ---------------------------------------------------

    def feed(self, chunk: bytes, final: bool = False) -> Iterator[SiteInfo | RawPage]:
        data = self.carry + chunk if self.carry else chunk
        at = self.base - len(self.carry)  # split offset of data[0]
        self.base += len(chunk)
        pos = 0
        while (end := data.find(_PAGE_END, pos)) >= 0:
            end += len(_PAGE_END)
            if self.skipping is not None:
                yield self._skipped(at + end)
                self._new_parser(at + end, synthetic_root=True)
            else:
                yield from self._parse_keeping(data[pos:end], at + pos, True)
            pos = end
        stop = len(data) if final else max(pos, len(data) - len(_PAGE_END) + 1)
        self.carry = data[stop:]
        if self.skipping is None and stop > pos:
            yield from self._parse_keeping(data[pos:stop], at + pos, False)

    def close(self) -> Iterator[SiteInfo | RawPage]:
        yield from self.feed(b"", final=True)
        if self.skipping is not None:
            page = self.skipping
            yield self._skipped(self.base)
            raise self._error(
                f"decompressed byte {self.base}",
                f"the split ends inside page #{page.ordinal}, "
                "which was being skipped as over a limit: the file is cut or not a dump",
                "malformed_xml",
            )
        if self.parser is None and self.documents:
            return  # every document's root closed
        if self.parser is None:
            self._new_parser(0, synthetic_root=False)
        out: list[SiteInfo | RawPage] = []
        if self.split.end is not None:  # a split that ends before the dump's </mediawiki>
            self._parse(_SYNTHETIC_ROOT_CLOSE, self.base, False, out)
        if self.parser is not None:
            self.parser.Parse(b"", True)  # raises if the document is incomplete
        yield from out

    def error_position(self, line: int, column: int) -> str:
        where = f"XML line {line}, column {column}"
        if self.origin:
            where += f" of the XML from decompressed byte {self.origin}"
        return f"{where} (of the split starting at byte {self.split.start})"

    # -- parsing ---------------------------------------------------------------------------

    def _new_parser(self, origin: int, synthetic_root: bool) -> None:
        parser = expat.ParserCreate(encoding="UTF-8")  # whatever the declaration says
        handlers = _Handlers(parser, self.limits)
        parser.StartElementHandler = handlers.start
        parser.EndElementHandler = handlers.end
        parser.CharacterDataHandler = handlers.characters
        parser.buffer_text = True
        parser.buffer_size = 1 << 16
        self.parser, self.handlers = parser, handlers
        self.fed, self.origin, self.previous, self.skipping = 0, origin, b"", None
        self.synthetic = len(_SYNTHETIC_ROOT_OPEN) if synthetic_root else 0
        if synthetic_root:
            parser.Parse(_SYNTHETIC_ROOT_OPEN, False)
            self.fed = self.synthetic

    def _parse_keeping(self, data: bytes, at: int, ends_page: bool) -> Iterator:
        """_parse, yielding what it finished even when a fault follows in the same bytes."""
        out: list[SiteInfo | RawPage] = []
        try:
            self._parse(data, at, ends_page, out)
        except (expat.ExpatError, DumpReadError) as err:
            yield from out
            raise err
        yield from out

    def _parse(self, data: bytes, at: int, ends_page: bool, out: list) -> None:
        """Give `data` (split bytes from `at`) to expat; finished items go to `out`."""
        if self.parser is None:  # before the first document, or after a root closed
            if self.documents:
                stripped = data.lstrip(_XML_WHITESPACE)
                at += len(data) - len(stripped)
                data = stripped
                if not data:
                    return
            self._check_encoding(data, at)
            self.documents += 1
            self._new_parser(at, synthetic_root=False)
        assert self.parser is not None and self.handlers is not None
        try:
            self.parser.Parse(data, False)
        except expat.ExpatError:
            self._collect(out)  # what ended before the fault (the <siteinfo>) is kept
            raise
        except _OverLimit as over:
            self._collect(out)
            self._over_limit(over, at + len(data), ends_page, out)
            return
        except _RootClosed as closed:
            self._collect(out)
            rest = self._after_root(closed.byte_index, data)
            self.parser = self.handlers = None
            if rest:
                self._parse(rest, at + len(data) - len(rest), ends_page, out)
            return
        self.fed += len(data)
        self.previous = data[-64:]
        self._collect(out)
        handlers, limit = self.handlers, self.limits.xml_bytes
        if handlers.top is not None and self.fed - handlers.top_start > limit:
            over = _OverLimit(
                "page_too_large",
                f"over {limit} bytes of XML in one <{handlers.top}>: skipped to its end",
            )
            self._over_limit(over, at + len(data), ends_page, out)
        elif handlers.top is None and self.fed - handlers.mark > limit:
            raise self._error(
                f"decompressed byte {at + len(data)}",
                f"over {limit} bytes of XML outside any page (a comment or text between "
                "pages?): not a MediaWiki dump",
                "dump_limit",
            )

    def _collect(self, out: list) -> None:
        handlers = self.handlers
        for item in handlers.items:
            if isinstance(item, SiteInfo):
                out.append(item)
                continue
            self.ordinal += 1
            page = _page_from_fields(item, self.ordinal)
            self.last_page = f"#{self.ordinal} id={page.page_id} {page.title!r}"
            out.append(page)
        handlers.items.clear()

    def _over_limit(self, over: _OverLimit, end: int, ends_page: bool, out: list) -> None:
        """Reject the open page (or fail the file if it is no page) and skip to its end."""
        handlers = self.handlers
        start = self.origin + handlers.top_start - self.synthetic
        if handlers.top != "page":
            raise self._error(
                f"decompressed byte {start}",
                f"{over.problem.replace(': skipped to its end', '')}: not a MediaWiki dump",
                "dump_limit",
            )
        fields = handlers.fields
        self.ordinal += 1
        self.skipping = RawPage(
            page_id=_parse_int(fields.get("id") or None),
            title=(fields.get("title") or "").strip(),
            namespace=_parse_int(fields.get("ns") or None),
            redirect=fields["redirect"],
            revision_id=_parse_int(fields.get("revision_id") or None),
            text=None,
            ordinal=self.ordinal,
            problem=over.problem,
            problem_reason=over.reason,
        )
        self.skipping_from = start
        self.parser = self.handlers = None
        if ends_page:
            out.append(self._skipped(end))
            self._new_parser(end, synthetic_root=True)

    def _skipped(self, end: int) -> RawPage:
        page = self.skipping
        assert page is not None
        self.skipping = None
        self.last_page = f"#{page.ordinal} id={page.page_id} {page.title!r}"
        where = f" (decompressed bytes {self.skipping_from}–{end} of the split)"
        return dataclasses.replace(page, problem=page.problem + where)

    def _after_root(self, byte_index: int, data: bytes) -> bytes:
        """The bytes of `data` after the root's end tag that starts at `byte_index`."""
        local = byte_index - self.fed
        if local < 0:  # the end tag began in the bytes fed before `data`
            if -local > len(self.previous):
                raise self._error(
                    f"XML byte {byte_index}",
                    "cannot find the end of the root element",
                    "malformed_xml",
                )
            data = self.previous[local:] + data
            local = 0
        return data[data.index(b">", local) + 1 :]

    def _error(self, position: str, error: str, reason: str) -> DumpReadError:
        return DumpReadError(self.split.path, position, error, self.last_page, reason)

    def _check_encoding(self, head: bytes, at: int) -> None:
        """Refuse a document whose declaration disagrees with its bytes, or that is in an
        encoding that is not read (UTF-32, UTF-16 without a byte-order mark at the start).

        MediaWiki writes its dumps in UTF-8 (most carry no XML declaration at all). A
        declaration naming anything else over UTF-8 bytes is either a lie (ISO-8859-1 over
        UTF-8 bytes, which would decode to mojibake without a word) or a file converted by
        someone else; neither can be told from the other for certain, so the file is refused
        with what to do rather than guessed at. Every document is parsed as UTF-8 whatever it
        declares, so bytes that are not UTF-8 are a loud "not well-formed" error, never wrong
        text. A UTF-16 file (its byte-order mark) reaches here converted to UTF-8: its
        declaration may name UTF-16 (or the mark's byte order), or nothing.
        """
        if self.encoding != UTF8:
            self._check_utf16_declaration(head.removeprefix(codecs.BOM_UTF8), at)
            return
        if head.startswith(UTF32_MARKS):
            declared = "UTF-32 (its byte-order mark)"
        elif head.startswith(UTF16_MARKS):
            declared = "UTF-16, after a first document in UTF-8 (its byte-order mark)"
        elif 0 in head[:4]:
            declared = "UTF-16 or UTF-32 without a byte-order mark (NUL bytes at its start)"
        elif match := _XML_DECLARATION.match(head.removeprefix(codecs.BOM_UTF8)):
            name = match.group(1).decode("ascii")
            if canonical_encoding(name) in (UTF8, "ascii"):
                return
            declared = f"{name!r} in its XML declaration"
        else:
            return
        raise self._error(
            f"decompressed byte {at} (the start of an XML document)",
            f"the document is encoded as {declared}, but only UTF-8 (MediaWiki's encoding) "
            "and UTF-16 with a byte-order mark are read (so that no text is decoded wrongly "
            "without a word): if the bytes are UTF-8, correct the declaration; otherwise "
            "convert the file to UTF-8 (iconv)",
            "unsupported_encoding",
        )

    def _check_utf16_declaration(self, head: bytes, at: int) -> None:
        match = _XML_DECLARATION.match(head)
        if match is None:
            return
        name = match.group(1).decode("ascii")
        if canonical_encoding(name) in ("utf-16", self.encoding):
            return
        raise self._error(
            f"decompressed byte {at} (the start of an XML document)",
            f"the document's byte-order mark says {self.encoding.upper()} but its XML "
            f"declaration says {name!r}: the two disagree, so its text cannot be read for "
            "certain: correct the declaration, or convert the file to UTF-8 (iconv)",
            "unsupported_encoding",
        )


# A .bz2 dump is decoded 8 MiB at a time (about nine bz2 blocks), not 1 MiB: the decoder
# then runs for several blocks between the parser's turns, and the stage spends less CPU
# for it (docs/benchmarks.md, Extraction). The cost is memory: a split being read holds a
# few such chunks at once (the decoder's, the parser's copy, expat's buffer).
DUMP_BZ2_CHUNK_BYTES = 8 << 20


def iter_elements(
    split: DumpSplit, reader: Reader, limits: PageLimits
) -> Iterator[SiteInfo | RawPage]:
    """Parse a split's XML into SiteInfo and RawPage items, with bounded memory."""
    position = Position(split.start)
    state = _SplitParser(split, limits)
    try:
        chunks = decompressed_chunks(
            reader,
            split.path,
            split.start,
            split.end,
            position,
            bz2_chunk_bytes=DUMP_BZ2_CHUNK_BYTES,
        )
        encoding = split.encoding
        if split.start == 0:  # the file's first bytes: its byte-order mark, if any
            encoding, chunks = sniff_encoding(chunks)
        if encoding != UTF8:
            state.encoding = encoding
            chunks = as_utf8(chunks, encoding, split.path)
        for chunk in chunks:
            yield from state.feed(chunk)
        yield from state.close()
    except InputReadError as err:
        if isinstance(err, DumpReadError):
            raise
        raise DumpReadError(
            err.path, err.position, err.error, state.last_page, err.reason, err.offset
        ) from err
    except expat.ExpatError as err:
        what = expat.errors.messages.get(err.code, str(err))
        raise DumpReadError(
            split.path,
            state.error_position(err.lineno, err.offset),
            f"malformed XML ({what})",
            state.last_page,
            "malformed_xml",
        ) from err


def _parse_int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else None
