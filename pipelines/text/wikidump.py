"""Streaming reader for MediaWiki XML dumps (`pages-articles`), Beam-free.

Reads `.xml.bz2` (single- or multi-stream), `.xml.gz` and plain `.xml` from any path its
`Reader` opens (a required argument: the Beam stage passes Beam's filesystems, so its
runner's filesystem flags apply; tools pass `pipelines.io.storage.READER`), in fixed-size
chunks: memory stays bounded by one
page plus one chunk, however large the dump. Tags are matched by local name, so export schema
0.10, 0.11 (and older) all read the same; any encoding the XML declaration names is accepted
(non-UTF-8 input is transcoded chunk by chunk before expat sees it).

A multistream dump (`…-multistream.xml.bz2` beside its `…-multistream-index.txt.bz2`) is a
concatenation of independent bz2 streams of ~100 pages each; `plan_splits` groups them into
byte ranges so many workers read one file. Without an index, a file is one split.

Failures are classified by recovery: a malformed page is yielded as a `RawPage` with a
`problem` (the caller rejects it and goes on); a file that cannot be read to its end raises
`DumpReadError` naming the file, the position and the last good page, after every page
before the fault has been yielded.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote
from xml.etree import ElementTree
from xml.parsers.expat import errors as expat_errors

from pipelines.io.compressed import (
    InputReadError,
    LongLine,
    Position,
    decompressed_chunks,
    lines,
)
from pipelines.io.storage import Reader

_MULTISTREAM_SUFFIX = "-multistream.xml.bz2"
_INDEX_SUFFIX = "-multistream-index.txt.bz2"
# Pages of a split that does not start at byte 0 have no root element: give them one.
_SYNTHETIC_ROOT_OPEN = b"<mediawiki>"
_SYNTHETIC_ROOT_CLOSE = b"</mediawiki>"
# `offset:page_id:title`: MediaWiki titles are at most 255 bytes.
_MAX_INDEX_LINE_BYTES = 4096
_XML_DECLARATION = re.compile(rb"^\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")


class DumpReadError(InputReadError):
    """A dump file could not be read to its end. Pages before the fault were yielded."""

    def __init__(
        self, path: str, position: str, error: str, last_page: str | None, reason: str
    ) -> None:
        super().__init__(path, position, error, reason)
        after = f"; last good page: {last_page}" if last_page else "; no page was read"
        self.args = (f"{self.args[0]}{after}",)
        self.last_page = last_page


@dataclass(frozen=True)
class SiteInfo:
    """What the dump's <siteinfo> says about the wiki: names ids, urls and namespaces."""

    dbname: str = "wiki"
    base_url: str = ""  # article url prefix, e.g. "https://en.wikipedia.org/wiki/"
    namespaces: dict[int, str] = field(default_factory=dict)  # key → canonical name

    def page_url(self, title: str) -> str | None:
        if not self.base_url:
            return None
        return self.base_url + quote(title.replace(" ", "_"), safe="/:(),'!*;@$&+=")

    def names_of(self, keys: tuple[int, ...]) -> frozenset[str]:
        """Lower-cased local names of some namespaces (e.g. 'datei' for File on dewiki)."""
        return frozenset(self.namespaces.get(k, "").lower() for k in keys) - {""}

    def namespace_of(self, title: str) -> int:
        """Namespace from a title prefix: only for dumps that lack <ns> (schema < 0.5)."""
        prefix, colon, _ = title.partition(":")
        if colon:
            for key, name in self.namespaces.items():
                if name and name.lower() == prefix.strip().lower():
                    return key
        return 0


@dataclass(frozen=True)
class DumpSplit:
    """One unit of work: bytes [start, end) of one dump file (end None: to the end)."""

    path: str
    number: int  # position of this split within its file
    start: int = 0
    end: int | None = None
    siteinfo: SiteInfo | None = None  # for splits that do not start with the header


@dataclass(frozen=True)
class RawPage:
    """One <page> as the dump has it. `problem` is set when the page is malformed."""

    page_id: int | None
    title: str
    namespace: int | None  # None: the dump has no <ns> (schema < 0.5); see SiteInfo
    redirect: bool
    revision_id: int | None
    text: str | None
    ordinal: int  # 1-based position of the page within its split, for error messages
    problem: str | None = None


def index_path_for(path: str) -> str | None:
    """The multistream index that belongs to `path`, or None for other dumps."""
    if path.endswith(_MULTISTREAM_SUFFIX):
        return path[: -len(_MULTISTREAM_SUFFIX)] + _INDEX_SUFFIX
    return None


def is_multistream_index(path: str) -> bool:
    return path.endswith(_INDEX_SUFFIX)


def read_stream_offsets(index_path: str, reader: Reader) -> list[int]:
    """Sorted unique byte offsets of the page streams listed in a multistream index.

    Index lines are `offset:page_id:title` (titles may contain ':'). ~230k offsets for the
    whole English Wikipedia, so holding them is cheap.
    """
    offsets: set[int] = set()
    # The index is itself many bz2 streams: decompress it like the dump, then split lines.
    index_lines = lines(decompressed_chunks(reader, index_path), _MAX_INDEX_LINE_BYTES)
    for line_number, line in enumerate(index_lines, start=1):
        if isinstance(line, LongLine):
            raise DumpReadError(
                index_path, f"line {line_number}",
                f"a {line.length}-byte line, over {_MAX_INDEX_LINE_BYTES}: not an index",
                None, "bad_index",
            )  # fmt: skip
        if line.strip():
            head, colon, _ = line.partition(b":")
            if not colon or not head.strip().isdigit():
                raise DumpReadError(
                    index_path,
                    f"line {line_number}",
                    "not an `offset:id:title` index line",
                    None,
                    "bad_index",
                )
            offsets.add(int(head))
    return sorted(offsets)


def plan_splits(path: str, split_bytes: int, reader: Reader) -> list[DumpSplit]:
    """Cut one dump into splits of about `split_bytes` compressed bytes at stream starts.

    Only a multistream dump with its index can be cut; anything else is one split. The
    header stream (bytes before the first page stream) belongs to split 0; later splits get
    the parsed <siteinfo> so their pages are named the same way.
    """
    index_path = index_path_for(path)
    if index_path is None or not reader.exists(index_path):
        return [DumpSplit(path=path, number=0)]
    offsets = read_stream_offsets(index_path, reader)
    if not offsets:
        return [DumpSplit(path=path, number=0)]
    siteinfo = read_siteinfo(path, reader, end=offsets[0])
    starts = [0]
    for offset in offsets:
        if offset - starts[-1] >= split_bytes:
            starts.append(offset)
    bounds: list[int | None] = [*starts[1:], None]
    return [
        DumpSplit(path=path, number=n, start=start, end=end, siteinfo=siteinfo if n else None)
        for n, (start, end) in enumerate(zip(starts, bounds, strict=True))
    ]


def read_siteinfo(path: str, reader: Reader, end: int | None = None) -> SiteInfo:
    """Parse only the <siteinfo> header at the start of a dump."""
    for item in _iter_elements(DumpSplit(path=path, number=0, start=0, end=end), reader):
        if isinstance(item, SiteInfo):
            return item
        break
    return SiteInfo()


def iter_dump(split: DumpSplit, reader: Reader) -> Iterator[SiteInfo | RawPage]:
    """Yield the split's SiteInfo, then every page in file order.

    Raises DumpReadError on a damaged file, after every page before the fault.
    """
    if split.siteinfo is not None:
        yield split.siteinfo
    yield from _iter_elements(split, reader)


def _as_utf8(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Transcode to UTF-8 when the XML declaration (or a BOM) names another encoding.

    expat itself knows only UTF-8/16, Latin-1 and ASCII; Python's codecs know the rest.
    """
    first = next(chunks, b"")
    encoding = "utf-8"
    if first.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif match := _XML_DECLARATION.match(first):
        encoding = match.group(1).decode("ascii")
    try:
        canonical = codecs.lookup(encoding).name
    except LookupError as err:
        raise ValueError(f"the XML declaration names an unknown encoding {encoding!r}") from err
    if canonical == "utf-8":
        yield first
        yield from chunks
        return
    decoder = codecs.getincrementaldecoder(canonical)(errors="strict")
    text = decoder.decode(first).lstrip("\ufeff")
    text = re.sub(r"encoding\s*=\s*[\"'][^\"']+[\"']", 'encoding="utf-8"', text, count=1)
    yield text.encode("utf-8")
    for chunk in chunks:
        yield decoder.decode(chunk).encode("utf-8")
    yield decoder.decode(b"", final=True).encode("utf-8")


# --- XML -------------------------------------------------------------------------------------


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _iter_elements(split: DumpSplit, reader: Reader) -> Iterator[SiteInfo | RawPage]:
    """Parse a split's XML into SiteInfo and RawPage items, with bounded memory.

    Each <page> is converted when its end tag arrives and then dropped from the tree
    (`root.clear()`), so the tree never holds more than one page.
    """
    parser = ElementTree.XMLPullParser(events=("start", "end"))
    position = Position(split.start)
    root: ElementTree.Element | None = None
    ordinal = 0
    last_page: str | None = None
    depth = 0
    if split.start:
        parser.feed(_SYNTHETIC_ROOT_OPEN)
    try:
        for chunk in _as_utf8(
            decompressed_chunks(reader, split.path, split.start, split.end, position)
        ):
            parser.feed(chunk)
            for event, element in parser.read_events():
                if event == "start":
                    depth += 1
                    if root is None:
                        root = element
                    continue
                depth -= 1
                if depth != 1:  # only direct children of the root matter
                    if depth == 0:  # the root closed: the dump is complete
                        return
                    continue
                name = _local(element.tag)
                if name == "page":
                    ordinal += 1
                    page = _page_from_element(element, ordinal)
                    last_page = f"#{ordinal} id={page.page_id} {page.title!r}"
                    yield page
                elif name == "siteinfo":
                    yield _siteinfo_from_element(element)
                if root is not None:
                    root.clear()
        if split.end is not None:  # a split that ends before the dump's </mediawiki>
            parser.feed(_SYNTHETIC_ROOT_CLOSE)
            parser.read_events()
        parser.close()
    except InputReadError as err:
        raise DumpReadError(err.path, err.position, err.error, last_page, err.reason) from err
    except ElementTree.ParseError as err:
        line, column = err.position
        what = expat_errors.messages.get(err.code, err.msg)
        where = f"XML line {line}, column {column} (of the split starting at byte {split.start})"
        raise DumpReadError(
            split.path, where, f"malformed XML ({what})", last_page, "malformed_xml"
        ) from err
    except (ValueError, UnicodeDecodeError) as err:
        raise DumpReadError(
            split.path, f"compressed byte ~{position.offset}", str(err), last_page, "bad_encoding"
        ) from err


def _siteinfo_from_element(element: ElementTree.Element) -> SiteInfo:
    dbname, base_url, namespaces = "wiki", "", {}
    for child in element:
        name = _local(child.tag)
        if name == "dbname" and child.text:
            dbname = child.text.strip()
        elif name == "base" and child.text:
            # "https://en.wikipedia.org/wiki/Main_Page" → "https://en.wikipedia.org/wiki/"
            base_url = child.text.strip().rpartition("/")[0] + "/"
        elif name == "namespaces":
            for namespace in child:
                key = namespace.get("key")
                if key is not None and key.lstrip("-").isdigit():
                    namespaces[int(key)] = (namespace.text or "").strip()
    return SiteInfo(dbname=dbname, base_url=base_url, namespaces=namespaces)


def _page_from_element(element: ElementTree.Element, ordinal: int) -> RawPage:
    title, namespace_text, page_id_text = "", None, None
    redirect = False
    revision_id_text, text = None, None
    for child in element:
        name = _local(child.tag)
        if name == "title":
            title = (child.text or "").strip()
        elif name == "ns":
            namespace_text = child.text
        elif name == "id":
            page_id_text = child.text
        elif name == "redirect":
            redirect = True
        elif name == "revision":
            # pages-articles has one revision; with several (a history dump) the last wins.
            for part in child:
                part_name = _local(part.tag)
                if part_name == "id":
                    revision_id_text = part.text
                elif part_name == "text":
                    text = part.text or ""
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
        redirect=redirect,
        revision_id=_parse_int(revision_id_text),
        text=text,
        ordinal=ordinal,
        problem="; ".join(problems) or None,
    )


def _parse_int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else None
