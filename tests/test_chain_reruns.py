"""`bertkit chain` over what is already in its --output: a file where it writes a directory
is refused before any work; `--overwrite` deletes every earlier output of its own steps that
this run does not write again (the documents of a stage given no input now, the vocabulary
that --vocab DIR replaces) or that was made from what it rewrites (the vocabulary, before its
documents are written anew), and never a file of the user's; with --vocab DIR and every
document rejected it stops in one clean message."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import chain
from pipelines.chain import cli
from schemas import MANIFEST_NAME, REJECTS_DIR

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--vocab-size", "200", "--max-seq-length", "32", "--dupe-factor", "1"]
WORDS = "the cat sat on a mat while dogs ran over green hills and birds sang in tall trees"


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    """Six records of --corpus and two books of --books, a few sentences each."""
    words = WORDS.split()
    lines = []
    for document in range(6):
        sentences = [
            " ".join(words[(document + i) % 7 : (document + i) % 7 + 8]).capitalize() + "."
            for i in range(6)
        ]
        lines.append(json.dumps({"id": f"d{document}", "text": " ".join(sentences)}))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("\n".join(lines) + "\n")
    for book in range(2):
        paragraphs = [
            " ".join(words[i : i + 9]).capitalize() + ". " + " ".join(words[i + 1 : i + 8]) + "."
            for i in range(book, book + 8)
        ]
        (tmp_path / "in" / f"book{book}.txt").write_text("\n\n".join(paragraphs) + "\n")
    return ["--corpus", str(tmp_path / "in" / "a.jsonl"), "--books", f"{tmp_path}/in/*.txt"]


def files_below(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("name", "written", "what"),
    [
        ("shards", "shards", "the shards"),
        ("vocab", "vocab", "the vocabulary's files"),
        ("documents", "documents/books", "the books documents"),
    ],
)
def test_a_file_where_the_chain_writes_a_directory_is_refused_before_any_work(
    tmp_path: Path, inputs: list[str], capsys, name: str, written: str, what: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("x\n")
    assert chain.run([*inputs, "--output", str(out), *FLAGS]) == 2
    assert capsys.readouterr().err == (
        f"bertkit chain: error: --output {out}: {out / name} is a file, not a directory, and "
        f"{what} go in {out / written}: move the file or choose another --output\n"
    )
    assert files_below(out) == [name]


def test_a_rerun_stopped_before_its_vocabulary_leaves_no_earlier_one(
    tmp_path: Path, inputs: list[str], monkeypatch
) -> None:
    out = tmp_path / "out"
    assert chain.run([*inputs, "--output", str(out), *FLAGS]) == 0
    assert "vocab/vocab.json" in files_below(out)

    def stopped(*args, **kwargs):
        raise RuntimeError("stopped")

    # Stopped as the job starts, as a Ctrl-C during the extraction stops it: the earlier
    # vocabulary, learned from the documents this run rewrites, is gone with them.
    monkeypatch.setattr(cli, "add_chain_steps", stopped)
    with pytest.raises(RuntimeError, match="stopped"):
        chain.run([*inputs, "--output", str(out), *FLAGS, "--overwrite"])
    assert files_below(out) == []


def test_overwrite_deletes_the_outputs_this_run_does_not_write_again(
    tmp_path: Path, inputs: list[str], capsys
) -> None:
    out = tmp_path / "out"
    assert chain.run([*inputs, "--output", str(out), *FLAGS]) == 0
    vocab = tmp_path / "v"
    shutil.copytree(out / "vocab", vocab)
    (out / "notes.txt").write_text("mine\n")  # beside the chain's directories: not its own
    books = inputs[2:]  # no --corpus this time, and a vocabulary given
    argv = [*books, "--vocab", str(vocab), "--output", str(out), *FLAGS[2:]]
    capsys.readouterr()

    assert chain.run(argv) == 2  # an earlier run's files need --overwrite
    assert capsys.readouterr().err == (
        f"bertkit chain: error: {out}/documents/books is not empty: it holds 2 files of an "
        "earlier `bertkit books` run (e.g. _manifest.json); choose a new --output or pass "
        "--overwrite to replace them\n"
    )
    (out / "vocab" / "mine.txt").write_text("mine\n")  # in a directory the chain wrote
    before = files_below(out)
    assert chain.run([*argv, "--overwrite"]) == 2
    assert capsys.readouterr().err == (
        f"bertkit chain: error: {out}/vocab holds mine.txt, which `bertkit vocab` does not "
        "write: nothing was deleted. Choose a new or empty --output, or move those files\n"
    )
    assert files_below(out) == before

    (out / "vocab" / "mine.txt").unlink()
    assert chain.run([*argv, "--overwrite"]) == 0
    assert files_below(out) == [
        "documents/books/_manifest.json",
        "documents/books/documents-00000-0000.parquet",
        "notes.txt",
        "shards/README.md",
        "shards/manifest.json",
        "shards/seq32/train/shard-000000.tar",
        "shards/seq32/train/shard-000000.tar.blocks.json",
    ]
    assert sorted(p.name for p in out.iterdir()) == ["documents", "notes.txt", "shards"]
    assert [p.name for p in (out / "documents").iterdir()] == ["books"]
    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    assert [entry["path"] for entry in manifest["inputs"]] == ["../documents/books"]
    assert manifest["vocab"]["path"] == "../../v"
    # Books not given again: --overwrite would delete its documents, not replace them.
    corpus_only = [*inputs[:2], "--vocab", str(vocab), "--output", str(out), *FLAGS[2:]]
    capsys.readouterr()
    assert chain.run(corpus_only) == 2
    assert capsys.readouterr().err == (
        f"bertkit chain: error: {out}/documents/books is not empty: it holds 2 files of an "
        "earlier `bertkit books` run (e.g. _manifest.json); choose a new --output or pass "
        "--overwrite to delete them\n"
    )


def released_vocab(directory: Path) -> Path:
    """A released BERT's vocab.txt, alone: its casing is given by --no-cased."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *letters]
    tokens += [f"##{letter}" for letter in letters]
    directory.mkdir()
    (directory / "vocab.txt").write_text("\n".join(tokens) + "\n")
    return directory


@pytest.mark.parametrize(
    "workers",
    [(), ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing")],
    ids=["one process", "worker processes"],
)
def test_with_vocab_dir_and_every_document_rejected_it_stops_in_one_clean_message(
    tmp_path: Path, workers: tuple[str, ...]
) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "empty.txt").write_bytes(b"")
    vocab = released_vocab(tmp_path / "bert")
    argv = ["--books", "bad/*.txt", "--vocab", str(vocab), "--no-cased", "--output", "chain"]
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.chain", *argv, "--max-seq-length", "32", *workers],
        cwd=tmp_path,
        env={**os.environ, "BERTKIT_PROGRESS": "0", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    documents = "chain/documents/books"
    # Not Beam's ERROR line and traceback of the examples' plan, which found no document;
    # and nothing of a vocabulary to learn, since --vocab DIR gives it.
    assert done.stderr == (
        "WARNING pipelines.beam.documents: rejected books/empty (not_text): file is empty\n"
        f"WARNING bertkit.books: {documents} holds 0 documents: no file read was kept (1 "
        f"read; rejected not_text 1; the reasons are in {documents}/{REJECTS_DIR}/): fix "
        "the input or the flags the rejects name, then rerun with --overwrite\n"
        "WARNING bertkit.chain: the chain stopped after its documents: no document to make "
        "examples from, so no shards were written\n"
    )
    assert done.returncode == 1
    assert (tmp_path / documents / MANIFEST_NAME).exists()
    assert not (tmp_path / "chain" / "shards").exists()
