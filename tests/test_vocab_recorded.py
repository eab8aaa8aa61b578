"""vocab.json records what shapes the vocabulary, not how it was written: `--overwrite`
leaves its bytes as they were (as the shards manifest leaves it out, and the dataset card
says of both)."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines import vocab
from schemas.vocab import VOCAB_METADATA_FILE
from tests.test_report import DOCUMENTS, write_documents


def test_overwrite_is_not_recorded_and_leaves_vocab_json_as_it_was(tmp_path: Path) -> None:
    documents = write_documents(tmp_path / "documents", DOCUMENTS)
    out = tmp_path / "vocab"
    argv = ["--documents", str(documents), "--output", str(out), "--vocab-size", "40"]
    assert vocab.run([*argv, "--min-frequency", "1"]) == 0
    first = (out / VOCAB_METADATA_FILE).read_bytes()
    assert vocab.run([*argv, "--min-frequency", "1", "--overwrite"]) == 0
    assert (out / VOCAB_METADATA_FILE).read_bytes() == first
    assert json.loads(first)["config"] == {
        "cased": False,
        "documents": [str(documents)],
        "limit_alphabet": 1000,
        "min_frequency": 1,
        "num_unused": 0,
        "output": str(out),
        "sample_mb": 1024.0,
        "seed": 0,
        "vocab_size": 40,
    }
