"""`bertkit chain` over what is already in its --output: a file where it writes a directory
is refused before any work; `--overwrite` deletes every earlier output of its own steps that
this run does not write again (the documents of a stage given no input now, the vocabulary
that --vocab DIR replaces) or that was made from what it rewrites (the vocabulary, before its
documents are written anew), and never a file of the user's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipelines import chain
from pipelines.chain import cli

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
