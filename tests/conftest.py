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
