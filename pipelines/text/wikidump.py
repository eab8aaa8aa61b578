"""Streaming reader for MediaWiki XML dumps (`pages-articles`), Beam-free.

Reads `.xml.bz2` (single- or multi-stream), `.xml.gz` and plain `.xml` from any path its
`Reader` opens (a required argument: the Beam stage passes Beam's filesystems, so its
runner's filesystem flags apply; tools pass `pipelines.io.storage.READER`), in fixed-size
chunks, with expat's callbacks keeping only the fields a page needs: memory stays bounded by
`PageLimits` (elements, characters and XML bytes per page) plus one chunk, however large or
hostile the dump. Tags are matched by local name, so export schema 0.10, 0.11 (and older)
all read the same. Dumps are UTF-8 (MediaWiki writes nothing else), or UTF-16 with a
byte-order mark, converted to UTF-8 as they stream; a declaration that disagrees with the
bytes is refused, never honoured (pipelines/text/dumpxml.py and dumpencoding.py say which).

A multistream dump (`…-multistream.xml.bz2` beside its `…-multistream-index.txt.bz2`) is a
concatenation of independent bz2 streams of ~100 pages each; `plan_splits` groups them into
byte ranges so many workers read one file. Without an index, a file is one split. A second
dump concatenated after the first's `</mediawiki>` is read too, with its own <siteinfo>.

Failures are classified by recovery: a malformed page, or one over a limit, is yielded as a
`RawPage` with a `problem` and a `problem_reason` (the caller rejects it and goes on); a file
that cannot be read to its end raises `DumpReadError` naming the file, the position and the
last good page, after every page before the fault has been yielded.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.io.compressed import (
    LongLine,
    decompressed_chunks,
    lines,
)
from pipelines.io.storage import Reader
from pipelines.text.dumpencoding import dump_encoding
from pipelines.text.dumprecords import (
    DEFAULT_LIMITS,
    DumpReadError,
    DumpSplit,
    PageLimits,
    RawPage,
    SiteInfo,
)
from pipelines.text.dumpxml import iter_elements

__all__ = [
    "DEFAULT_LIMITS",
    "DumpReadError",
    "DumpSplit",
    "PageLimits",
    "RawPage",
    "SiteInfo",
    "index_path_for",
    "is_multistream_index",
    "iter_dump",
    "plan_splits",
    "read_siteinfo",
    "read_stream_offsets",
]

_MULTISTREAM_SUFFIX = "-multistream.xml.bz2"
_INDEX_SUFFIX = "-multistream-index.txt.bz2"
# `offset:page_id:title`: MediaWiki titles are at most 255 bytes.
_MAX_INDEX_LINE_BYTES = 4096


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
                index_path,
                f"line {line_number}",
                f"a {line.length}-byte line, over {_MAX_INDEX_LINE_BYTES}: not an index",
                None,
                "bad_index",
            )
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
    the parsed <siteinfo> so their pages are named the same way, and the file's encoding,
    which only its first bytes show (a UTF-16 byte-order mark).
    """
    index_path = index_path_for(path)
    if index_path is None or not reader.exists(index_path):
        return [DumpSplit(path=path, number=0)]
    offsets = read_stream_offsets(index_path, reader)
    if not offsets:
        return [DumpSplit(path=path, number=0)]
    siteinfo = read_siteinfo(path, reader, end=offsets[0])
    encoding = dump_encoding(path, reader)
    starts = [0]
    for offset in offsets:
        if offset - starts[-1] >= split_bytes:
            starts.append(offset)
    bounds: list[int | None] = [*starts[1:], None]
    return [
        DumpSplit(
            path=path,
            number=n,
            start=start,
            end=end,
            siteinfo=siteinfo if n else None,
            encoding=encoding,
        )
        for n, (start, end) in enumerate(zip(starts, bounds, strict=True))
    ]


def read_siteinfo(path: str, reader: Reader, end: int | None = None) -> SiteInfo:
    """Parse only the <siteinfo> header at the start of a dump."""
    split = DumpSplit(path=path, number=0, start=0, end=end)
    for item in iter_elements(split, reader, DEFAULT_LIMITS):
        if isinstance(item, SiteInfo):
            return item
        break
    return SiteInfo()


def iter_dump(
    split: DumpSplit, reader: Reader, limits: PageLimits | None = None
) -> Iterator[SiteInfo | RawPage]:
    """Yield the split's SiteInfo, then every page in file order.

    A page over one of `limits` (DEFAULT_LIMITS when None) is yielded with a `problem` and
    its `problem_reason`, and reading goes on. Raises DumpReadError on a damaged file,
    after every page before the fault.
    """
    if split.siteinfo is not None:
        yield split.siteinfo
    yield from iter_elements(split, reader, limits or DEFAULT_LIMITS)
