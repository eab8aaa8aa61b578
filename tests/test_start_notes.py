"""What a run says at its start that would otherwise surprise later: a --shuffle-buffer
under two global batches shuffles no sample across batches (the order's L is 1:
trainer/order.py); a vocabulary that is not where the shards' manifest says is needed by
`export-hf` (training itself reads token ids)."""

from __future__ import annotations

import logging
import shutil

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


def test_a_resumed_run_is_told_what_can_change_it() -> None:
    """A resume keeps its order, --shuffle-buffer included (it refuses another): the note
    does not advise the flag, but a new run from the weights."""
    assert shuffle_note(40, 32, resumed=True) == (
        "--shuffle-buffer 40 holds under 2 global batches of 32: each global batch keeps the "
        "same samples every epoch, only the shards' order changes; a resume keeps the run's "
        "order, so only a new run (--init-checkpoint from this one's checkpoints) can shuffle "
        "more, with --shuffle-buffer 256 or more"
    )


def test_a_run_says_it_at_its_start(sample_shards, tmp_path, caplog) -> None:
    flags = [*common(sample_shards, tmp_path / "run"), "--eval-batches", "1"]
    flags += ["--micro-batch-size", "8", "--shuffle-buffer", "12"]
    with caplog.at_level(logging.INFO, logger="bertkit"):
        assert train.run([*flags, "--max-steps", "2", "--stop-at-step", "1"]) == 0
    assert shuffle_note(12, 8) in [record.getMessage() for record in caplog.records]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bertkit"):
        assert train.run([*flags, "--max-steps", "2", "--resume"]) == 0
    said = [record.getMessage() for record in caplog.records]
    assert shuffle_note(12, 8, resumed=True) in said and shuffle_note(12, 8) not in said


def test_a_run_whose_vocabulary_is_not_there_says_so(sample_shards, tmp_path, caplog) -> None:
    """Shards copied without their vocabulary train (static masks: token ids only), and the
    run says at once what export-hf will need, not first at the export."""
    shards = tmp_path / "elsewhere" / "shards"
    shutil.copytree(sample_shards, shards)
    flags = [*common(shards, tmp_path / "run"), "--max-steps", "1", "--eval-batches", "1"]
    with caplog.at_level(logging.INFO, logger="bertkit"):
        assert train.run(flags) == 0
    [said] = [r.getMessage() for r in caplog.records if "is not at" in r.getMessage()]
    assert said.startswith("the vocabulary the shards were made with is not at ")
    assert said.endswith(
        ": training goes on (the shards hold token ids), but `bertkit export-hf` will need "
        "--vocab DIR, a copy of it; or pass --vocab DIR to this run"
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bertkit"):  # where it is: nothing said
        assert train.run([*common(sample_shards, tmp_path / "run2"), "--max-steps", "1"]) == 0
    assert not [r for r in caplog.records if "is not at" in r.getMessage()]
