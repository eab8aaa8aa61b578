"""`bertkit inspect`'s statistics as plain functions on literal records, without the CLI."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pipelines.inspect import example_stats
from pipelines.inspect.stats import DocumentStats
from schemas.documents import DocumentColumn
from schemas.manifest import OutputFile

MASK = 4


def example(ids: list[int], positions: list[int], labels: list[int], label: int):
    from schemas.examples import PretrainingExample

    return PretrainingExample(
        input_ids=np.array(ids, dtype=np.uint16),
        segment_a_length=2,
        masked_lm_positions=np.array(positions, dtype=np.uint16),
        masked_lm_ids=np.array(labels, dtype=np.uint16),
        next_sentence_label=label,
        doc_a="a",
        doc_b="b",
        dupe_pass=0,
    )


# [CLS]=2 x [SEP]=3 y z [SEP]; position 1 holds [MASK] (was 9), 4 kept (10), 5 random (11→12).
FIRST = example([2, MASK, 3, 7, 10, 12, 3], [1, 4, 5], [9, 10, 11], label=1)
# 20 tokens, one prediction, replaced by [MASK]
SECOND = example([2, *range(5, 13), 3, MASK, *range(5, 13), 3], [10], [8], label=0)


def test_example_statistics_count_lengths_predictions_and_the_80_10_10_split() -> None:
    stats = example_stats([FIRST, SECOND], mask_id=MASK, max_length=32)
    assert stats["examples"] == 2
    assert stats["tokens"] == 7 + 20
    assert stats["not_next"] == 1 and stats["not_next_ratio"] == 0.5
    assert (stats["length_min"], stats["length_max"]) == (7, 20)
    assert stats["length_histogram"] == [(1, 16, 1), (17, 32, 1)]
    assert stats["predictions"] == {
        "total": 4,
        "mean": 2.0,
        "min": 1,
        "max": 3,
        "per_token": 4 / 27,
    }
    assert stats["masked"] == {
        "mask": 2,
        "keep": 1,
        "random": 1,
        "replaced": None,
        "mask_ratio": 0.5,
        "keep_ratio": 0.25,
        "random_ratio": 0.25,
    }


def test_without_the_mask_id_mask_and_random_are_one_replaced_count() -> None:
    masked = example_stats([FIRST], mask_id=None)["masked"]
    assert masked == {
        "mask": None,
        "keep": 1,
        "random": None,
        "replaced": 2,
        "mask_ratio": None,
        "keep_ratio": pytest.approx(1 / 3),
        "random_ratio": None,
    }


def test_no_examples_give_empty_counts_not_errors() -> None:
    stats = example_stats([], mask_id=MASK, max_length=16)
    assert stats["examples"] == 0 and stats["not_next_ratio"] is None
    assert stats["length_histogram"] == [(1, 16, 0)]
    assert stats["predictions"]["mean"] is None


def test_document_statistics_from_row_groups() -> None:
    stats = DocumentStats()
    sentences = [["One.", "Two two."], ["Three three three."], ["Four.", "Five.", "Six.", "Se."]]
    table = pa.table({DocumentColumn.SENTENCES: sentences})
    output = OutputFile("documents-0.parquet", 3, 7, 47, 1000, "0" * 64)
    stats.add(output, table.slice(0, 2))
    stats.add(output, table.slice(2))
    result = stats.result()
    # 4 + 8 + 18 + 5 + 5 + 4 + 3 UTF-8 bytes of sentences
    assert (result["documents"], result["sentences"], result["text_bytes"]) == (3, 7, 47)
    assert result["sentences_per_document"]["mean"] == pytest.approx(7 / 3)
    assert (result["sentences_per_document"]["min"], result["sentences_per_document"]["max"]) == (
        1,
        4,
    )
    assert result["sentences_per_document"]["histogram"] == [(1, 1, 1), (2, 3, 1), (4, 7, 1)]
    assert result["files"] == 1
    assert result["per_file"] == {
        "documents-0.parquet": {"documents": 3, "sentences": 7, "text_bytes": 47}
    }
