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
byte ranges so many workers read one file. Without an index, a file is one split. So is a
dump whose index does not match it (`plan_dump` says why: the index is not one, or a split
would start where no bz2 stream does, as a stale index's offsets do): reading it from its
start loses no page, where cutting it at wrong offsets would. A second dump concatenated
after the first's `</mediawiki>` is read too, with its own <siteinfo>.

Failures are classified by recovery: a malformed page, or one over a limit, is yielded as a
`RawPage` with a `problem` and a `problem_reason` (the caller rejects it and goes on); a file
that cannot be read to its end raises `DumpReadError` naming the file, the position and the
last good page, after every page before the fault has been yielded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pipelines.io.compressed import (
    InputReadError,
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
    "IndexMismatch",
    "PageLimits",
    "RawPage",
    "SiteInfo",
    "index_path_for",
    "is_multistream_index",
    "iter_dump",
    "plan_dump",
    "plan_splits",
    "read_siteinfo",
    "read_stream_offsets",
]

_MULTISTREAM_SUFFIX = "-multistream.xml.bz2"
_INDEX_SUFFIX = "-multistream-index.txt.bz2"
# `offset:page_id:title`: MediaWiki titles are at most 255 bytes.
_MAX_INDEX_LINE_BYTES = 4096
# What a bz2 stream's first bytes are: `BZh` and the block size, then the magic of its first
# block (or, for an empty stream, of its end): ten bytes a stream's inside holds by chance
# about once in 2**80 places.
_BZ2_STREAM_HEADS = (b"1AY&SY", b"\x17\x72\x45\x38\x50\x90")
_BZ2_HEAD_BYTES = 10


@dataclass(frozen=True)
class IndexMismatch:
    """Why a dump's multistream index was not used: the dump is read as one split instead."""

    index_path: str
    position: str  # where in the index: "line 3", or where its own bz2 data fails
    error: str  # for a person: what is wrong, and what was done instead


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
    return sorted(_index_lines(index_path, reader))


def _index_lines(index_path: str, reader: Reader) -> dict[int, int]:
    """Each offset the index lists → the number of the first line that lists it."""
    offsets: dict[int, int] = {}
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
            offsets.setdefault(int(head), line_number)
    return offsets


def plan_splits(path: str, split_bytes: int, reader: Reader) -> list[DumpSplit]:
    """The splits of `plan_dump`, without why an index was not used."""
    return plan_dump(path, split_bytes, reader)[0]


def plan_dump(
    path: str, split_bytes: int, reader: Reader
) -> tuple[list[DumpSplit], IndexMismatch | None]:
    """Cut one dump into splits of about `split_bytes` compressed bytes at stream starts.

    Only a multistream dump with its index can be cut; anything else is one split. The
    header stream (bytes before the first page stream) belongs to split 0; later splits get
    the parsed <siteinfo> so their pages are named the same way, and the file's encoding,
    which only its first bytes show (a UTF-16 byte-order mark).

    An index that does not match the dump (it does not read as an index, or a split would
    start where no bz2 stream does) is not used: the dump is one split, and the
    `IndexMismatch` says why. A dump whose header cannot be read is one split too, whose
    reading then fails as that of a dump without an index does; nothing here raises on
    damaged data.
    """
    whole = [DumpSplit(path=path, number=0)]
    index_path = index_path_for(path)
    if index_path is None or not reader.exists(index_path):
        return whole, None
    try:
        offsets = _index_lines(index_path, reader)
    except InputReadError as err:  # DumpReadError included: not an index, or damaged
        return whole, _mismatch(index_path, err.position, err.error, path)
    if not offsets:
        return whole, None
    first = min(offsets)
    starts = [0]
    for offset in sorted(offsets):
        if offset - starts[-1] >= split_bytes:
            starts.append(offset)
    # The first page stream, and where the middle and the last split start: a stale or
    # foreign index misses them all, and each look costs a remote store a buffer's read.
    looked = {first} | ({starts[len(starts) // 2], starts[-1]} - {0})
    wrong = _first_not_a_stream(path, reader, sorted(looked))
    if wrong is not None:
        problem = (
            "offset 0 is where the dump's header stream starts, not a page stream"
            if wrong == 0
            else f"offset {wrong} is not where a bz2 stream of the dump starts"
        )
        return whole, _mismatch(index_path, f"line {offsets[wrong]}", problem, path)
    try:
        siteinfo = read_siteinfo(path, reader, end=first)
        encoding = dump_encoding(path, reader)
    except InputReadError:  # the dump's start is damaged: its one split's reading says how
        return whole, None
    bounds: list[int | None] = [*starts[1:], None]
    splits = [
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
    return splits, None


def _first_not_a_stream(path: str, reader: Reader, offsets: list[int]) -> int | None:
    """The first of `offsets` (sorted) where no page stream of `path` starts, or None.
    Byte 0 is the header stream's, never a page stream's."""
    if offsets and offsets[0] == 0:
        return 0
    with reader.open(path) as handle:
        for offset in offsets:
            handle.seek(offset)
            head = b""
            while len(head) < _BZ2_HEAD_BYTES and (
                more := handle.read(_BZ2_HEAD_BYTES - len(head))
            ):
                head += more
            size = head[3:4]
            if head[:3] != b"BZh" or size not in b"123456789" or head[4:] not in _BZ2_STREAM_HEADS:
                return offset
    return None


def _mismatch(index_path: str, position: str, problem: str, path: str) -> IndexMismatch:
    return IndexMismatch(
        index_path,
        position,
        f"{problem}: the index does not match {path} (a stale index, another dump's, or "
        "damage), so the dump is read without it, from its start in one split: every page "
        "is read, by one worker (with the dump's own index beside it, workers read it in "
        "parallel)",
    )


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
