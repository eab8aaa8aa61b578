"""The real sample's fixtures, the same as the tests use (tests/support/sample.py)."""

from tests.support.sample import (  # noqa: F401 (session fixtures)
    sample_documents,
    sample_shards,
    sample_vocab,
)
