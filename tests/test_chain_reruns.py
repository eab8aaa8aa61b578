"""`bertkit chain` over what is already in its --output: a file where it writes a directory
is refused before any work, as a file given as --output is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines import chain

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
