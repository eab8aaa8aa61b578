"""The streaming dump reader: formats, schemas, encodings, splits and damaged files."""

import bz2
import gzip

import pytest

from pipelines.io.storage import READER
from pipelines.text.wikidump import (
    DumpReadError,
    DumpSplit,
    RawPage,
    SiteInfo,
    iter_dump,
    plan_splits,
)
from tests.dumpfiles import Page, article, write_dump, write_multistream


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


@pytest.mark.parametrize("encoding", ["windows-1252", "iso-8859-2", "utf-16", "shift_jis"])
def test_any_declared_encoding(tmp_path, encoding) -> None:
    title = "Café" if encoding != "shift_jis" else "東京"
    path = write_dump(tmp_path / "dump.xml", [Page(1, title, f"{title} text")], encoding=encoding)
    (page,) = pages_of(read_all(path))
    assert (page.title, page.text) == (title, f"{title} text")


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
