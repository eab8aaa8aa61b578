"""A dump in UTF-16 with a byte-order mark is read: its bytes say what it
is beyond doubt, so it is converted to UTF-8 as it streams and yields exactly the pages and
documents of the same dump in UTF-8. A declaration that the bytes contradict is refused
(`unsupported_encoding`), as over UTF-8; so are UTF-32 and UTF-16 without a mark."""

from __future__ import annotations

import bz2
import codecs
import gzip
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines import wikipedia
from pipelines.io.storage import READER
from pipelines.text.wikidump import DumpReadError, DumpSplit, RawPage, iter_dump, plan_splits
from tests.dumpfiles import FOOTER, Page, article, dump_xml, header, page_xml, write_multistream

MARKS = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}
COMPRESS = {".xml": bytes, ".xml.bz2": bz2.compress, ".xml.gz": lambda b: gzip.compress(b, mtime=0)}


def read_all(path: Path) -> list:
    return list(iter_dump(DumpSplit(path=str(path), number=0), READER))


def pages_of(items: list) -> list[RawPage]:
    return [item for item in items if isinstance(item, RawPage)]


def utf16_sample(sample_dump: Path, directory: Path, encoding: str, suffix: str) -> Path:
    """The real sample, declared UTF-16 and written in `encoding` after its byte-order mark."""
    xml = (
        '<?xml version="1.0" encoding="UTF-16"?>\n'
        + bz2.decompress(sample_dump.read_bytes()).decode()
    )
    path = directory / f"sample-{encoding}{suffix}"
    path.write_bytes(COMPRESS[suffix](MARKS[encoding] + xml.encode(encoding)))
    return path


@pytest.mark.parametrize(
    ("encoding", "suffix"), [("utf-16-le", ".xml.bz2"), ("utf-16-be", ".xml.gz")]
)
def test_the_real_sample_in_utf16_yields_the_same_pages(
    sample_dump, tmp_path, encoding, suffix
) -> None:
    expected = read_all(sample_dump)
    items = read_all(utf16_sample(sample_dump, tmp_path, encoding, suffix))
    assert len(pages_of(items)) == 206
    assert items == expected


def test_the_real_sample_in_utf16_yields_the_same_documents(
    sample_dump, sample_documents, tmp_path
) -> None:
    utf8_documents, _ = sample_documents
    path = utf16_sample(sample_dump, tmp_path, "utf-16-le", ".xml.bz2")
    out = tmp_path / "wiki"
    assert wikipedia.run(["--input", str(path), "--output", str(out)]) == 0
    names = sorted(p.name for p in out.glob("documents-*.parquet"))
    assert names == sorted(p.name for p in utf8_documents.glob("documents-*.parquet"))
    rows = [pq.read_table(out / name).to_pylist() for name in names]
    assert rows == [pq.read_table(utf8_documents / name).to_pylist() for name in names]
    assert sum(len(r) for r in rows) == 97  # the documents of the sample's 206 pages


@pytest.mark.parametrize("declaration", ['<?xml version="1.0"?>\n', ""])
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_byte_order_mark_alone_or_with_a_bare_declaration_is_enough(
    tmp_path, encoding, declaration
) -> None:
    xml = declaration + dump_xml([Page(1, "Café 東京 𝄞", "Café text 𝄞")]).split("\n", 1)[1]
    path = tmp_path / "dump.xml"
    path.write_bytes(MARKS[encoding] + xml.encode(encoding))
    (page,) = pages_of(read_all(path))
    assert (page.title, page.text) == ("Café 東京 𝄞", "Café text 𝄞")


@pytest.mark.parametrize(
    ("encoding", "declared"), [("utf-16-le", "UTF-16LE"), ("utf-16-be", "utf16")]
)
def test_a_declaration_naming_the_marks_byte_order_is_read(tmp_path, encoding, declared) -> None:
    path = tmp_path / "dump.xml"
    path.write_bytes(MARKS[encoding] + dump_xml([article(1)], encoding=declared).encode(encoding))
    assert [p.page_id for p in pages_of(read_all(path))] == [1]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_multistream_dump_is_split_and_every_split_read(tmp_path, encoding) -> None:
    pages = [article(i) for i in range(1, 11)]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    utf8 = write_multistream(tmp_path / "a", "w", pages, per_stream=3)
    utf16 = write_multistream(tmp_path / "b", "w", pages, per_stream=3, encoding=encoding)
    splits = plan_splits(str(utf16), 1, READER)
    # The header's split, then one per page stream: each knows the file's encoding.
    assert [(s.number, s.encoding) for s in splits] == [(n, encoding) for n in range(5)]
    read = [item for split in splits for item in iter_dump(split, READER)]
    expected = [
        item for split in plan_splits(str(utf8), 1, READER) for item in iter_dump(split, READER)
    ]
    assert [p.page_id for p in pages_of(read)] == list(range(1, 11))
    assert [(p.page_id, p.title, p.text) for p in pages_of(read)] == [
        (p.page_id, p.title, p.text) for p in pages_of(expected)
    ]


def test_two_utf16_dumps_one_after_the_other_are_both_read(tmp_path) -> None:
    first = codecs.BOM_UTF16_LE + dump_xml([article(1)], encoding="UTF-16").encode("utf-16-le")
    second = codecs.BOM_UTF16_LE + dump_xml([article(2)], encoding="UTF-16").encode("utf-16-le")
    path = tmp_path / "two.xml"
    path.write_bytes(first + second)
    assert [p.page_id for p in pages_of(read_all(path))] == [1, 2]


def refusal(path: Path) -> DumpReadError:
    with pytest.raises(DumpReadError) as raised:
        read_all(path)
    return raised.value


@pytest.mark.parametrize(
    ("encoding", "declared"),
    [("utf-16-le", "UTF-8"), ("utf-16-be", "UTF-16LE"), ("utf-16-le", "ISO-8859-1")],
)
def test_a_declaration_the_byte_order_mark_contradicts_is_refused(
    tmp_path, encoding, declared
) -> None:
    path = tmp_path / "dump.xml"
    path.write_bytes(MARKS[encoding] + dump_xml([article(1)], encoding=declared).encode(encoding))
    error = refusal(path)
    assert error.reason == "unsupported_encoding"
    assert str(error) == (
        f"{path}: the document's byte-order mark says {encoding.upper()} but its XML "
        f"declaration says {declared!r}: the two disagree, so its text cannot be read for "
        "certain: correct the declaration, or convert the file to UTF-8 (iconv) at "
        "decompressed byte 0 (the start of an XML document); no page was read"
    )


def not_read(declared: str) -> str:
    return (
        f"the document is encoded as {declared}, but only UTF-8 (MediaWiki's encoding) and "
        "UTF-16 with a byte-order mark are read (so that no text is decoded wrongly without a "
        "word): if the bytes are UTF-8, correct the declaration; otherwise convert the file to "
        "UTF-8 (iconv)"
    )


@pytest.mark.parametrize(
    ("data", "declared", "at"),
    [
        # UTF-32's mark begins with UTF-16-LE's: it is UTF-32, not UTF-16 with a U+0000.
        (
            codecs.BOM_UTF32_LE + dump_xml([article(1)], encoding="UTF-32").encode("utf-32-le"),
            "UTF-32 (its byte-order mark)",
            0,
        ),
        (
            dump_xml([article(1)], encoding="UTF-16LE").encode("utf-16-le"),
            "UTF-16 or UTF-32 without a byte-order mark (NUL bytes at its start)",
            0,
        ),
        (
            dump_xml([article(1)]).encode()
            + codecs.BOM_UTF16_LE
            + dump_xml([article(2)], encoding="UTF-16").encode("utf-16-le"),
            "UTF-16, after a first document in UTF-8 (its byte-order mark)",
            len(dump_xml([article(1)]).encode()),
        ),
    ],
    ids=["utf-32", "utf-16-without-a-mark", "utf-16-after-utf-8"],
)
def test_encodings_that_are_not_read_are_refused(tmp_path, data, declared, at) -> None:
    path = tmp_path / "dump.xml"
    path.write_bytes(data)
    error = refusal(path)
    assert error.reason == "unsupported_encoding"
    assert str(error).startswith(
        f"{path}: {not_read(declared)} at decompressed byte {at} (the start of an XML document)"
    )


def test_utf16_bytes_cut_inside_a_character_are_malformed(tmp_path) -> None:
    xml = header(encoding="UTF-16") + page_xml(article(1)) + FOOTER
    path = tmp_path / "dump.xml"
    path.write_bytes(codecs.BOM_UTF16_BE + xml.encode("utf-16-be") + b"\x00")
    error = refusal(path)
    assert error.reason == "malformed_xml"
    size = 2 + 2 * len(xml)
    assert str(error) == (
        f"{path}: not UTF-16-BE as its byte-order mark says (truncated data) at decompressed "
        f"byte {size} of its UTF-16-BE; last good page: #1 id=1 'Article 1'"
    )


def test_a_lone_surrogate_is_malformed_utf16(tmp_path) -> None:
    head = header(encoding="UTF-16") + page_xml(article(1))
    path = tmp_path / "dump.xml"
    broken = head.encode("utf-16-le") + b"\x00\xd8" + b"<\x00"  # a high surrogate, then '<'
    path.write_bytes(codecs.BOM_UTF16_LE + broken + FOOTER.encode("utf-16-le"))
    error = refusal(path)
    assert error.reason == "malformed_xml"
    assert str(error).startswith(
        f"{path}: not UTF-16-LE as its byte-order mark says (illegal UTF-16 surrogate) at "
        f"decompressed byte {2 + 2 * len(head)} of its UTF-16-LE"
    )


def test_the_pages_before_damaged_utf16_are_read_then_the_file_fails(tmp_path) -> None:
    # The damage lies in the file's one chunk: the text before it is parsed all the same.
    head = header(encoding="UTF-16") + page_xml(article(1)) + page_xml(article(2))
    path = tmp_path / "dump.xml"
    broken = head.encode("utf-16-le") + b"\x00\xdc" + page_xml(article(3)).encode("utf-16-le")
    path.write_bytes(codecs.BOM_UTF16_LE + broken + FOOTER.encode("utf-16-le"))
    items: list = []
    with pytest.raises(DumpReadError) as raised:
        items.extend(iter_dump(DumpSplit(path=str(path), number=0), READER))
    assert [(page.page_id, page.title) for page in pages_of(items)] == [
        (1, "Article 1"),
        (2, "Article 2"),
    ]
    assert (raised.value.reason, str(raised.value)) == (
        "malformed_xml",
        f"{path}: not UTF-16-LE as its byte-order mark says (illegal encoding) at decompressed "
        f"byte {2 + 2 * len(head)} of its UTF-16-LE; last good page: #2 id=2 'Article 2'",
    )
