"""The real sample's fixtures, the same as the tests use (tests/support/sample.py)."""

# isort: off
import tests.support.worker_threads  # first: before torch is imported
import tests.support.triton_interpreter  # noqa: F401  # first: before anything imports Triton

# isort: on
from tests.support.sample import (  # noqa: F401 (session fixtures)
    sample_documents,
    sample_shards,
    sample_vocab,
)
