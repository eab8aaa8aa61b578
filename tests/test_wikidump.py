"""The streaming dump reader: formats, schemas, encodings, splits, limits and damaged files."""

import bz2
import dataclasses
import gzip
import tracemalloc

import pytest

from pipelines.io.compressed import CHUNK_BYTES
from pipelines.io.storage import READER
from pipelines.text.dumpxml import DUMP_BZ2_CHUNK_BYTES
from pipelines.text.wikidump import (
    DumpReadError,
    DumpSplit,
    PageLimits,
    RawPage,
    SiteInfo,
    iter_dump,
    plan_splits,
    read_stream_offsets,
)
from tests.dumpfiles import (
    FOOTER,
    Page,
    article,
    dump_xml,
    header,
    page_xml,
    write_dump,
    write_multistream,
)


def read_all(path, **split) -> list:
    return list(iter_dump(DumpSplit(path=str(path), number=0, **split), READER))


def pages_of(items) -> list[RawPage]:
    return [item for item in items if isinstance(item, RawPage)]


@pytest.mark.parametrize("schema", ["0.10", "0.11"])
@pytest.mark.parametrize("suffix", [".xml", ".xml.bz2", ".xml.gz"])
def test_reads_pages_and_siteinfo(tmp_path, schema, suffix) -> None:
    pages = [
        Page(12, "Anarchism", "'''Anarchism''' is a philosophy."),
        Page(13, "AfghanistanHistory", "#REDIRECT [[History of Afghanistan]]", redirect="History"),
        Page(14, "Talk:X", "talk", ns=1),
    ]
    items = read_all(write_dump(tmp_path / f"dump{suffix}", pages, schema=schema))
    assert items[0] == SiteInfo(
        dbname="testwiki",
        base_url="https://test.example.org/wiki/",
        namespaces={-2: "Media", 0: "", 6: "File", 14: "Category"},
    )
    assert pages_of(items) == [
        RawPage(12, "Anarchism", 0, False, 120, "'''Anarchism''' is a philosophy.", 1),
        RawPage(13, "AfghanistanHistory", 0, True, 130, "#REDIRECT [[History of Afghanistan]]", 2),
        RawPage(14, "Talk:X", 1, False, 140, "talk", 3),
    ]


TESTWIKI = SiteInfo(
    dbname="testwiki",
    base_url="https://test.example.org/wiki/",
    namespaces={-2: "Media", 0: "", 6: "File", 14: "Category"},
)


def raw(page: Page, ordinal: int) -> RawPage:
    """The RawPage the reader makes of a well-formed tests.dumpfiles page."""
    return RawPage(page.id, page.title, page.ns, False, page.id * 10, page.text, ordinal)


@pytest.mark.parametrize(
    "declaration", ['<?xml version="1.0"?>\n', '<?xml version="1.0" encoding="US-ASCII"?>\n', ""]
)
def test_utf8_without_a_declaration_or_with_a_bom_is_read(tmp_path, declaration) -> None:
    xml = dump_xml([Page(1, "Café", "Café text")]).split("\n", 1)[1]  # without its declaration
    path = tmp_path / "dump.xml"
    path.write_bytes(b"\xef\xbb\xbf" + (declaration + xml).encode("utf-8"))
    (page,) = pages_of(read_all(path))
    assert (page.title, page.text) == ("Café", "Café text")


def test_a_declaration_that_lies_about_the_encoding_is_refused(tmp_path) -> None:
    # ISO-8859-1 declared over UTF-8 bytes: honouring it gave "CafÃ©" without a word.
    xml = dump_xml([Page(1, "Café", "Café text")], encoding="ISO-8859-1")
    path = tmp_path / "dump.xml.gz"
    path.write_bytes(gzip.compress(xml.encode("utf-8")))
    assert xml.startswith('<?xml version="1.0" encoding="ISO-8859-1"?>')
    with pytest.raises(DumpReadError) as raised:
        read_all(path)
    assert raised.value.reason == "unsupported_encoding"
    assert str(raised.value) == (
        f"{path}: the document is encoded as 'ISO-8859-1' in its XML declaration, but only "
        "UTF-8 (MediaWiki's encoding) and UTF-16 with a byte-order mark are read (so that no "
        "text is decoded wrongly without a word): if the bytes are UTF-8, correct the "
        "declaration; otherwise convert the file to UTF-8 (iconv) at decompressed byte 0 (the "
        "start of an XML document); no page was read"
    )


# UTF-16 with a byte-order mark is read: tests/test_utf16_dump.py.
@pytest.mark.parametrize("encoding", ["windows-1252", "iso-8859-2", "shift_jis"])
def test_other_encodings_are_refused_not_transcoded(tmp_path, encoding) -> None:
    title = "Café" if encoding != "shift_jis" else "東京"
    path = write_dump(tmp_path / "dump.xml", [Page(1, title, f"{title} text")], encoding=encoding)
    with pytest.raises(DumpReadError) as raised:
        read_all(path)
    assert raised.value.reason == "unsupported_encoding"
    assert (
        f"the document is encoded as {encoding!r} in its XML declaration, but only UTF-8 "
        "(MediaWiki's encoding) and UTF-16 with a byte-order mark are read"
    ) in str(raised.value)


def test_latin1_bytes_without_a_declaration_are_an_error_not_mojibake(tmp_path) -> None:
    xml = dump_xml([article(1), Page(2, "Caf\u00e9", "Caf\u00e9 text")]).split("\n", 1)[1]
    path = tmp_path / "dump.xml"
    path.write_bytes(xml.encode("latin-1"))
    pages = []
    with pytest.raises(DumpReadError) as raised:
        for item in iter_dump(DumpSplit(path=str(path), number=0), READER):
            pages.append(item)
    assert [p.page_id for p in pages_of(pages)] == [1]
    assert raised.value.reason == "malformed_xml"
    line = xml.split("\n").index("    <title>Caf\u00e9</title>") + 1
    column = len("    <title>Caf")  # the 0xE9 byte
    assert (line, column) == (24, 14)
    assert (
        f"malformed XML (not well-formed (invalid token)) at XML line {line}, column {column}"
        in str(raised.value)
    )


def test_multistream_splits_cover_every_page_once_in_order(tmp_path) -> None:
    pages = [article(i) for i in range(1, 11)]
    dump = write_multistream(tmp_path, "testwiki-20260101-pages-articles", pages, per_stream=2)
    splits = plan_splits(str(dump), 1, READER)  # every stream its own split
    assert [s.number for s in splits] == list(range(6))  # header stream + 5 page streams
    assert splits[0].start == 0 and splits[-1].end is None
    assert all(s.siteinfo.dbname == "testwiki" for s in splits[1:])
    per_split = [[p.page_id for p in pages_of(iter_dump(s, READER))] for s in splits]
    assert per_split == [[], [1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]


def test_multistream_large_splits_group_streams(tmp_path) -> None:
    pages = [article(i) for i in range(1, 11)]
    dump = write_multistream(tmp_path, "testwiki-20260101-pages-articles", pages, per_stream=2)
    (split,) = plan_splits(str(dump), 1 << 20, READER)
    assert [p.page_id for p in pages_of(iter_dump(split, READER))] == list(range(1, 11))


def test_file_without_index_is_one_split(tmp_path) -> None:
    path = write_dump(tmp_path / "dump.xml.bz2", [article(1)])
    assert plan_splits(str(path), 1, READER) == [DumpSplit(path=str(path), number=0)]


def big_pages(count: int) -> list[Page]:
    # ~10 kB of varied words per page: 300 pages span several 900 kB bz2 blocks.
    return [article(i, words=1500) for i in range(1, count + 1)]


def test_truncated_bz2_keeps_pages_before_the_fault_and_names_the_file(tmp_path) -> None:
    path = write_dump(tmp_path / "dump.xml.bz2", big_pages(300))
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.7)])
    seen = []
    with pytest.raises(DumpReadError) as raised:
        for item in iter_dump(DumpSplit(path=str(path), number=0), READER):
            if isinstance(item, RawPage):
                seen.append(item.page_id)
    assert seen == list(range(1, len(seen) + 1)) and len(seen) > 100
    error = raised.value
    assert error.reason == "truncated_input"
    assert str(path) in str(error) and "truncated" in str(error)
    assert f"last good page: #{len(seen)} id={len(seen)}" in str(error)


def test_corrupt_bz2_is_reported(tmp_path) -> None:
    path = write_dump(tmp_path / "dump.xml.bz2", big_pages(300))
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))
    with pytest.raises(DumpReadError) as raised:
        read_all(path)
    assert raised.value.reason == "corrupt_input"


def test_truncated_gzip_is_reported(tmp_path) -> None:
    path = tmp_path / "dump.xml.gz"
    write_dump(path, big_pages(50))
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DumpReadError, match="truncated") as raised:
        read_all(path)
    assert raised.value.reason == "truncated_input"


def test_malformed_xml_mid_file_keeps_earlier_pages(tmp_path) -> None:
    xml = write_dump(tmp_path / "dump.xml", [article(1), article(2), article(3)]).read_text()
    broken = xml.replace("<title>Article 3</title>", "<title>Article 3</titel>")
    path = tmp_path / "broken.xml.bz2"
    path.write_bytes(bz2.compress(broken.encode()))
    seen = []
    with pytest.raises(DumpReadError) as raised:
        for item in iter_dump(DumpSplit(path=str(path), number=0), READER):
            if isinstance(item, RawPage):
                seen.append(item.page_id)
    assert seen == [1, 2]
    assert raised.value.reason == "malformed_xml"
    assert "malformed XML (mismatched tag) at XML line 35, column 22" in str(raised.value)
    assert "mismatched tag" in str(raised.value)


def test_malformed_page_is_flagged_and_reading_goes_on(tmp_path) -> None:
    xml = write_dump(tmp_path / "dump.xml", [article(1), article(2), article(3)]).read_text()
    path = tmp_path / "odd.xml.gz"
    path.write_bytes(gzip.compress(xml.replace("<id>2</id>", "<id>two</id>").encode()))
    pages = pages_of(read_all(path))
    assert [p.problem for p in pages] == [None, "page id 'two' is not an integer", None]


def test_reads_the_real_sample(sample_dump) -> None:
    pages = pages_of(read_all(sample_dump))
    assert len(pages) == 206
    assert sum(p.redirect for p in pages) == 100
    assert sum(1 for p in pages if p.namespace == 0 and not p.redirect) == 106
    assert sum(len(p.text.encode()) for p in pages) == 5_752_489


# --- limits: a page can cost only so much memory --------------------------


def deep_page(page_id: int, nested: int) -> str:
    """A <page> holding `nested` elements each inside the last: ~7 bytes of XML apiece."""
    return (
        f"  <page>\n    <title>Deep</title>\n    <ns>0</ns>\n    <id>{page_id}</id>\n"
        + "<x>" * nested
        + "</x>" * nested
        + "\n  </page>\n"
    )


def test_nested_elements_reject_their_page_in_bounded_memory(tmp_path) -> None:
    # 2 M nested elements in one page (1.2 kB of bz2) took 1 GB when the page's tree was
    # built; 600 k (4 MB of XML) keep the test fast and would have taken 300 MB.
    xml = header() + page_xml(article(1)) + deep_page(2, 600_000) + page_xml(article(3)) + FOOTER
    path = tmp_path / "deep.xml.bz2"
    path.write_bytes(bz2.compress(xml.encode()))
    assert path.stat().st_size < 2000
    tracemalloc.start()
    items = read_all(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # The decoder's 8 MiB pieces and the parser's copy of one; the page's tree would be 300 MB.
    assert peak < 2.5 * DUMP_BZ2_CHUNK_BYTES, peak
    start = xml.index("<page>", xml.index("Article 1"))  # where the page's start tag is
    end = xml.index("</page>", start) + len("</page>")
    assert items == [
        TESTWIKI,
        raw(article(1), 1),
        RawPage(
            2,
            "Deep",
            0,
            False,
            None,
            None,
            2,
            "over 10000 XML elements in one <page> (a page holds about 16): skipped to its "
            f"end (decompressed bytes {start}–{end} of the split)",
            "page_too_many_elements",
        ),
        raw(article(3), 3),
    ]


def test_page_text_over_the_limit_is_rejected_and_not_held(tmp_path) -> None:
    pages = [article(1), Page(2, "Long", "word " * 1000), article(3)]
    xml = dump_xml(pages)
    path = tmp_path / "dump.xml"
    path.write_text(xml)
    items = list(iter_dump(DumpSplit(str(path), 0), READER, PageLimits(text_chars=1000)))
    start = xml.index("<page>", xml.index("Article 1"))
    end = xml.index("</page>", start) + len("</page>")
    assert pages_of(items) == [
        raw(pages[0], 1),
        RawPage(
            2,
            "Long",
            0,
            False,
            20,
            None,
            2,
            "over 1000 characters in one <text> (MediaWiki's page size limit): skipped to its "
            f"end (decompressed bytes {start}–{end} of the split)",
            "page_too_large",
        ),
        raw(pages[2], 3),
    ]


@pytest.mark.parametrize(
    ("suffix", "chunk_bytes"), [(".xml.gz", CHUNK_BYTES), (".xml.bz2", DUMP_BZ2_CHUNK_BYTES)]
)
def test_page_xml_over_the_limit_is_rejected_across_chunks(tmp_path, suffix, chunk_bytes) -> None:
    # A comment over three of the reader's chunks inside one page: expat would keep all of
    # it until the comment ends.
    comment = "<!--" + "c" * (3 * chunk_bytes) + "-->"
    xml = dump_xml([article(1), Page(2, "Commented", "text"), article(3)])
    xml = xml.replace("<id>2</id>", "<id>2</id>" + comment)
    path = tmp_path / f"dump{suffix}"
    path.write_bytes((gzip.compress if suffix == ".xml.gz" else bz2.compress)(xml.encode()))
    tracemalloc.start()
    items = list(iter_dump(DumpSplit(str(path), 0), READER, PageLimits(xml_bytes=1 << 20)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # About five chunks: the decoder's piece, the parser's copies of it and expat's buffer;
    # the comment held whole would take more than ten (87 MiB with 8 MiB chunks).
    assert peak < max(8 << 20, 6 * chunk_bytes), peak
    start = xml.index("<page>", xml.index("Article 1"))
    end = xml.index("</page>", start) + len("</page>")
    assert [(p.page_id, p.problem_reason if p.problem else None) for p in pages_of(items)] == [
        (1, None),
        (2, "page_too_large"),
        (3, None),
    ]
    assert pages_of(items)[1].problem == (
        f"over {1 << 20} bytes of XML in one <page>: skipped to its end (decompressed bytes "
        f"{start}–{end} of the split)"
    )


def test_a_file_that_ends_inside_an_over_limit_page_keeps_the_pages_before(tmp_path) -> None:
    xml = header() + page_xml(article(1)) + deep_page(2, 20_000)[:-20]
    path = tmp_path / "cut.xml"
    path.write_text(xml)
    items = []
    with pytest.raises(DumpReadError) as raised:
        for item in iter_dump(DumpSplit(str(path), 0), READER):
            items.append(item)
    assert [(p.page_id, p.problem_reason if p.problem else None) for p in pages_of(items)] == [
        (1, None),
        (2, "page_too_many_elements"),
    ]
    assert raised.value.reason == "malformed_xml"
    assert str(raised.value) == (
        f"{path}: the split ends inside page #2, which was being skipped as over a limit: the "
        f"file is cut or not a dump at decompressed byte {len(xml)}; last good page: #2 id=2 "
        "'Deep'"
    )


def test_text_at_the_limit_is_kept_and_other_fields_have_their_own(tmp_path) -> None:
    pages = [Page(1, "T" * 20, "x" * 1000), Page(2, "T" * 21, "text")]
    path = tmp_path / "dump.xml"
    path.write_text("<mediawiki>\n" + page_xml(pages[0]) + page_xml(pages[1]) + FOOTER)
    limits = PageLimits(text_chars=1000, field_chars=24)  # title, ns, id and revision id
    found = pages_of(iter_dump(DumpSplit(str(path), 0), READER, limits))
    assert found[0] == raw(pages[0], 1)
    # 21 + 1 + 1 characters of title, ns and id; the revision id's "20" passes 24.
    assert dataclasses.replace(found[1], problem=None) == RawPage(
        2, "T" * 21, 0, False, None, None, 2, None, "page_too_large"
    )
    assert found[1].problem.startswith(
        "over 24 characters in the fields of one <page> other than its text: skipped to its end"
    )


def test_a_siteinfo_over_the_limit_fails_the_file(tmp_path) -> None:
    xml = dump_xml([article(1)]).replace("<sitename>", "<x/>" * 20_001 + "<sitename>")
    path = tmp_path / "dump.xml"
    path.write_text(xml)
    with pytest.raises(DumpReadError) as raised:
        read_all(path)
    assert raised.value.reason == "dump_limit"
    assert "over 10000 XML elements in one <siteinfo> (a page holds about 16): not a " in str(
        raised.value
    )


# --- several dumps in one file, and where a fault between bz2 streams lies -------------------


def other_dump(pages: list[Page]) -> str:
    return dump_xml(pages).replace("<dbname>testwiki</dbname>", "<dbname>otherwiki</dbname>")


@pytest.mark.parametrize(
    ("suffix", "join"),
    [
        (".xml", lambda a, b: (a + "\n\n" + b).encode()),  # cat a.xml b.xml
        (".xml.bz2", lambda a, b: bz2.compress(a.encode()) + bz2.compress(b.encode())),
        (".xml.gz", lambda a, b: gzip.compress(a.encode()) + gzip.compress(b.encode())),
    ],
)
def test_a_second_dump_after_the_first_is_read_too(tmp_path, suffix, join) -> None:
    first, second = [article(1), article(2)], [article(3)]
    path = tmp_path / f"two{suffix}"
    path.write_bytes(join(dump_xml(first), other_dump(second)))
    items = read_all(path)
    other = SiteInfo("otherwiki", TESTWIKI.base_url, TESTWIKI.namespaces)
    assert items == [TESTWIKI, raw(first[0], 1), raw(first[1], 2), other, raw(second[0], 3)]


def test_junk_after_the_dump_is_a_clear_error(tmp_path) -> None:
    xml = dump_xml([article(1)])
    path = tmp_path / "junk.xml"
    path.write_text(xml + "trailing junk\n")
    items = []
    with pytest.raises(DumpReadError) as raised:
        for item in iter_dump(DumpSplit(str(path), 0), READER):
            items.append(item)
    assert pages_of(items) == [raw(article(1), 1)]
    assert raised.value.reason == "malformed_xml"
    assert str(raised.value) == (
        f"{path}: malformed XML (syntax error) at XML line 1, column 0 of the XML from "
        f"decompressed byte {len(xml)} (of the split starting at byte 0); last good page: #1 "
        "id=1 'Article 1'"
    )


def test_a_fault_in_a_later_bz2_stream_names_that_stream(tmp_path) -> None:
    pages = [article(i, words=200) for i in range(1, 7)]
    dump = write_multistream(tmp_path, "testwiki-20260101-pages-articles", pages, per_stream=2)
    index = str(dump).replace(".xml.bz2", "-index.txt.bz2")
    offsets = read_stream_offsets(index, READER)  # streams of pages 1-2, 3-4, 5-6
    data = bytearray(dump.read_bytes())
    middle = (offsets[1] + offsets[2]) // 2  # inside the stream of pages 3 and 4
    data[middle] ^= 0xFF
    broken = tmp_path / "broken.xml.bz2"  # no index: one split, read from byte 0
    broken.write_bytes(bytes(data))
    seen = []
    with pytest.raises(DumpReadError) as raised:
        for item in iter_dump(DumpSplit(str(broken), 0), READER):
            seen.append(item)
    assert [p.page_id for p in pages_of(seen)] == [1, 2]
    error = raised.value
    assert (error.reason, error.offset) == ("corrupt_input", offsets[1])
    # Streams: the header, then one per two pages: the fault is in the third.
    assert error.position == (
        f"compressed byte {offsets[1]} (bz2 stream 3 starts there; the fault lies before "
        f"byte {len(data)})"
    )
    # A split that starts later counts its streams from its own start.
    (_, second, third, _) = plan_splits(str(dump), 1, READER)
    dump.write_bytes(bytes(data))
    assert [p.page_id for p in pages_of(iter_dump(second, READER))] == [1, 2]
    with pytest.raises(DumpReadError) as raised:
        list(iter_dump(third, READER))
    assert raised.value.offset == offsets[1]
    assert raised.value.position.startswith(f"compressed byte {offsets[1]} (bz2 stream 1 ")
