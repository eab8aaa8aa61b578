"""The embedded real sample, built once per test session: its documents, an 8,000-token
vocabulary and its shards at 128. Fixtures that tests/conftest.py and bench/tests/conftest.py
both import, so the tests and the benchmarks' own checks run on the same data.
"""

from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "data"


@pytest.fixture(scope="session")
def sample_documents(tmp_path_factory) -> tuple[Path, Path]:
    """The real sample extracted once per session: (wikipedia documents, books documents)."""
    from pipelines import books, wikipedia

    root = tmp_path_factory.mktemp("sample-documents")
    wiki, book = root / "wikipedia", root / "books"
    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    assert wikipedia.run(["--input", str(dump), "--output", str(wiki)]) == 0
    assert books.run(["--input", str(DATA_DIR / "books" / "*.txt"), "--output", str(book)]) == 0
    return wiki, book


@pytest.fixture(scope="session")
def sample_vocab(tmp_path_factory, sample_documents) -> Path:
    """An 8,000-token uncased vocabulary trained on the real sample, once per session."""
    from pipelines import vocab

    output = tmp_path_factory.mktemp("sample-vocab") / "vocab"
    documents = [str(d) for d in sample_documents]
    assert (
        vocab.run(["--documents", *documents, "--output", str(output), "--vocab-size", "8000"]) == 0
    )
    return output


@pytest.fixture(scope="session")
def sample_shards(tmp_path_factory, sample_documents, sample_vocab) -> Path:
    """The real sample's examples at 128 (dupe factor 2, 5 % held out), once per session:
    ~16,000 train and ~600 held-out examples in shards of 2,000."""
    from pipelines import examples

    output = tmp_path_factory.mktemp("sample-shards") / "shards"
    documents = [str(d) for d in sample_documents]
    assert (
        examples.run(
            [
                "--documents",
                *documents,
                "--vocab",
                str(sample_vocab),
                "--output",
                str(output),
                "--max-seq-length",
                "128",
                "--dupe-factor",
                "2",
                "--heldout-fraction",
                "0.05",
                "--samples-per-shard",
                "2000",
            ]
        )
        == 0
    )
    return output
