"""`bertkit inspect --report`: the statistics behind each plot on literal documents and
shards, Google's figures, refusing a file bertkit did not write, the demo's last step, and
the page of the real sample opened in a real browser (Debian's headless Chromium through
Playwright: no request, no console error, every image drawn)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bertkit import demo
from pipelines.inspect import open_target
from pipelines.inspect import run as inspect_run
from pipelines.inspect.report import report_html
from pipelines.inspect.report_data import (
    collect,
    google_predictions,
    google_target_lengths,
    heldout_shares,
    rank_frequency,
    read_duplicates,
    sample_stride,
)
from pipelines.inspect.report_html import GENERATOR_META
from schemas.documents import Document, documents_table
from schemas.duplicates import DUPLICATE_SCHEMA, DUPLICATES_DIR
from schemas.examples import SHARDS_MANIFEST_NAME
from schemas.manifest import MANIFEST_NAME, DocumentsManifest, OutputFile
from schemas.shards import ShardsManifest
from tests.test_inspect import write_shards, write_vocab

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

DOCUMENTS = [
    Document("books/a", "books", "a", ("the cat sat.", "the dog ran on the mat.")),
    Document("books/b", "books", "b", ("zebra",)),
    Document("enwiki/1", "enwiki", "x", ("the mat.", "cat", "dog ran.", "on")),
]


def write_documents(
    directory: Path, documents: list[Document], stage: str = "books", dropped=None
) -> Path:
    """A documents directory as the stages write it: one Parquet file and its manifest."""
    directory.mkdir(parents=True)
    name = "documents-00000-0000.parquet"
    pq.write_table(documents_table(documents), directory / name)
    data = (directory / name).read_bytes()
    sentences = sum(len(d.sentences) for d in documents)
    text_bytes = sum(d.text_bytes() for d in documents)
    manifest = DocumentsManifest(
        stage=stage,
        inputs=[],
        config={},
        counts={"documents": len(documents), "sentences": sentences, "text_bytes": text_bytes},
        dropped=dropped or {},
        rejected={},
        failed_inputs=[],
        files=[
            OutputFile(
                name,
                len(documents),
                sentences,
                text_bytes,
                len(data),
                hashlib.sha256(data).hexdigest(),
            )
        ],
    )
    (directory / MANIFEST_NAME).write_text(manifest.to_json())
    return directory


@pytest.fixture
def shards_with_documents(tmp_path: Path) -> Path:
    """tests/test_inspect.py's literal shards, their manifest naming a literal documents
    directory (by a path relative to the manifest) and recording Google's flags."""
    vocab_dir = tmp_path / "vocab"
    shards = write_shards(tmp_path, str(vocab_dir), write_vocab(vocab_dir))
    write_documents(tmp_path / "documents", DOCUMENTS)
    manifest = ShardsManifest.from_json((shards / SHARDS_MANIFEST_NAME).read_text())
    manifest.inputs = [{"path": "../documents"}, {"path": str(tmp_path / "gone")}]
    manifest.config = {"masked_lm_prob": 0.15, "short_seq_prob": 0.1, "heldout_fraction": 0.25}
    manifest.counts = {"documents": 4, "documents_heldout": 1}
    (shards / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    return shards


# --------------------------------------------------------------------------- statistics


def test_google_s_predictions_per_example_from_the_lengths() -> None:
    # round(10 × 0.15) = round(1.5) = 2; round(30 × 0.15) = round(4.5) = 4 (half to even, as
    # Python's and Google's); 128 × 0.15 = 19.2 → 19, capped at 18; 3 → max(1, 0) = 1.
    lengths = Counter({10: 2, 30: 1, 128: 1, 3: 5})
    assert google_predictions(lengths, 0.15, 18) == Counter({2: 2, 4: 1, 18: 1, 1: 5})


def test_google_s_target_lengths_share() -> None:
    # max_seq_length 8: targets 2..5 tokens (+3 specials) share short_seq_prob; 8 the rest.
    share = google_target_lengths(8, 0.1)
    assert share == pytest.approx({5: 0.025, 6: 0.025, 7: 0.025, 8: 0.925})
    assert sum(share.values()) == pytest.approx(1.0)


def test_rank_frequency_and_sample_stride() -> None:
    assert rank_frequency(np.array([0, 5, 3, 0, 9]), {4}).tolist() == [5, 3]
    assert sample_stride(100_001, 50_000) == 3 and sample_stride(10, 50_000) == 1


def test_the_statistics_of_documents_and_shards_are_exact(shards_with_documents: Path) -> None:
    data = collect(open_target(str(shards_with_documents)), None, verify=True)
    (documents,) = data.documents
    assert documents.per_source == Counter({"books": 2, "enwiki": 1})
    assert documents.bytes_per_source == Counter({"books": 12 + 23 + 5, "enwiki": 8 + 3 + 8 + 2})
    assert documents.sentences_per_document == Counter({2: 1, 1: 1, 4: 1})
    assert (documents.documents, documents.sentences, documents.text_bytes) == (3, 7, 61)
    assert documents.duplicates is None  # no dedup run
    assert data.notes == [
        f"documents {shards_with_documents.parent / 'gone'}: not readable from here (no "
        "_manifest.json there, or on other storage than the shards), so its plots are left out"
    ]
    # Tokens per sentence with the shards' vocabulary (uncased WordPiece): "the cat sat ."
    # 4, "the dog ran on the mat ." 7, "zebra" 1 ([UNK]), "the mat ." 3, …
    assert data.sentence_tokens == Counter({4: 1, 7: 1, 1: 3, 3: 2})
    assert (data.sampled_sentences, data.sampled_tokens, data.sampled_unknown) == (7, 20, 1)

    assert data.shards is not None
    train, heldout = data.shards.splits["seq128/train"], data.shards.splits["seq128/heldout"]
    assert (train.examples, train.tokens, train.not_next) == (2, 19, 1)
    assert train.lengths == Counter({10: 1, 9: 1})
    assert train.predictions == Counter({3: 1, 1: 1})
    assert train.masked == Counter({"mask": 2, "keep": 1, "random": 1})
    assert (train.max_seq_length, train.max_predictions) == (128, 20)
    assert heldout.masked == Counter({"mask": 0, "keep": 1, "random": 0})
    # The tokens as the text had them (masked positions hold their labels): 5 "the" six
    # times, 6 "cat" three, 8, 9 and 12 twice, 7, 10 and 11 once; [CLS] 3, [SEP] 6.
    assert data.shards.token_counts.tolist() == [0, 0, 3, 6, 0, 6, 3, 1, 2, 2, 1, 1, 2]
    skip = {0, 2, 3, 4}
    assert rank_frequency(data.shards.token_counts, skip).tolist() == [6, 3, 2, 2, 2, 1, 1, 1]
    assert heldout_shares(data.shards.manifest) == {
        "fraction": 0.25,
        "documents": 4,
        "documents_heldout": 1,
        "examples": 3,
        "examples_heldout": 1,
    }


def test_documents_are_sampled_every_kth_sentence(tmp_path: Path) -> None:
    from pipelines.inspect.report_data import read_documents

    target = open_target(str(write_documents(tmp_path / "d", DOCUMENTS)))
    section = read_documents(target, verify=True, stride=2)
    assert section.sampled == ["the cat sat.", "zebra", "cat", "on"]


def duplicates_table(rows: list[tuple[str, str, str, float]]) -> pa.Table:
    """(id, source, kind, similarity) rows with the Duplicate schema."""
    return pa.table(
        {
            "id": [r[0] for r in rows],
            "source": [r[1] for r in rows],
            "input": ["in"] * len(rows),
            "duplicate_of": ["books/a"] * len(rows),
            "duplicate_of_source": ["books"] * len(rows),
            "duplicate_of_input": ["in"] * len(rows),
            "kind": [r[2] for r in rows],
            "similarity": [r[3] for r in rows],
        },
        schema=DUPLICATE_SCHEMA,
    )


def test_duplicates_are_read_from_the_manifest_and_duplicates_files(tmp_path: Path) -> None:
    dropped = {"exact_duplicate": 2, "near_duplicate": 1}
    directory = write_documents(tmp_path / "dedup", DOCUMENTS, stage="dedup", dropped=dropped)
    (directory / DUPLICATES_DIR).mkdir()
    rows = [
        ("books/c", "books", "exact_duplicate", 1.0),
        ("books/d", "books", "exact_duplicate", 1.0),
        ("enwiki/2", "enwiki", "near_duplicate", 0.85),
    ]
    pq.write_table(duplicates_table(rows), directory / DUPLICATES_DIR / "duplicates-00000.parquet")
    manifest = DocumentsManifest.from_json((directory / MANIFEST_NAME).read_text())
    summary = read_duplicates(str(directory), manifest)
    assert summary is not None
    assert summary.dropped == dropped and summary.files == 1 and summary.note == ""
    assert summary.rows == Counter(exact_duplicate=2, near_duplicate=1)
    assert summary.by_source == Counter(books=2, enwiki=1)
    assert summary.similarities == [0.85]
    assert summary.by_input == Counter({("in", "exact_duplicate"): 2, ("in", "near_duplicate"): 1})
    page = report_html(open_target(str(directory)))
    assert "Duplicates removed" in page and "3 of 6 removed" in page
    assert "no dedup run" not in page

    manifest.dropped = {"exact_duplicate": 3, "near_duplicate": 1}
    summary = read_duplicates(str(directory), manifest)
    assert summary is not None and summary.note == (
        "the manifest counts {'exact_duplicate': 3, 'near_duplicate': 1} but _duplicates/ "
        "holds {'exact_duplicate': 2, 'near_duplicate': 1}"
    )


# --------------------------------------------------------------------------- the page


def test_the_page_is_self_contained_and_marked(shards_with_documents: Path) -> None:
    page = report_html(open_target(str(shards_with_documents)))
    assert GENERATOR_META in page
    assert not re.search(r"<script|<link|@import|url\(|src=\"(?!data:image/png;base64,)", page)
    # documents, sentences, tokens per sentence, then lengths, NotNext, predictions,
    # 80/10/10, token frequency, held out; duplicates: "no dedup run", said in words.
    assert page.count("<img ") == 9
    assert "no dedup run" in page
    assert "min(20, max(1, round(n × 0.15)))" in page
    assert page == report_html(open_target(str(shards_with_documents)))  # deterministic


def test_a_documents_directory_alone_shows_words_without_a_vocabulary(tmp_path: Path) -> None:
    page = report_html(open_target(str(write_documents(tmp_path / "d", DOCUMENTS))))
    assert "Words per sentence" in page and "pass --vocab DIR" in page
    assert page.count("<img ") == 3  # sources, sentences, words; no shards panels


def test_a_foreign_file_is_refused_before_any_work(
    shards_with_documents: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "notes.html"
    out.write_text("<html>my notes</html>")
    (shards_with_documents / "seq128" / "train" / "shard-000000.tar").unlink()  # never read
    assert inspect_run([str(shards_with_documents), "--report", str(out)]) == 1
    error = capsys.readouterr().err
    assert f"--report {out}: a file is there that `bertkit inspect --report` did not " in error
    assert out.read_text() == "<html>my notes</html>"
    assert inspect_run([str(shards_with_documents), "--report", str(tmp_path)]) == 1
    assert "is a directory" in capsys.readouterr().err
    inside = shards_with_documents / "report.html"
    assert inspect_run([str(shards_with_documents), "--report", str(inside)]) == 1
    assert "its next --overwrite run would refuse the report" in capsys.readouterr().err
    assert not inside.exists()


def test_without_the_vocabulary_the_page_says_what_it_cannot_show(
    shards_with_documents: Path,
) -> None:
    shutil.rmtree(shards_with_documents.parent / "vocab")
    page = report_html(open_target(str(shards_with_documents)))
    assert "Words per sentence" in page and "[MASK] cannot be told from a random token" in page
    assert page.count("<img ") == 8  # no tokens per sentence, no [MASK]/kept/random


def test_its_own_earlier_report_is_replaced(shards_with_documents: Path, tmp_path: Path, capsys):
    out = tmp_path / "sub" / "report.html"
    assert inspect_run([str(shards_with_documents), "--report", str(out)]) == 0
    first = out.read_bytes()
    out.write_bytes(first.replace(b"bertkit data report</h1>", b"old</h1>"))
    assert inspect_run([str(shards_with_documents), "--report", str(out)]) == 0
    assert out.read_bytes() == first
    assert capsys.readouterr().out.startswith(f"report: {out} (")
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temporary left


# --------------------------------------------------------------------------- the demo


def tree_sha256(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_the_demo_ends_with_the_report_and_its_path(
    tmp_path: Path, monkeypatch, capsys, sample_documents, sample_vocab, sample_shards
) -> None:
    """The demo's stages are replaced by copies of the session's sample outputs (their own
    tests run them): what is checked is the last step, which must only read them."""
    built = {
        "wikipedia": sample_documents[0],
        "books": sample_documents[1],
        "vocab": sample_vocab,
        "examples": sample_shards,
    }

    def stage(name: str):
        def main(argv: list[str]) -> None:
            shutil.copytree(built[name], argv[argv.index("--output") + 1], dirs_exist_ok=True)

        return main

    for name in built:
        monkeypatch.setattr(getattr(demo, name), "main", stage(name))
    output = tmp_path / "demo"
    assert demo.run(["--output", str(output), "--train-steps", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"Data report (open it in a browser): {output / 'report.html'}"
    assert GENERATOR_META in (output / "report.html").read_text()
    for name, source in (("vocab", sample_vocab), ("shards", sample_shards)):
        assert tree_sha256(output / name) == tree_sha256(source)  # kept their bytes


# --------------------------------------------------------------------------- a real browser


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists() or not os.access(CHROMIUM, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: CI installs Debian's chromium (README)")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium to run the browser test")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def test_the_sample_s_report_renders_in_chromium(browser, sample_shards, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert inspect_run([str(sample_shards), "--report", str(out)]) == 0
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, failed, requests = [], [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri(), wait_until="load")
    images = page.eval_on_selector_all(
        "img",
        "els => els.map(e => [e.complete, e.naturalWidth, e.getBoundingClientRect().width,"
        " e.getBoundingClientRect().height])",
    )
    assert errors == [] and failed == []
    assert all(url.startswith(("file://", "data:")) for url in requests), requests
    assert len(images) == 9  # the sample has no dedup run: said in words, no plot
    assert all(done and natural > 0 and w > 0 and h > 0 for done, natural, w, h in images)
    assert page.title() == "bertkit data report"
    assert "no dedup run" in page.inner_text("main")
    page.close()


def test_the_report_goes_to_s3_and_refuses_a_foreign_object(
    s3_server, shards_with_documents: Path, monkeypatch, capsys
) -> None:
    from tests.support.s3server import client_environment

    endpoint, client = s3_server
    bucket = s3_server.bucket("reports")
    for name, value in {**client_environment(endpoint), "NO_PROXY": "127.0.0.1,localhost"}.items():
        monkeypatch.setenv(name, value)
    out = f"s3://{bucket}/data/report.html"
    assert inspect_run([str(shards_with_documents), "--report", out]) == 0
    page = client.get_object(Bucket=bucket, Key="data/report.html")["Body"].read()
    assert page == report_html(open_target(str(shards_with_documents))).encode()
    assert inspect_run([str(shards_with_documents), "--report", out]) == 0  # its own: replaced
    client.put_object(Bucket=bucket, Key="data/notes.html", Body=b"<html>notes</html>")
    assert (
        inspect_run([str(shards_with_documents), "--report", f"s3://{bucket}/data/notes.html"]) == 1
    )
    assert "did not write" in capsys.readouterr().err
    assert (
        client.get_object(Bucket=bucket, Key="data/notes.html")["Body"].read()
        == b"<html>notes</html>"
    )


def test_a_documents_directory_with_vocab_and_a_single_shard(
    shards_with_documents: Path, tmp_path: Path
) -> None:
    documents, vocab = tmp_path / "documents", tmp_path / "vocab"
    data = collect(open_target(str(documents)), str(vocab), verify=True)
    assert data.sentence_tokens == Counter({4: 1, 7: 1, 1: 3, 3: 2}) and data.shards is None
    assert "Tokens per sentence" in report_html(open_target(str(documents)), str(vocab))
    shard = shards_with_documents / "seq128" / "heldout" / "shard-000000.tar"
    data = collect(open_target(str(shard)), None, verify=True)
    assert len(data.documents) == 1 and data.shards is not None  # its manifest names them
    assert list(data.shards.splits) == ["seq128/heldout"]
    assert data.shards.splits["seq128/heldout"].examples == 1


def test_documents_that_cannot_be_read_are_notes_and_the_shards_still_report(
    shards_with_documents: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "_manifest.json").write_text("{")
    cut = shutil.copytree(tmp_path / "documents", tmp_path / "cut")
    (parquet,) = cut.glob("*.parquet")
    size = parquet.stat().st_size
    with parquet.open("r+b") as file:
        file.truncate(size - 10)
    manifest_file = shards_with_documents / SHARDS_MANIFEST_NAME
    manifest = ShardsManifest.from_json(manifest_file.read_text())
    manifest.inputs = [{"path": "../broken"}, {"path": "../cut"}]
    manifest_file.write_text(manifest.to_json())
    data = collect(open_target(str(shards_with_documents)), None, verify=True)
    assert data.documents == [] and data.shards is not None
    first, second = data.notes
    assert first.startswith(
        f"documents {broken}: cannot be read ({broken / '_manifest.json'}: not a DocumentsManifest"
    )
    assert second == (
        f"documents {cut}: cannot be read ({parquet}: {size - 10:,} bytes, the manifest "
        f"says {size:,}; the file was changed or cut short after writing: rerun the stage), so "
        "its plots are left out"
    )
