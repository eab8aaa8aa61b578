"""A stage that writes 0 documents or 0 examples, or a held-out split of 0 examples, says so on
a WARNING line (what, where, the likely cause and its fix); one whose input was all rejected
exits 1, after its manifest and rejects are written (pipelines/beam/empty_outputs.py).

Each stage runs from its command line on small literal inputs, in this process; the lines
are compared whole.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines import books, corpus, dedup, examples, vocab, wikipedia
from pipelines.beam.runner import refusal_in_text
from pipelines.io.vocabulary import VocabError
from schemas import MANIFEST_NAME, REJECTS_DIR, Document, DocumentsManifest, OutputFile
from schemas.documents import documents_table

ROOT = Path(__file__).resolve().parents[1]
STORY = [f"The river number {i} runs through the old town and into the sea." for i in range(12)]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch) -> None:
    monkeypatch.setenv("BERTKIT_PROGRESS", "0")


def warnings_of(caplog, stage: str) -> list[str]:
    """The WARNING lines the stage logged about its output (logger `bertkit.STAGE`)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == f"bertkit.{stage}" and r.levelno == logging.WARNING
    ]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_documents(directory: Path, documents: list[Document]) -> Path:
    """A finished documents directory holding `documents` (as a documents stage writes it)."""
    directory.mkdir(parents=True)
    path = directory / "documents-00000-0000.parquet"
    pq.write_table(documents_table(documents), path)
    data = path.read_bytes()
    text_bytes = sum(len(s.encode()) for d in documents for s in d.sentences)
    sentences = sum(len(d.sentences) for d in documents)
    manifest = DocumentsManifest(
        stage="books",
        inputs=[],
        config={},
        counts={"documents": len(documents), "sentences": sentences, "text_bytes": text_bytes},
        dropped={},
        rejected={},
        failed_inputs=[],
        files=[
            OutputFile(
                name=path.name,
                documents=len(documents),
                sentences=sentences,
                text_bytes=text_bytes,
                bytes=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        ],
    )
    (directory / MANIFEST_NAME).write_text(manifest.to_json())
    return directory


def story(doc_id: str, shift: int) -> Document:
    return Document(
        id=doc_id, source="test", title=doc_id, sentences=tuple(STORY[shift:] + STORY[:shift])
    )


@pytest.fixture(scope="module")
def story_vocab(tmp_path_factory) -> Path:
    """A small vocabulary learned from the stories the tests make examples of."""
    root = tmp_path_factory.mktemp("vocab")
    documents = write_documents(root / "documents", [story(f"t/s{i}", i) for i in range(4)])
    output = root / "vocab"
    flags = ["--vocab-size", "200", "--min-frequency", "1"]
    assert vocab.run(["--documents", str(documents), "--output", str(output), *flags]) == 0
    return output


def test_a_corpus_whose_every_record_lacks_the_text_field_exits_1(tmp_path, caplog) -> None:
    records = write_jsonl(
        tmp_path / "in.jsonl", [{"id": "a", "body": "Some words."}, {"id": "b", "body": "More."}]
    )
    out = tmp_path / "out"
    assert corpus.run(["--input", str(records), "--output", str(out)]) == 1
    assert warnings_of(caplog, "corpus") == [
        f"{out} holds 0 documents: no record read was kept (2 read; rejected text_missing 2; "
        f"the reasons are in {out}/{REJECTS_DIR}/): fix the input or the flags the rejects name, "
        "then rerun with --overwrite"
    ]
    # Nothing is lost: the manifest and both rejects are written.
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["rejected"] == {"text_missing": 2}
    (rejects,) = (out / REJECTS_DIR).iterdir()
    assert len(rejects.read_text().splitlines()) == 2


def test_a_corpus_of_empty_texts_warns_and_exits_0(tmp_path, caplog) -> None:
    records = write_jsonl(
        tmp_path / "in.jsonl", [{"id": "a", "text": " "}, {"id": "b", "text": ""}]
    )
    out = tmp_path / "out"
    assert corpus.run(["--input", str(records), "--output", str(out)]) == 0
    assert warnings_of(caplog, "corpus") == [
        f"{out} holds 0 documents: every record read (2) was left out (no_text 2): every "
        "record's text was empty once cleaned: check that --text-field names the field that "
        "holds the text"
    ]


def test_an_empty_corpus_file_warns(tmp_path, caplog) -> None:
    records = tmp_path / "in.jsonl"
    records.write_text("", encoding="utf-8")
    out = tmp_path / "out"
    assert corpus.run(["--input", str(records), "--output", str(out)]) == 0
    assert warnings_of(caplog, "corpus") == [
        f"{out} holds 0 documents: its 1 input file holds no records: check that --input names "
        "the right files"
    ]


def test_a_dump_of_redirects_only_warns(tmp_path, caplog) -> None:
    dump = tmp_path / "dump.xml"
    dump.write_text(
        "<mediawiki><page><title>A</title><ns>0</ns><id>1</id><redirect title='B'/>"
        "<revision><text>#REDIRECT [[B]]</text></revision></page></mediawiki>",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert wikipedia.run(["--input", str(dump), "--output", str(out)]) == 0
    assert warnings_of(caplog, "wikipedia") == [
        f"{out} holds 0 documents: every page read (1) was left out (redirect 1): the dumps hold "
        "no article with running text (redirects, disambiguation pages and other namespaces "
        "are left out): check that --input names an articles dump"
    ]


def test_books_of_an_empty_file_exit_1(tmp_path, caplog) -> None:
    book = tmp_path / "empty.txt"
    book.write_bytes(b"")
    out = tmp_path / "out"
    assert books.run(["--input", str(book), "--output", str(out)]) == 1
    assert warnings_of(caplog, "books") == [
        f"{out} holds 0 documents: no file read was kept (1 read; rejected not_text 1; the "
        f"reasons are in {out}/{REJECTS_DIR}/): fix the input or the flags the rejects name, "
        "then rerun with --overwrite"
    ]


def test_dedup_and_vocab_of_no_documents(tmp_path, caplog) -> None:
    empty = write_documents(tmp_path / "empty", [])
    out = tmp_path / "dedup"
    assert dedup.run(["--documents", str(empty), "--output", str(out)]) == 0
    assert warnings_of(caplog, "dedup") == [
        f"{out} holds 0 documents: its --documents directories hold none; rerun the stage that "
        "made them (its own WARNING says why it wrote none)"
    ]
    # The vocabulary refuses before any work: there is no text to learn from.
    with pytest.raises(VocabError) as refused:
        vocab.run(["--documents", str(empty), "--output", str(tmp_path / "vocab")])
    assert str(refused.value) == (
        f"--documents {empty} holds no text (see {MANIFEST_NAME}): nothing to learn a "
        "vocabulary from; rerun the stage that made it (its WARNING says why it kept no "
        "document)"
    )
    assert not (tmp_path / "vocab").exists()


def test_a_heldout_fraction_that_holds_out_nothing_warns(tmp_path, caplog, story_vocab) -> None:
    documents = write_documents(tmp_path / "documents", [story(f"t/s{i}", i) for i in range(4)])
    out = tmp_path / "shards"
    flags = ["--max-seq-length", "32", "--dupe-factor", "1", "--heldout-fraction", "0.001"]
    argv = ["--documents", str(documents), "--vocab", str(story_vocab), "--output", str(out)]
    assert examples.run([*argv, *flags]) == 0
    assert warnings_of(caplog, "examples") == [
        f"{out}/seq32/heldout holds 0 examples: --heldout-fraction 0.001 held out 0 of the 4 "
        "documents (chosen by a hash of their id): raise --heldout-fraction or give more "
        "documents; without held-out shards `bertkit train` evaluates nothing"
    ]
    # --heldout-fraction 0 asks for no held-out split: nothing to say.
    caplog.clear()
    none = ["--heldout-fraction", "0", "--overwrite"]
    assert examples.run([*argv, *flags, *none]) == 0
    assert warnings_of(caplog, "examples") == []


def test_examples_of_documents_without_a_token_exit_1(tmp_path, caplog, story_vocab) -> None:
    blank = [
        Document(id=f"t/blank{i}", source="test", title="b", sentences=("\x00\x01", "\x07"))
        for i in range(3)
    ]
    documents = write_documents(tmp_path / "documents", blank)
    out = tmp_path / "shards"
    argv = ["--documents", str(documents), "--vocab", str(story_vocab), "--output", str(out)]
    assert examples.run([*argv, "--max-seq-length", "32"]) == 1
    assert warnings_of(caplog, "examples") == [
        f"{out} holds 0 examples: every one of its 3 documents was rejected "
        "(document_without_tokens: no sentence has a token after BERT normalization; see "
        f"{out}/{REJECTS_DIR}/): check the documents, and that --vocab is a vocabulary made "
        "for them"
    ]
    assert (out / "manifest.json").exists()


def test_pairs_of_one_document_warn(tmp_path, caplog, story_vocab) -> None:
    # One sentence is one chunk, and a chunk alone needs a NotNext partner from elsewhere.
    solo = Document(id="t/solo", source="test", title="solo", sentences=("The river runs.",))
    documents = write_documents(tmp_path / "documents", [solo])
    out = tmp_path / "shards"
    argv = ["--documents", str(documents), "--vocab", str(story_vocab), "--output", str(out)]
    assert examples.run([*argv, "--max-seq-length", "32", "--heldout-fraction", "0"]) == 0
    assert warnings_of(caplog, "examples") == [
        f"{out} holds 0 examples: its 1 document made no pair (a NotNext pair takes its second "
        "segment from another document of the same split; see "
        f"{out}/{REJECTS_DIR}/): give more documents, or --sequences full-sentences"
    ]


def test_a_split_of_one_document_warns_that_its_pairs_are_is_next_only(
    tmp_path, caplog, story_vocab
) -> None:
    # --heldout-fraction 0.6 holds out t/s0 alone (a hash of the id: 0.573, the others over
    # 0.64): its chunks that need a NotNext partner are rejected, the rest are IsNext.
    documents = write_documents(tmp_path / "documents", [story(f"t/s{i}", i) for i in range(4)])
    out = tmp_path / "shards"
    flags = ["--max-seq-length", "32", "--dupe-factor", "1", "--heldout-fraction", "0.6"]
    argv = ["--documents", str(documents), "--vocab", str(story_vocab), "--output", str(out)]
    assert examples.run([*argv, *flags]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    heldout = manifest["outputs"]["seq32"]["splits"]["heldout"]
    assert heldout["not_next"] == 0
    assert manifest["outputs"]["seq32"]["splits"]["train"]["not_next"] > 0
    assert warnings_of(caplog, "examples") == [
        f"{out}/seq32/heldout holds IsNext pairs only ({heldout['samples']} examples, not one "
        "NotNext): a NotNext pair takes its second segment from another document of the same "
        "split, and this one had none (the no_partner_document rejects), so next-sentence "
        "prediction trained or evaluated on it sees one class: give the split two or more "
        "documents (raise --heldout-fraction for the held-out split), or train with "
        "--objective mlm"
    ]


@pytest.mark.parametrize(
    "workers",
    [(), ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing")],
    ids=["one process", "worker processes"],
)
def test_a_chain_whose_corpus_is_all_rejected_exits_1(tmp_path, workers) -> None:
    records = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "body": "Some words here."}])
    argv = ["-m", "pipelines.chain", "--corpus", str(records), "--output", "chain", *workers]
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=tmp_path,
        env={**os.environ, "BERTKIT_PROGRESS": "0", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    documents = "chain/documents/corpus"
    # The reject, then what the documents hold and that the chain stopped; not Beam's
    # traceback of the vocabulary step, which found no text (printed and logged by a worker
    # process as well).
    assert done.stderr == (
        "WARNING pipelines.beam.documents: rejected corpus/a (text_missing): no 'text' field "
        "(the record's keys: id, body): name the field that holds the text with --text-field\n"
        f"WARNING bertkit.corpus: {documents} holds 0 documents: no record read was kept (1 "
        f"read; rejected text_missing 1; the reasons are in {documents}/{REJECTS_DIR}/): fix "
        "the input or the flags the rejects name, then rerun with --overwrite\n"
        "WARNING bertkit.chain: the chain stopped after its documents: no document to learn a "
        "vocabulary from, so no vocabulary and no shards were written\n"
    )
    assert done.returncode == 1
    assert (tmp_path / documents / MANIFEST_NAME).exists()


def test_a_workers_refusal_is_found_in_its_text() -> None:
    text = (
        "Traceback (most recent call last):\n  File ...\npipelines.io.vocabulary.VocabError: "
        "the sample holds no text [while running 'LearnPieces']\n"
    )
    assert refusal_in_text(text, (ValueError, VocabError)) == (
        "the sample holds no text [while running 'LearnPieces']"
    )
    assert refusal_in_text("ValueError: no", (VocabError,)) is None
