"""A second shards source for a mix beside the session's sample_shards (tests/support/sample.py):
the sample's Wikipedia articles alone, with the same vocabulary and length, made once per
session. tests/test_mix_run.py and tests/test_mix_torchrun.py import the fixture."""

from __future__ import annotations

from pathlib import Path

import pytest


def make_examples(documents: list[Path], vocab: Path, output: Path, *flags: str) -> Path:
    """`bertkit examples` at dupe factor 1 with a tenth of the documents held out."""
    from pipelines import examples

    argv = ["--documents", *map(str, documents), "--vocab", str(vocab), "--output", str(output)]
    assert examples.run([*argv, "--dupe-factor", "1", "--heldout-fraction", "0.1", *flags]) == 0
    return output


@pytest.fixture(scope="session")
def wiki_shards(tmp_path_factory, sample_documents, sample_vocab) -> Path:
    """5,356 train and 494 held-out examples at 128 (the sample's 97 articles; sample_shards
    holds them and the books, at dupe factor 2)."""
    root = tmp_path_factory.mktemp("wiki")
    return make_examples(
        [sample_documents[0]], sample_vocab, root / "wiki", "--max-seq-length", "128"
    )
