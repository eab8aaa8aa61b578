"""The Wikipedia stage: page → document rules, the transform, and whole runs."""

import bz2
import gzip
import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import apache_beam as beam
import duckdb
import pyarrow.dataset as ds
import pytest
from apache_beam.testing.util import assert_that, equal_to

from pipelines import wikipedia
from pipelines.beam.documents import UnitTally, read_manifest
from pipelines.beam.inputs import InputsError
from pipelines.io.storage import READER
from pipelines.text.wikidump import DumpSplit, IndexMismatch, RawPage, SiteInfo, plan_dump
from pipelines.text.wikitext import GAP
from pipelines.wikipedia import ExtractArticles, PageContext, WikipediaConfig, document_from_page
from schemas import DOCUMENT_SCHEMA, MANIFEST_NAME, REJECTS_DIR, Document
from schemas.documents import documents_from_table
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

SITE = SiteInfo(dbname="enwiki", base_url="https://en.wikipedia.org/wiki/")
CONTEXT = PageContext.of("dump.xml", SITE)
CONFIG = WikipediaConfig(input=("dump.xml",), output="out")  # the flags' defaults


def raw(text: str, title: str = "Alberta", **fields) -> RawPage:
    values = dict(
        page_id=717, title=title, namespace=0, redirect=False, revision_id=5, text=text, ordinal=1
    )
    values.update(fields)
    return RawPage(**values)


def test_article_becomes_a_sentence_split_document() -> None:
    tally = UnitTally("u")
    page = raw("'''Alberta''' is a province of [[Canada]]. It is west of Saskatchewan.")
    document = document_from_page(page, CONTEXT, replace(CONFIG, min_paragraph_words=0), tally)
    assert document == Document(
        id="enwiki/717",
        source="enwiki",
        title="Alberta",
        sentences=("Alberta is a province of Canada.", "It is west of Saskatchewan."),
        url="https://en.wikipedia.org/wiki/Alberta",
        revision=5,
    )


def test_sentences_with_a_gap_are_dropped_and_counted() -> None:
    tally = UnitTally("u")
    text = (
        r"The area of a circle is <math>A = \pi r^2</math> where r is the radius. "
        "It is round. <math>f</math> is a function of x. "
        'A formula <chem>H2O</chem> describes water. "Why?" It ends.\n\n'
        "<math>x = 1</math>\n\n"
        "The last paragraph has no formula at all."
    )
    document = document_from_page(raw(text), CONTEXT, replace(CONFIG, min_paragraph_words=0), tally)
    assert document is not None
    assert document.sentences == (
        "It is round.",
        '"Why?"',
        "It ends.",
        "The last paragraph has no formula at all.",
    )
    # The one-word paragraph of a lone formula is a sentence too: 4 in all.
    assert tally.counts["sentences_gapped"] == 4
    assert not [s for s in document.sentences if GAP in s]


def test_local_file_and_media_namespaces_come_from_the_siteinfo() -> None:
    site = SiteInfo(
        dbname="dewiki",
        base_url="https://de.wikipedia.org/wiki/",
        namespaces={-2: "Medium", 0: "", 6: "Datei", 14: "Kategorie"},
    )
    context = PageContext.of("dump.xml", site)
    assert (context.file_namespaces, context.media_namespaces) == (
        frozenset({"file", "image", "datei"}),
        frozenset({"media", "medium"}),
    )
    page = raw("Hear [[Medium:Hymne.ogg|die Hymne]] here.[[Datei:X.jpg|Bild]][[Kategorie:X]]")
    config = replace(CONFIG, min_paragraph_words=0)
    document = document_from_page(page, context, config, UnitTally("u"))
    assert document is not None and document.sentences == ("Hear die Hymne here.",)


def test_page_of_gapped_sentences_only_has_no_running_text() -> None:
    tally = UnitTally("u")
    page = raw("The area of a circle is <math>A</math> where r is the radius.")
    assert document_from_page(page, CONTEXT, CONFIG, tally) is None
    assert dict(tally.dropped) == {"no_running_text": 1}
    assert tally.counts["sentences_gapped"] == 1


def test_no_gap_no_count() -> None:
    tally = UnitTally("u")
    page = raw("Alberta is a province of [[Canada]] in the west.")
    assert document_from_page(page, CONTEXT, CONFIG, tally) is not None
    assert "sentences_gapped" not in tally.counts


@pytest.mark.parametrize(
    ("page", "reason"),
    [
        (raw("#REDIRECT [[Canada]]", redirect=True), "redirect"),
        (raw("#redirect [[Canada]]"), "redirect"),
        (raw("Talk text here.", namespace=1), "not_article_namespace"),
        (raw("'''Ada''' may be:\n* x\n{{disambiguation}}", title="Ada"), "disambiguation"),
        (raw("'''Aa''' may be:\n{{geodis}}", title="Aa River"), "disambiguation"),
        (raw("text", title="Austin (disambiguation)"), "disambiguation"),
        (raw("== List ==\n* only\n* a list"), "no_running_text"),
    ],
)
def test_dropped_pages_are_counted_by_reason(page: RawPage, reason: str) -> None:
    tally = UnitTally("u")
    assert document_from_page(page, CONTEXT, CONFIG, tally) is None
    assert dict(tally.dropped) == {reason: 1} and tally.rejects == []


def test_page_that_breaks_the_parser_is_rejected_with_reason() -> None:
    tally = UnitTally("u")
    nested = "{{nowrap|" * 50 + "x" + "}}" * 50
    assert document_from_page(raw(nested), CONTEXT, CONFIG, tally) is None
    (reject,) = tally.rejects
    assert (reject.id, reject.input, reject.position, reject.reason) == (
        "enwiki/717",
        "dump.xml",
        "page #1 'Alberta'",
        "wikitext_limit",
    )
    assert "nested deeper than MediaWiki's 40" in reject.error


def test_malformed_page_is_rejected() -> None:
    tally = UnitTally("u")
    page = raw("x", page_id=None, problem="page id 'two' is not an integer")
    assert document_from_page(page, CONTEXT, CONFIG, tally) is None
    assert [(r.id, r.reason) for r in tally.rejects] == [(None, "malformed_page")]


def test_extract_articles_transform(tmp_path, test_pipeline) -> None:
    pages = [article(1), Page(2, "R", "#REDIRECT [[Article 1]]", redirect="Article 1"), article(3)]
    dump = write_dump(tmp_path / "testwiki.xml.bz2", pages)
    out = tmp_path / "out"
    wikitext_bytes = len(pages[0].text) + len(pages[2].text)
    with test_pipeline as pipeline:
        summaries = pipeline | ExtractArticles([str(dump)], str(out), CONFIG)
        assert_that(
            summaries | beam.Map(lambda s: (s["unit"], s["counts"], s["dropped"], s["rejected"])),
            equal_to(
                [
                    (
                        "00000-00000",
                        {
                            "pages": 3,
                            "wikitext_bytes": wikitext_bytes,
                            "documents": 2,
                            "sentences": 2,
                            "text_bytes": wikitext_bytes - 4 * len("'''"),
                        },
                        {"redirect": 1},
                        {},
                    )
                ]
            ),
        )
    table = ds.dataset(out).to_table()
    assert table.schema.equals(DOCUMENT_SCHEMA, check_metadata=True)
    # Writer then reader: the rows read back as the same Document records.
    assert [d.id for d in documents_from_table(table)] == ["testwiki/1", "testwiki/3"]
    assert documents_from_table(table)[0] == Document(
        id="testwiki/1",
        source="testwiki",
        title="Article 1",
        sentences=(pages[0].text.replace("'''", ""),),
        url="https://test.example.org/wiki/Article_1",
        revision=10,
    )


def run_stage(*args: str) -> int:
    return wikipedia.run([*args])


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory) -> Path:
    (dump,) = (Path(__file__).resolve().parent.parent / "data" / "wikipedia").glob("*.bz2")
    out = tmp_path_factory.mktemp("sample") / "wiki"
    assert run_stage("--input", str(dump), "--output", str(out)) == 0
    return out


def test_real_sample_end_to_end(sample_run: Path) -> None:
    # 206 pages: 100 redirects (99 main-namespace + 1 in ns 4), 106 articles, of which 8 are
    # disambiguation pages and "List of anthropologists" holds only lists: 97 documents.
    manifest = read_manifest(str(sample_run))
    assert manifest.counts["pages"] == 206
    assert manifest.counts["documents"] == 97
    assert manifest.dropped == {
        "disambiguation": 8,
        "no_running_text": 1,
        "not_article_namespace": 1,
        "redirect": 99,
    }
    assert manifest.rejected == {} and manifest.failed_inputs == []
    table = ds.dataset(sample_run).to_table()  # the directory reads as is
    assert table.num_rows == 97
    assert (
        sum(len(s) for s in table.column("sentences").to_pylist()) == manifest.counts["sentences"]
    )
    documents = {row["id"]: row for row in table.to_pylist()}
    anarchism = documents["enwiki/12"]
    assert anarchism["title"] == "Anarchism"
    assert anarchism["url"] == "https://en.wikipedia.org/wiki/Anarchism"
    assert anarchism["sentences"][0] == (
        "Anarchism is a political philosophy that advocates self-governed societies based on "
        "voluntary institutions."
    )
    alberta = documents["enwiki/717"]["sentences"]
    assert alberta[0] == "Alberta is a western province of Canada."  # no "Alberta () is"
    assert "About 290 km south of the capital is Calgary, the largest city in Alberta." in alberta


def test_real_sample_has_no_markup_left(sample_run: Path) -> None:
    sentences = [
        s for row in ds.dataset(sample_run).to_table().to_pylist() for s in row["sentences"]
    ]
    for artefact in (
        "()",
        "( )",
        "{{",
        "}}",
        "[[",
        "]]",
        "''",
        "<ref",
        "&nbsp;",
        "&amp;",
        "  ",
        GAP,
    ):
        assert not [s for s in sentences if artefact in s], artefact
    assert not [s for s in sentences if s.startswith(("File:", "Image:", "Category:", "*", "|"))]


def test_duckdb_reads_the_directory(sample_run: Path) -> None:
    count = duckdb.sql(f"select count(*) from read_parquet('{sample_run}/*.parquet')").fetchall()
    assert count == [(97,)]


def test_manifest_checksums_match_the_files(sample_run: Path) -> None:
    import hashlib

    manifest = read_manifest(str(sample_run))
    for output in manifest.files:
        data = (sample_run / output.name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (output.bytes, output.sha256)


def test_output_directory_of_an_earlier_run_is_refused(sample_run: Path, sample_dump) -> None:
    with pytest.raises(ValueError, match="pass --overwrite"):
        run_stage("--input", str(sample_dump), "--output", str(sample_run))


def test_bad_inputs_are_reported_and_good_documents_kept(tmp_path: Path) -> None:
    write_dump(tmp_path / "good.xml.bz2", [article(i) for i in range(1, 4)])
    xml = write_dump(tmp_path / "tmp.xml", [article(i) for i in range(10, 14)]).read_text()
    (tmp_path / "tmp.xml").unlink()
    malformed = tmp_path / "malformed.xml"
    malformed.write_text(xml.replace("<title>Article 12</title>", "<title>Article 12</tit>"))
    nested = "{{nowrap|" * 50 + "x" + "}}" * 50
    write_dump(tmp_path / "breaking.xml", [article(20), Page(21, "Deep", nested)])
    truncated = tmp_path / "truncated.xml.bz2"
    big = write_dump(tmp_path / "big.xml.bz2", [article(i, words=1500) for i in range(100, 400)])
    truncated.write_bytes(big.read_bytes()[: int(big.stat().st_size * 0.7)])
    big.unlink()
    out = tmp_path / "out"

    code = run_stage("--input", str(tmp_path / "*.xml*"), "--output", str(out))

    assert code == 1  # two inputs could not be read to their end
    manifest = read_manifest(str(out))
    assert sorted(Path(f["input"]).name for f in manifest.failed_inputs) == [
        "malformed.xml",
        "truncated.xml.bz2",
    ]
    assert manifest.rejected == {"malformed_xml": 1, "truncated_input": 1, "wikitext_limit": 1}
    ids = set(ds.dataset(out).to_table().column("id").to_pylist())
    assert {"testwiki/1", "testwiki/2", "testwiki/3", "testwiki/20"} <= ids
    assert {"testwiki/10", "testwiki/11"} <= ids  # before the XML fault
    assert "testwiki/12" not in ids and "testwiki/21" not in ids
    assert len([i for i in ids if int(i.split("/")[1]) >= 100]) > 100  # before the truncation
    rejects = [
        json.loads(line)
        for path in sorted((out / REJECTS_DIR).glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    by_reason = {r["reason"]: r for r in rejects}
    assert by_reason["wikitext_limit"]["id"] == "testwiki/21"
    assert by_reason["malformed_xml"]["position"].startswith("XML line")
    assert "last good page: #2 id=11" in by_reason["malformed_xml"]["error"]
    assert by_reason["truncated_input"]["input"].endswith("truncated.xml.bz2")


def test_page_over_a_limit_is_rejected_with_its_reason() -> None:
    tally = UnitTally("00000")
    page = raw(None, problem="over 10000 XML elements …", problem_reason="page_too_many_elements")
    assert document_from_page(page, CONTEXT, CONFIG, tally) is None
    (reject,) = tally.rejects
    assert (reject.id, reject.reason, reject.position) == (
        "enwiki/717",
        "page_too_many_elements",
        "page #1 'Alberta'",
    )


def test_hostile_dumps_keep_their_good_pages(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    # 300 k nested elements in page 2 (1 kB of bz2), then page 3.
    deep = "<page><title>Deep</title><ns>0</ns><id>2</id>" + "<x>" * 300_000 + "</x>" * 300_000
    xml = header() + page_xml(article(1)) + deep + "</page>\n" + page_xml(article(3)) + FOOTER
    (tmp_path / "in" / "deep.xml.bz2").write_bytes(bz2.compress(xml.encode()))
    # A second dump concatenated after the first (two gzip members): both are read.
    second = dump_xml([article(5)]).replace("testwiki", "otherwiki")
    (tmp_path / "in" / "two.xml.gz").write_bytes(
        gzip.compress(dump_xml([article(4)]).encode()) + gzip.compress(second.encode())
    )
    # ISO-8859-1 declared over UTF-8 bytes: refused, not read as mojibake.
    lying = dump_xml([Page(6, "Café", "Café au lait is coffee with hot milk.")], encoding="latin-1")
    (tmp_path / "in" / "lying.xml").write_bytes(lying.encode("utf-8"))
    out = tmp_path / "out"

    code = run_stage("--input", str(tmp_path / "in" / "*"), "--output", str(out))

    assert code == 1  # lying.xml could not be read
    manifest = read_manifest(str(out))
    assert manifest.rejected == {"page_too_many_elements": 1, "unsupported_encoding": 1}
    assert [Path(f["input"]).name for f in manifest.failed_inputs] == ["lying.xml"]
    ids = sorted(ds.dataset(out).to_table().column("id").to_pylist())
    assert ids == ["otherwiki/5", "testwiki/1", "testwiki/3", "testwiki/4"]
    by_reason = {
        r["reason"]: r
        for r in (
            json.loads(line)
            for path in sorted((out / REJECTS_DIR).glob("*.jsonl"))
            for line in path.read_text().splitlines()
        )
    }
    assert by_reason["page_too_many_elements"]["id"] == "testwiki/2"
    assert by_reason["page_too_many_elements"]["position"] == "page #2 'Deep'"
    assert by_reason["unsupported_encoding"]["error"].startswith(
        f"{tmp_path / 'in' / 'lying.xml'}: the document is encoded as 'latin-1' in its XML "
        "declaration, but only UTF-8 (MediaWiki's encoding) and UTF-16 with a byte-order mark "
        "are read"
    )


def test_no_matching_input_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputsError, match="matches no file"):
        run_stage("--input", str(tmp_path / "none-*.xml.bz2"), "--output", str(tmp_path / "o"))


def file_digests(directory: Path) -> dict[str, str]:
    return {f.name: f.sha256 for f in read_manifest(str(directory)).files}


def test_multiprocessing_runner_gives_the_same_bytes(tmp_path: Path) -> None:
    pages = [article(i, words=40) for i in range(1, 61)]
    write_multistream(tmp_path, "testwiki-20260101-pages-articles", pages, per_stream=5)
    # The glob matches the index too; it is read through its dump, not as a dump.
    common = ["--input", str(tmp_path / "*.bz2"), "--split_mb", "0"]  # a split per stream
    assert run_stage(*common, "--output", str(tmp_path / "a")) == 0
    assert (
        run_stage(
            *common,
            "--output",
            str(tmp_path / "b"),
            "--direct_num_workers",
            "2",
            "--direct_running_mode",
            "multi_processing",
        )
        == 0
    )
    assert file_digests(tmp_path / "a") == file_digests(tmp_path / "b")
    assert len(file_digests(tmp_path / "a")) == 12  # 12 page streams → 12 files
    manifest_a = (tmp_path / "a" / MANIFEST_NAME).read_text()
    assert manifest_a == (tmp_path / "b" / MANIFEST_NAME).read_text()
    assert ds.dataset(tmp_path / "b").to_table().num_rows == 60


def test_write_manifest_transform_sums_units_in_order(tmp_path: Path, test_pipeline) -> None:
    from pipelines.beam.documents import WriteManifest

    def summary(unit: str, documents: int, dropped: dict, rejected: dict) -> dict:
        file = {
            "name": f"documents-{unit}-0000.parquet",
            "documents": documents,
            "sentences": 2 * documents,
            "text_bytes": 10 * documents,
            "bytes": 100,
            "sha256": unit[-1] * 64,
        }
        return {
            "unit": unit,
            "files": [file],
            "counts": {"documents": documents},
            "dropped": dropped,
            "rejected": rejected,
            "failed_inputs": [],
            "rejects_file": f"_rejects/rejects-{unit}.jsonl" if rejected else None,
        }

    inputs = [{"path": "a.xml", "bytes": 5}]
    with test_pipeline as pipeline:
        _ = (
            pipeline
            | beam.Create(
                [
                    summary("00001", 3, {"redirect": 2}, {"malformed_page": 1}),
                    summary("00000", 4, {"redirect": 1}, {}),
                ]
            )
            | WriteManifest(str(tmp_path), "wikipedia", inputs, {"min_paragraph_words": 5})
        )
    manifest = read_manifest(str(tmp_path))
    assert [f.name for f in manifest.files] == [
        "documents-00000-0000.parquet",
        "documents-00001-0000.parquet",
    ]
    assert manifest.counts == {"documents": 7, "files": 2, "rejected": 1, "units": 2}
    assert manifest.dropped == {"redirect": 3} and manifest.rejected == {"malformed_page": 1}
    assert manifest.rejects_files == ["_rejects/rejects-00001.jsonl"]
    assert (manifest.stage, manifest.inputs) == ("wikipedia", inputs)


def test_overwrite_refuses_a_directory_holding_files_no_stage_wrote(sample_dump, tmp_path, capsys):
    out = tmp_path / "wiki"
    assert wikipedia.run(["--input", str(sample_dump), "--output", str(out)]) == 0
    (out / "documents-notes.parquet").write_bytes(b"mine")  # looks like ours, is not
    with pytest.raises(SystemExit) as exit_:
        wikipedia.main(["--input", str(sample_dump), "--output", str(out), "--overwrite"])
    assert exit_.value.code == 2
    assert "holds documents-notes.parquet, which `bertkit wikipedia` does not write" in (
        capsys.readouterr().err
    )
    assert (out / "documents-notes.parquet").read_bytes() == b"mine"
    assert (out / "_manifest.json").is_file()  # the earlier run is untouched too
    (out / "documents-notes.parquet").unlink()
    assert wikipedia.run(["--input", str(sample_dump), "--output", str(out), "--overwrite"]) == 0


def rejects_in(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((out / REJECTS_DIR).glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def multistream_and_plain_copy(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Six articles in a multistream dump (streams of two pages) with its index, and the
    same dump's bytes in another directory without one."""
    (tmp_path / "in").mkdir()
    pages = [article(i) for i in range(1, 7)]
    dump = write_multistream(tmp_path / "in", "testwiki-20260101-pages-articles", pages, 2)
    index = tmp_path / "in" / "testwiki-20260101-pages-articles-multistream-index.txt.bz2"
    (tmp_path / "plain").mkdir()
    plain = Path(shutil.copy(dump, tmp_path / "plain" / dump.name))
    return dump, index, plain


@pytest.mark.parametrize("index_kind", ["stale", "not an index"])
def test_an_index_that_does_not_match_its_dump_is_a_reject_and_every_page_is_read(
    tmp_path: Path, caplog, index_kind: str
) -> None:
    dump, index, plain = multistream_and_plain_copy(tmp_path)
    listed = bz2.decompress(index.read_bytes()).decode().splitlines()
    assert [line.split(":", 1)[1] for line in listed[:2]] == ["1:Article 1", "2:Article 2"]
    first = int(listed[0].split(":")[0])  # where the stream of pages 1 and 2 starts
    if index_kind == "stale":  # every offset 137 bytes off: no stream starts there
        shifted = [f"{int(o) + 137}:{rest}" for o, rest in (x.split(":", 1) for x in listed)]
        index.write_bytes(bz2.compress("".join(f"{x}\n" for x in shifted).encode()))
        problem = f"offset {first + 137} is not where a bz2 stream of the dump starts"
    else:
        index.write_bytes(bz2.compress(b"hello world\n"))
        problem = "not an `offset:id:title` index line"
    error = (
        f"{problem}: the index does not match {dump} (a stale index, another dump's, or "
        "damage), so the dump is read without it, from its start in one split: every page is "
        "read, by one worker (with the dump's own index beside it, workers read it in "
        "parallel)"
    )
    assert plan_dump(str(dump), 0, READER) == (
        [DumpSplit(path=str(dump), number=0)],
        IndexMismatch(str(index), "line 1", error),
    )
    out, reference = tmp_path / "out", tmp_path / "reference"
    split_mb = ["--split_mb", "0"]  # a split per stream, had the index matched

    with caplog.at_level(logging.WARNING):
        code = run_stage("--input", str(dump), "--output", str(out), *split_mb)

    assert code == 0  # nothing was lost
    assert run_stage("--input", str(plain), "--output", str(reference), *split_mb) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "pipelines.beam.documents"] == [
        f"rejected {index} line 1 (bad_index): {error}"
    ]
    assert rejects_in(out) == [
        {
            "error": error,
            "id": None,
            "input": str(index),
            "position": "line 1",
            "reason": "bad_index",
        }
    ]
    manifest = read_manifest(str(out))
    assert manifest.rejected == {"bad_index": 1} and manifest.failed_inputs == []
    assert manifest.counts["units"] == 1 and manifest.counts["pages"] == 6
    rows = ds.dataset(out).to_table().to_pylist()
    assert [row["id"] for row in rows] == [f"testwiki/{i}" for i in range(1, 7)]
    assert rows == ds.dataset(reference).to_table().to_pylist()
    assert file_digests(out) == file_digests(reference)


def test_a_damaged_header_stream_of_an_indexed_dump_fails_that_input(tmp_path: Path) -> None:
    dump, _, plain = multistream_and_plain_copy(tmp_path)
    data = bytearray(dump.read_bytes())
    data[100] ^= 0xFF  # inside the header stream (<siteinfo>), before the first page stream
    for path in (dump, plain):
        path.write_bytes(bytes(data))
    assert plan_dump(str(dump), 0, READER) == ([DumpSplit(path=str(dump), number=0)], None)
    failures = []
    for path in (dump, plain):  # with its index, then without: the same failure
        out = tmp_path / f"out-{path.parent.name}"
        assert run_stage("--input", str(path), "--output", str(out), "--split_mb", "0") == 1
        manifest = read_manifest(str(out))
        assert manifest.rejected == {"corrupt_input": 1} and "pages" not in manifest.counts
        assert [(r["input"], r["reason"]) for r in rejects_in(out)] == [
            (str(path), "corrupt_input")
        ]
        (failed,) = manifest.failed_inputs
        assert failed["input"] == str(path)
        failures.append(failed["error"].replace(str(path), "DUMP"))
    assert failures == 2 * [
        "DUMP: corrupt bz2 data (Invalid data stream) at compressed byte 0 (bz2 stream 1 "
        f"starts there; the fault lies before byte {len(data)}); no page was read"
    ]
