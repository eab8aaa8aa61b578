"""`encode_examples` (the examples stage's batch encoder) writes each example's bytes exactly
as `PretrainingExample.encode` does, in both id widths, from arrays laid end to end."""

from __future__ import annotations

import numpy as np
import pytest

from schemas.examples import NOT_NEXT, POSITION_DTYPE, PretrainingExample, encode_examples


@pytest.mark.parametrize("width", [2, 4])
def test_a_batch_encodes_as_each_example_alone(width):
    ids = np.array([2, 7, 8, 3, 9, 3, 2, 70000 % 65536, 3, 11, 12, 3], dtype=np.int64)
    positions = np.array([1, 4, 2, 1, 2], dtype=np.int64)
    labels = np.array([7, 9, 5, 10, 12], dtype=np.int64)
    token_bounds = [(0, 6), (6, 9), (9, 12)]
    prediction_bounds = [(0, 2), (2, 3), (3, 5)]
    a_lengths = [3, 2, 1]
    nsp = [0, NOT_NEXT, 0]
    docs = [("enwiki/1", "enwiki/1"), ("enwiki/1", "book/é"), ("enwiki/2", "enwiki/2")]
    encoded = encode_examples(
        width,
        ids,
        token_bounds,
        a_lengths,
        positions,
        prediction_bounds,
        labels,
        nsp,
        [(a.encode("utf-8"), b.encode("utf-8")) for a, b in docs],
        dupe_pass=3,
    )
    dtype = np.dtype("<u2" if width == 2 else "<u4")
    expected = [
        PretrainingExample(
            ids[start:end].astype(dtype),
            a_length,
            positions[first:last].astype(POSITION_DTYPE),
            labels[first:last].astype(dtype),
            label,
            doc_a,
            doc_b,
            3,
        ).encode(width)
        for (start, end), a_length, (first, last), label, (doc_a, doc_b) in zip(
            token_bounds, a_lengths, prediction_bounds, nsp, docs, strict=True
        )
    ]
    assert encoded == expected
    second = PretrainingExample.decode(encoded[1])
    assert second.input_ids.tolist() == [2, 4464, 3]
    assert second.masked_lm_positions.tolist() == [2]
    assert second.masked_lm_ids.tolist() == [5]
    assert (second.next_sentence_label, second.doc_a, second.doc_b) == (1, "enwiki/1", "book/é")
    assert len(encoded[0]) == 18 + 6 * width + 2 * 2 + 2 * width + 2 * len("enwiki/1")


def test_examples_of_unequal_counts_are_refused():
    with pytest.raises(ValueError):
        encode_examples(
            2,
            np.zeros(3),
            [(0, 3)],
            [1, 2],
            np.zeros(0),
            [(0, 0)],
            np.zeros(0),
            [0],
            [(b"a", b"a")],
            0,
        )
