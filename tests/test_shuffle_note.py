"""A --shuffle-buffer under two global batches shuffles no sample across batches (the order's
L is 1: trainer/order.py): a run says so at its start, with the flag that fixes it."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.test_resume_schedule import common
from trainer import train
from trainer.order import EpochOrder, shuffle_note


@pytest.mark.parametrize(
    ("buffer", "global_batch", "said"),
    [
        (10_000, 8192, True),  # the default under docs' multi-node global batch
        (200, 128, True),
        (255, 128, True),
        (256, 128, False),  # two global batches: L = 2
        (10_000, 256, False),
        (0, 8192, False),  # shuffling off, on purpose
        (1, 8192, False),
    ],
)
def test_a_buffer_under_two_global_batches_is_said(buffer, global_batch, said) -> None:
    note = shuffle_note(buffer, global_batch)
    assert (note is not None) is said
    order = EpochOrder.of(100 * global_batch, global_batch, buffer, True, seed=1, epoch=0)
    # What the note says: a buffer under two global batches leaves every sample in its batch.
    unmoved = np.array_equal(
        order.sources(np.arange(4 * global_batch)), np.arange(4 * global_batch)
    )
    assert unmoved is (buffer < 2 * global_batch)


def test_the_note_names_the_flag_and_a_buffer_that_shuffles() -> None:
    assert shuffle_note(10_000, 8192) == (
        "--shuffle-buffer 10000 holds under 2 global batches of 8192: each global batch "
        "keeps the same samples every epoch, only the shards' order changes; pass "
        "--shuffle-buffer 65536 (8 global batches) or more to shuffle samples across batches"
    )


def test_a_run_says_it_at_its_start(sample_shards, tmp_path, caplog) -> None:
    flags = [*common(sample_shards, tmp_path / "run"), "--max-steps", "1", "--eval-batches", "1"]
    flags += ["--micro-batch-size", "8", "--shuffle-buffer", "12"]
    with caplog.at_level(logging.INFO, logger="bertkit"):
        assert train.run(flags) == 0
    assert shuffle_note(12, 8) in [record.getMessage() for record in caplog.records]
