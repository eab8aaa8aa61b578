"""Build a large MediaWiki XML dump by repeating the pages of the small sample dump.

The sample (206 pages, ~5.75 MB of wikitext) is far too small to measure throughput or
to see whether memory grows with input, so the benchmark scales it up. Every copy of a
page gets a new page id, a new revision id and a distinct title, so tools that key or
deduplicate on any of those treat the copies as separate articles.

Only the *source* dump (a few MB) is held in memory; the scaled dump is streamed page
by page into a single-stream ``.xml.bz2`` compressed at level 9, like a real dump. With
``--multistream`` it is laid out like enwiki's ``…-pages-articles-multistream.xml.bz2``
instead: the header (siteinfo) in a bz2 stream of its own, then one stream per 100 pages,
then the footer, with the ``…-multistream-index.txt.bz2`` beside it (one
``offset:page_id:title`` line per page), so `bertkit wikipedia` cuts the file into splits
that many workers read, as it would the real dump; the streams are compressed by
``--jobs`` processes.

Run from the repository root::

    python -m bench.scale_dump --target-mb 50 --workdir bench/.work
    python -m bench.scale_dump --target-mb 1024 --multistream --jobs 2

bench.extract runs exactly this in a child process (bench.runs.build_in_child, so holding
the sample does not raise the benchmark's own high-water RSS), then reads the cached info
with :func:`load_cached_info`; it also imports the page helpers here to know which
{{convert}} numbers each scaled page holds.
"""

from __future__ import annotations

import bz2
import itertools
import json
import multiprocessing
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from xml.sax.saxutils import unescape

from bench.measure import DEFAULT_WORKDIR, MB, REPO_ROOT, argument_parser

SAMPLE_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.xml.bz2"
SAMPLE_CANDIDATES = (REPO_ROOT / "data" / "wikipedia" / SAMPLE_NAME,)

# Copy k of a page gets page id ``orig + k * PAGE_ID_STRIDE``; the stride is larger than any
# real enwiki page id, so ``new_id % PAGE_ID_STRIDE`` recovers the source page.
PAGE_ID_STRIDE = 10**8
REVISION_ID_STRIDE = 10**10
COPY_SUFFIX_RE = re.compile(r" \(copy \d+\)$")

# Bump when the layout of the scaled file changes, so stale cached files are rebuilt.
FORMAT_VERSION = 1
PAGES_PER_STREAM = 100  # as in enwiki's multistream dumps

PAGE_RE = re.compile(rb"[ \t]*<page>.*?</page>[ \t]*\n", re.DOTALL)
TITLE_RE = re.compile(rb"<title>(.*?)</title>", re.DOTALL)
# The page id is the first <id> after </ns>; the revision id the first <id> after
# <revision>. Anchoring on these avoids touching the contributor's <id>.
PAGE_ID_RE = re.compile(rb"(</ns>\s*<id>)(\d+)(</id>)")
REVISION_ID_RE = re.compile(rb"(<revision>\s*<id>)(\d+)(</id>)")
NS_RE = re.compile(rb"<ns>(-?\d+)</ns>")
TEXT_RE = re.compile(rb"<text\b[^>]*?(?:/>|>(.*?)</text>)", re.DOTALL)
REDIRECT_RE = re.compile(rb"<redirect\b")


def find_sample_dump() -> Path:
    """Return the sample dump, preferring the repository copy over the shared one."""
    for candidate in SAMPLE_CANDIDATES:
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"sample dump not found in any of {SAMPLE_CANDIDATES}")


def unescape_xml_text(escaped: str) -> str:
    """Undo the XML escaping MediaWiki applies to <text> content (&lt; &gt; &amp; &quot;)."""
    return unescape(escaped, {"&quot;": '"', "&#039;": "'", "&apos;": "'"})


def wikitext_of_page(page_xml: bytes) -> str:
    """The unescaped wikitext of one <page> element ('' for an empty <text/>)."""
    match = TEXT_RE.search(page_xml)
    if match is None or match.group(1) is None:
        return ""
    return unescape_xml_text(match.group(1).decode("utf-8"))


def title_of_page(page_xml: bytes) -> str:
    match = TITLE_RE.search(page_xml)
    if match is None:
        raise ValueError("<page> without <title>")
    return unescape_xml_text(match.group(1).decode("utf-8"))


def wikitext_bytes_of_page(page_xml: bytes) -> int:
    """UTF-8 size of the page's wikitext, i.e. what an extractor actually has to parse."""
    return len(wikitext_of_page(page_xml).encode("utf-8"))


@dataclass(frozen=True)
class SourceDump:
    """The sample dump split at <page> boundaries; it is small enough to keep in memory."""

    header: bytes  # <mediawiki ...> and <siteinfo>, up to the first <page>
    pages: list[bytes]
    footer: bytes  # </mediawiki>
    page_wikitext_bytes: list[int]
    page_is_redirect: list[bool]


def read_source_dump(path: Path) -> SourceDump:
    """Decompress the sample and split it exactly on the <page>...</page> text spans."""
    with bz2.open(path, "rb") as handle:
        xml = handle.read()
    matches = list(PAGE_RE.finditer(xml))
    if not matches:
        raise ValueError(f"no <page> elements in {path}")
    pages = [m.group(0) for m in matches]
    # The page spans must tile the body exactly, otherwise re-assembly would drop bytes.
    for previous, current in itertools.pairwise(matches):
        if previous.end() != current.start():
            raise ValueError(f"unexpected bytes between pages at offset {previous.end()}")
    return SourceDump(
        header=xml[: matches[0].start()],
        pages=pages,
        footer=xml[matches[-1].end() :],
        page_wikitext_bytes=[wikitext_bytes_of_page(page) for page in pages],
        page_is_redirect=[REDIRECT_RE.search(page) is not None for page in pages],
    )


def renamed_page(page_xml: bytes, copy_index: int) -> bytes:
    """Copy ``copy_index`` (0 = the original) of a page with unique ids and a distinct title."""
    if copy_index == 0:
        return page_xml
    suffix = f" (copy {copy_index})".encode()
    page_xml = TITLE_RE.sub(
        lambda m: b"<title>" + m.group(1) + suffix + b"</title>", page_xml, count=1
    )
    page_xml = PAGE_ID_RE.sub(
        lambda m: (
            m.group(1) + str(int(m.group(2)) + copy_index * PAGE_ID_STRIDE).encode() + m.group(3)
        ),
        page_xml,
        count=1,
    )
    return REVISION_ID_RE.sub(
        lambda m: (
            m.group(1)
            + str(int(m.group(2)) + copy_index * REVISION_ID_STRIDE).encode()
            + m.group(3)
        ),
        page_xml,
        count=1,
    )


def source_page_id(page_id: int) -> int:
    """Map a (possibly copied) page id back to the id of the sample page it came from."""
    return page_id % PAGE_ID_STRIDE


def source_title(title: str) -> str:
    """Map a (possibly copied) title back to the title of the sample page it came from."""
    return COPY_SUFFIX_RE.sub("", title)


@dataclass(frozen=True)
class ScaledDumpInfo:
    """What was written; stored next to the dump so a cached file can be trusted and reused."""

    path: str
    target_mb: float
    wikitext_bytes: int
    pages: int
    redirects: int
    articles: int
    copies: float
    compressed_bytes: int
    source: str
    source_bytes: int
    format_version: int = FORMAT_VERSION
    multistream: bool = False
    index_path: str = ""  # the multistream index beside the dump; "" for a single stream

    @property
    def wikitext_mb(self) -> float:
        return self.wikitext_bytes / MB


def pages_until_target(source: SourceDump, target_bytes: int) -> Iterator[tuple[int, int]]:
    """Yield (copy index, page index) in dump order until the wikitext reaches the target."""
    total = 0
    copy_index = 0
    while True:
        for page_index, size in enumerate(source.page_wikitext_bytes):
            yield copy_index, page_index
            total += size
            if total >= target_bytes:
                return
        copy_index += 1


def scaled_dump_paths(
    workdir: Path, target_mb: float, multistream: bool = False
) -> tuple[Path, Path]:
    stem = f"enwiki-scaled-{target_mb:g}mb" + ("-multistream" if multistream else "")
    workdir = workdir.resolve()
    return workdir / f"{stem}.xml.bz2", workdir / f"{stem}.json"


def multistream_index_path(dump_path: Path) -> Path:
    """`X-multistream.xml.bz2` → `X-multistream-index.txt.bz2`, the name bertkit looks for."""
    return dump_path.with_name(dump_path.name.removesuffix(".xml.bz2") + "-index.txt.bz2")


def load_cached_info(
    dump_path: Path, info_path: Path, target_mb: float, source_path: Path
) -> ScaledDumpInfo | None:
    """The cached build's info if it matches this request, else None (so it is rebuilt)."""
    if not (dump_path.exists() and info_path.exists()):
        return None
    try:
        info = ScaledDumpInfo(**json.loads(info_path.read_text()))
    except (ValueError, TypeError):
        return None
    matches = (
        info.format_version == FORMAT_VERSION
        and info.target_mb == target_mb
        and (not info.multistream or multistream_index_path(dump_path).exists())
        and info.source_bytes == source_path.stat().st_size
        and info.compressed_bytes == dump_path.stat().st_size
    )
    # The path is re-derived so a cache built from another cwd or checkout still resolves.
    if not matches:
        return None
    index = str(multistream_index_path(dump_path)) if info.multistream else ""
    return replace(info, path=str(dump_path), index_path=index)


def write_scaled_dump(
    source: SourceDump, dump_path: Path, target_bytes: int
) -> tuple[int, int, int, int]:
    """Stream the scaled dump to disk; return (wikitext bytes, pages, redirects, last copy)."""
    wikitext_bytes = pages = redirects = last_copy = 0
    # Write to a temporary name first: an interrupted build must not look like a cached one.
    partial_path = dump_path.with_suffix(dump_path.suffix + ".partial")
    with bz2.open(partial_path, "wb", compresslevel=9) as out:
        out.write(source.header)
        for copy_index, page_index in pages_until_target(source, target_bytes):
            out.write(renamed_page(source.pages[page_index], copy_index))
            wikitext_bytes += source.page_wikitext_bytes[page_index]
            pages += 1
            redirects += source.page_is_redirect[page_index]
            last_copy = copy_index
        out.write(source.footer)
    os.replace(partial_path, dump_path)
    return wikitext_bytes, pages, redirects, last_copy


def page_groups(
    source: SourceDump, target_bytes: int, tally: list[int]
) -> Iterator[tuple[bytes, list[tuple[int, str]]]]:
    """The scaled dump's pages, PAGES_PER_STREAM at a time: (XML, [(page id, title)]).

    ``tally`` accumulates [wikitext bytes, pages, redirects] as groups are produced.
    """
    pending = list[tuple[int, int]]()

    def group() -> tuple[bytes, list[tuple[int, str]]]:
        pages = [renamed_page(source.pages[p], copy) for copy, p in pending]
        keys = [(int(PAGE_ID_RE.search(x).group(2)), title_of_page(x)) for x in pages]
        return b"".join(pages), keys

    for copy_index, page_index in pages_until_target(source, target_bytes):
        pending.append((copy_index, page_index))
        tally[0] += source.page_wikitext_bytes[page_index]
        tally[1] += 1
        tally[2] += source.page_is_redirect[page_index]
        if len(pending) == PAGES_PER_STREAM:
            yield group()
            pending.clear()
    if pending:
        yield group()


def _compress_group(item: tuple[bytes, list[tuple[int, str]]]) -> tuple[bytes, list]:
    return bz2.compress(item[0], 9), item[1]


def write_multistream_dump(
    source: SourceDump, dump_path: Path, target_bytes: int, jobs: int
) -> tuple[int, int, int]:
    """Stream a multistream dump and its index to disk; return (wikitext bytes, pages,
    redirects). Offsets in the index are those of each group's bz2 stream in the dump."""
    tally = [0, 0, 0]
    index_path = multistream_index_path(dump_path)
    partial_path = dump_path.with_suffix(dump_path.suffix + ".partial")
    partial_index = index_path.with_suffix(index_path.suffix + ".partial")
    with (
        partial_path.open("wb") as out,
        bz2.open(partial_index, "wb", compresslevel=9) as index,
        multiprocessing.Pool(jobs) as pool,
    ):
        out.write(bz2.compress(source.header, 9))
        groups = page_groups(source, target_bytes, tally)
        for compressed, keys in pool.imap(_compress_group, groups, chunksize=8):
            offset = out.tell()
            # A title never holds a newline; a colon in it is fine (the index splits twice).
            index.write(
                "".join(f"{offset}:{page_id}:{title}\n" for page_id, title in keys).encode()
            )
            out.write(compressed)
        out.write(bz2.compress(source.footer, 9))
    os.replace(partial_index, index_path)
    os.replace(partial_path, dump_path)
    return tally[0], tally[1], tally[2]


def build_scaled_dump(
    target_mb: float,
    workdir: Path,
    source_path: Path | None = None,
    log: bool = True,
    multistream: bool = False,
    jobs: int = 1,
) -> ScaledDumpInfo:
    """Return a scaled dump with at least ``target_mb`` MB of wikitext, building it if needed
    (``multistream``: with its index, streams compressed by ``jobs`` processes)."""
    source_path = source_path or find_sample_dump()
    workdir.mkdir(parents=True, exist_ok=True)
    dump_path, info_path = scaled_dump_paths(workdir, target_mb, multistream)
    cached = load_cached_info(dump_path, info_path, target_mb, source_path)
    if cached is not None:
        return cached
    if log:
        print(f"building {dump_path} ({target_mb:g} MB of wikitext) ...", flush=True)
    source = read_source_dump(source_path)
    if multistream:
        wikitext_bytes, pages, redirects = write_multistream_dump(
            source, dump_path, int(target_mb * MB), jobs
        )
    else:
        wikitext_bytes, pages, redirects, _ = write_scaled_dump(
            source, dump_path, int(target_mb * MB)
        )
    info = ScaledDumpInfo(
        path=str(dump_path),
        target_mb=target_mb,
        wikitext_bytes=wikitext_bytes,
        pages=pages,
        redirects=redirects,
        articles=pages - redirects,
        copies=wikitext_bytes / sum(source.page_wikitext_bytes),
        compressed_bytes=dump_path.stat().st_size,
        source=str(source_path),
        source_bytes=source_path.stat().st_size,
        multistream=multistream,
        index_path=str(multistream_index_path(dump_path)) if multistream else "",
    )
    info_path.write_text(json.dumps(asdict(info), indent=2) + "\n")
    return info


def main() -> None:
    parser = argument_parser("bench.scale_dump", __doc__)
    parser.add_argument(
        "--target-mb",
        type=float,
        default=50.0,
        help="MB (10^6 bytes) of unescaped wikitext to reach (default 50)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="cache directory for scaled dumps (default bench/.work)",
    )
    parser.add_argument("--source", type=Path, default=None, help="sample dump to repeat")
    parser.add_argument(
        "--multistream",
        action="store_true",
        help="write an enwiki-style multistream dump and its index (default: one stream)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes compressing a multistream dump"
    )
    args = parser.parse_args()
    info = build_scaled_dump(
        args.target_mb, args.workdir, args.source, multistream=args.multistream, jobs=args.jobs
    )
    print(
        f"dump {info.path}: {info.wikitext_mb:.2f} MB wikitext, {info.pages} pages "
        f"({info.articles} articles), {info.compressed_bytes / MB:.1f} MB bz2"
    )


if __name__ == "__main__":
    main()
