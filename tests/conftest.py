"""Shared fixtures: the embedded real sample and a local Beam runner that never downloads."""

# isort: off
import tests.support.worker_threads  # first: before torch is imported
import tests.support.triton_interpreter  # noqa: F401  # first: before anything imports Triton

# isort: on
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.testing.test_pipeline import TestPipeline

from tests.support.s3server import start_s3_server, stop_server
from tests.support.sample import (  # noqa: F401 (session fixtures, shared with bench/tests)
    DATA_DIR,
    sample_documents,
    sample_shards,
    sample_vocab,
)


def pytest_collection_modifyitems(config, items) -> None:
    """`slow` tests run only when asked for (`-m slow`), as pyproject's marker says."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


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


class S3Server(NamedTuple):
    """A real S3 endpoint (moto's server) on loopback, and a boto3 client for it."""

    endpoint: str
    client: Any

    def bucket(self, name: str) -> str:
        """Create the bucket unless an earlier test module did."""
        existing = {b["Name"] for b in self.client.list_buckets()["Buckets"]}
        if name not in existing:
            self.client.create_bucket(Bucket=name)
        return name


def s3_flags(endpoint: str) -> list[str]:
    """Beam's s3:// filesystem flags for the loopback server."""
    return [
        "--s3_endpoint_url",
        endpoint,
        "--s3_access_key_id",
        "test",
        "--s3_secret_access_key",
        "test",
        "--s3_region_name",
        "us-east-1",
    ]


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server, started once per session; modules create their own buckets."""
    server, endpoint, client = start_s3_server()
    yield S3Server(endpoint, client)
    stop_server(server)
