"""bench.elastic: its table on literal results, and (slow: three torchrun launches and one
more, the runs tests/test_elastic.py's figure makes) the benchmark itself on the sample."""

from __future__ import annotations

import pytest

from bench import elastic
from tests.support.elastic import Comparison


def test_the_table_says_which_resumed_run_read_the_uninterrupted_batches():
    results = [
        Comparison(1, 2, 4, batches=3, keys=192, equal=True, seconds=9.04),
        Comparison(4, 0, 1, batches=3, keys=192, equal=False, seconds=12.5),
    ]
    assert elastic.table_rows(results, stop=3) == [
        ["2 → 1", "1 × 4", "2", "4–6", "192", "yes", "9.0"],
        ["2 → 4", "4 × 1", "0", "4–6", "192", "NO", "12.5"],
    ]
    assert len(elastic.HEADERS) == len(elastic.table_rows(results, 3)[0])


@pytest.mark.slow
def test_the_benchmark_resumes_the_sample_on_1_and_on_4(sample_shards, capsys):
    assert elastic.main(["--shards", str(sample_shards)]) == 0
    out = capsys.readouterr().out
    assert "2 → 1" in out and "2 → 4" in out and "NO" not in out
