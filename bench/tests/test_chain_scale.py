"""`bertkit chain` at ten times the sample, byte for byte against the four commands.

The sample's dump ×10 (bench.scale_dump: 57.5 MB of wikitext, multistream, cut into 4 MB
splits so several workers share it) and the sample's books go through the chain on two
worker processes; then the four commands, with the same flags, write into the same paths
(which the manifests record), one after the other, in process. Every file must be the same
bytes. Slow: about two minutes on two cores.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.scale_dump import build_scaled_dump
from pipelines import books, chain, examples, vocab, wikipedia
from tests.support.sample import DATA_DIR

EXAMPLE_FLAGS = ["--max-seq-length", "128", "--dupe-factor", "2", "--samples-per-shard", "5000"]


def files_of(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_the_chain_on_the_dump_x10_writes_what_the_four_commands_write(tmp_path) -> None:
    dump = build_scaled_dump(57.5, tmp_path / "dump", multistream=True, jobs=2, log=False)
    book_files = str(DATA_DIR / "books" / "*.txt")
    out = tmp_path / "out"
    workers = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    argv = ["--wikipedia", dump.path, "--books", book_files, "--output", str(out)]
    flags = ["--wikipedia-split-mb", "4", "--vocab-size", "8000", *EXAMPLE_FLAGS, *workers]
    assert chain.run([*argv, *flags]) == 0
    by_chain = files_of(out)
    shutil.rmtree(out)

    wiki, book = out / "documents" / "wikipedia", out / "documents" / "books"
    documents = [str(wiki), str(book)]
    assert wikipedia.run(["--input", dump.path, "--output", str(wiki), "--split-mb", "4"]) == 0
    assert books.run(["--input", book_files, "--output", str(book)]) == 0
    vocab_flags = ["--output", str(out / "vocab"), "--vocab-size", "8000"]
    assert vocab.run(["--documents", *documents, *vocab_flags]) == 0
    shards = ["--vocab", str(out / "vocab"), "--output", str(out / "shards"), *EXAMPLE_FLAGS]
    assert examples.run(["--documents", *documents, *shards]) == 0
    by_commands = files_of(out)

    assert sorted(by_chain) == sorted(by_commands)
    assert [name for name in by_chain if by_chain[name] != by_commands[name]] == []
    # ten copies of the sample's 97 articles, in more than one documents file and unit
    assert sum(name.startswith("documents/wikipedia/documents-") for name in by_chain) > 1
    manifest = json.loads(by_chain["documents/wikipedia/_manifest.json"])
    assert manifest["counts"]["documents"] == 970
