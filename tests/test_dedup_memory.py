"""`bertkit dedup`'s peak memory does not grow with the number of documents: its buckets go
through spill files (pipelines/dedup/buckets.py), not through the local runner's in-memory
shuffle, which held every document's band keys and signatures (about 34 KB a one-word
document). Peak RSS of a real process (RUSAGE_CHILDREN of a fresh wrapper)."""

from __future__ import annotations

import pytest

from tests.support.one_word_documents import dedup_peak_rss_mib, write_one_word_documents


def _growth_kb_per_document(tmp_path, small: int, large: int) -> tuple[float, float]:
    peaks = {}
    for count in (small, large):
        documents = write_one_word_documents(tmp_path / f"d{count}", count)
        peaks[count] = dedup_peak_rss_mib(documents, tmp_path / f"o{count}")
    growth = (peaks[large] - peaks[small]) * (1 << 20) / (large - small) / 1000
    return growth, peaks[large]


def test_peak_memory_does_not_grow_with_the_documents(tmp_path) -> None:
    growth, _ = _growth_kb_per_document(tmp_path, 10_000, 30_000)
    assert growth <= 1.0, f"{growth:.1f} KB more peak RSS per document from 10,000 to 30,000"


@pytest.mark.slow
def test_two_hundred_thousand_documents_fit_in_a_gigabyte(tmp_path) -> None:
    growth, peak_mib = _growth_kb_per_document(tmp_path, 100_000, 200_000)
    assert growth <= 1.0, f"{growth:.1f} KB more peak RSS per document from 100,000 to 200,000"
    assert peak_mib <= 1024, f"{peak_mib:.0f} MiB peak RSS at 200,000 documents"
