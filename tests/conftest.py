"""Shared fixtures: the embedded real sample and a local Beam runner that never downloads."""

from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.testing.test_pipeline import TestPipeline

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture
def sample_dump() -> Path:
    (path,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    return path


@pytest.fixture
def books_dir() -> Path:
    return DATA_DIR / "books"


@pytest.fixture
def test_pipeline() -> TestPipeline:
    # Beam's default DirectRunner tries to download the Prism binary first; FnApiRunner is
    # what bertkit runs locally.
    return TestPipeline(runner=fn_runner.FnApiRunner(), options=PipelineOptions([]))


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
