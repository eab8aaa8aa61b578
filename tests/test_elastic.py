"""Elastic resume: the training order is one for every world size, worker count and
accumulation that make the same global batch, and a resume on another number of processes
goes on with the global batches an uninterrupted run reads (trainer/order.py)."""

from __future__ import annotations

import functools
import logging

import numpy as np
import pytest
import torch

from schemas.checkpoint import CheckpointKey
from tests.support.elastic import FLAGS, elastic_figure
from tests.support.global_batches import read_global_batches as support_read_global_batches
from tests.test_data import length_of, write_uneven_shards
from trainer import train
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source
from trainer.order import EpochOrder
from trainer.run.checkpoints import check_resumable, latest_checkpoint

# 350 samples in five shards of blocks of 4 (90 blocks: a shard's last one may be short);
# global batches of 24 (14 an epoch, the last 14 samples dropped); windows of 4 of them.
SIZES = [70, 30, 110, 50, 90]
GLOBAL = 24
WINDOW = 96


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return open_source(str(write_uneven_shards(tmp_path_factory.mktemp("elastic"), SIZES, 4)))


# Global batches of this file's sizes, as `world` processes would make them.
read_global_batches = functools.partial(
    support_read_global_batches, global_batch=GLOBAL, window=WINDOW
)


# --------------------------------------------------------------------------- the order


def test_the_order_is_a_permutation_of_the_epochs_samples_within_windows():
    order = EpochOrder.of(350, GLOBAL, WINDOW, True, seed=7, epoch=0)
    assert (order.batches, order.window_batches) == (14, 4)
    positions = np.arange(order.batches * GLOBAL)
    sources = order.sources(positions)
    assert sorted(sources.tolist()) == list(range(336))  # the last 14 samples dropped
    # A sample moves only within its window (the last one: 2 global batches).
    assert (sources // WINDOW == positions // WINDOW).all()
    assert sources.tolist() != positions.tolist()
    # Global batch l of a window takes one sample of each of its 24 lanes of 4 samples.
    lanes = sources[:WINDOW].reshape(4, GLOBAL) // 4
    assert (lanes == np.arange(GLOBAL)).all()
    # Another epoch, another seed: another order; unshuffled: the stream as it is.
    for other in (
        EpochOrder.of(350, GLOBAL, WINDOW, True, 7, 1),
        EpochOrder.of(350, GLOBAL, WINDOW, True, 8, 0),
    ):
        assert other.sources(positions).tolist() != sources.tolist()
    plain = EpochOrder.of(350, GLOBAL, WINDOW, False, 7, 0)
    assert plain.sources(positions).tolist() == positions.tolist()


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 3 workers on 2 cores
@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_every_world_and_worker_count_reads_the_same_global_batches(source, workers):
    expected = read_global_batches(source, 1)
    assert len(expected) == 14 and all(len(batch) == GLOBAL for batch in expected)
    keys = sorted(key for batch in expected for key in batch)
    assert len(set(keys)) == 336  # every sample at most once; the dropped 14 never
    for world in (1, 2, 4):
        got = read_global_batches(source, world, workers)
        assert [set(batch) for batch in got] == [set(batch) for batch in expected], world
        assert got == expected, world  # key by key, not only as sets
    # Not even the micro-batch matters (without bucketing): 2 processes × 2 × 6.
    assert read_global_batches(source, 2, workers, micro=6) == expected


def test_epochs_and_seeds_give_other_orders(source):
    first = read_global_batches(source, 2)
    second = read_global_batches(source, 2, start=DataPosition(1))
    reseeded = read_global_batches(source, 2, seed=99)
    assert first != second and first != reseeded
    assert sorted(map(sorted, first)) != sorted(map(sorted, second))  # other global batches


@pytest.mark.parametrize("workers", [0, 2])
def test_the_bucketed_order_is_the_same_for_every_world(source, workers):
    """With --bucket-window the order depends on the micro-batch too, not on the world:
    each micro-batch sorted by length, the same global batches on 1, 2 and 4 processes."""
    expected = read_global_batches(source, 1, bucket_window=2)
    for world in (2, 4):
        assert read_global_batches(source, world, workers, bucket_window=2) == expected
    for batch in expected:
        for start in range(0, GLOBAL, 3):
            lengths = [length_of(key) for key in batch[start : start + 3]]
            assert lengths == sorted(lengths)
    plain = read_global_batches(source, 1)
    assert sorted(k for b in plain for k in b) == sorted(k for b in expected for k in b)


# --------------------------------------------------------------------------- resume


@pytest.mark.parametrize("bucket_window", [0, 2])
@pytest.mark.parametrize("stop", [1, 6, 13])
def test_a_resume_on_another_world_goes_on_with_the_same_global_batches(
    source, stop, bucket_window
):
    """Stopped after `stop` global batches on 2 processes, resumed on 1 and on 4 (with and
    without workers), into the next epoch: the global batches of the uninterrupted run."""
    flags = {"bucket_window": bucket_window}
    whole = read_global_batches(source, 2, count=20, **flags)
    assert len(whole) == 20  # 14 of epoch 0, 6 of epoch 1
    before = read_global_batches(source, 2, count=stop, **flags)
    config = LoaderConfig(3, world_size=2, shuffle_buffer=WINDOW, accumulation=4, **flags)
    loader = PretrainingLoader(source, config)
    batches = loader.batches(DataPosition())
    for _ in range(stop * 4):
        next(batches)
    position = loader.position
    assert position == DataPosition(0, stop)
    for world, workers in ((1, 0), (4, 2)):
        after = read_global_batches(
            source, world, workers, start=position, count=20 - stop, **flags
        )
        assert before + after == whole, (world, workers)


def test_the_position_counts_whole_global_batches(source):
    config = LoaderConfig(3, world_size=2, shuffle_buffer=WINDOW, accumulation=4)
    loader = PretrainingLoader(source, config)
    assert (loader.global_batches_per_epoch, loader.batches_per_epoch) == (14, 56)
    batches = loader.batches(DataPosition(0, 13))
    positions = []
    for _ in range(5):
        next(batches)
        positions.append(loader.position)
    # micro-batches 1-3 of a step leave the position at the step's start
    assert positions == [DataPosition(0, 13)] * 3 + [DataPosition(0, 14), DataPosition(1, 0)]
    assert DataPosition.from_dict(DataPosition(2, 5).to_dict()) == DataPosition(2, 5)
    # a checkpoint from before: one rank's micro-batches, 4 a step
    assert DataPosition.from_dict({"epoch": 1, "batches": 12}, 4) == DataPosition(1, 3)


def test_a_rank_reads_the_blocks_of_its_micro_batches_not_every_block(source, monkeypatch):
    """Rank r's micro-batches draw on the lanes of its micro indices: each of 4 ranks reads
    about a quarter of the blocks, and the four together little more than all of them
    (a block where two ranks' runs meet is read by both; one across two windows, twice)."""
    import trainer.samples

    reads: list[tuple[str, int]] = []
    real = trainer.samples.read_listed_blocks

    def counting(url, info, skip, take, policy):
        first, last = skip // info.block_samples, (skip + take - 1) // info.block_samples
        reads.extend((url, block) for block in range(first, last + 1))
        return real(url, info, skip, take, policy)

    monkeypatch.setattr(trainer.samples, "read_listed_blocks", counting)
    total = sum(-(-size // 4) for size in SIZES)
    per_rank = []
    for rank in range(4):
        reads.clear()
        config = LoaderConfig(3, rank=rank, world_size=4, shuffle_buffer=WINDOW, accumulation=2)
        for _ in PretrainingLoader(source, config).epoch(DataPosition()):
            pass
        per_rank.append(len(reads))
    print(f"blocks read per rank {per_rank} of {total}")
    assert min(per_rank) > total * 0.15, (per_rank, total)  # each reads its own share
    assert max(per_rank) < total * 0.45, (per_rank, total)
    assert sum(per_rank) < total * 1.5, (per_rank, total)


# --------------------------------------------------------------------------- refusals


def checkpoint_of(world: int, position: dict, **flags) -> dict:
    config = {
        "micro_batch_size": 16,
        "global_batch_size": 64,
        "seed": 1,
        "shuffle_buffer": 256,
        "bucket_window": 0,
        "num_workers": 2,
        "shards": "s",
        **flags,
    }
    return {
        CheckpointKey.TRAIN_CONFIG: config,
        CheckpointKey.WORLD_SIZE: world,
        CheckpointKey.DATA_POSITION: position,
    }


def test_resume_takes_any_world_size_with_the_same_global_batch_and_refuses_other_orders():
    saved = checkpoint_of(2, {"epoch": 0, "global_batches": 3})
    current = dict(saved[CheckpointKey.TRAIN_CONFIG])
    for world in (1, 2, 4):  # 16 × 1 × 4, 16 × 2 × 2, 16 × 4 × 1
        check_resumable(saved, {**current, "num_workers": world}, world)
    check_resumable(saved, {**current, "micro_batch_size": 32}, 1)  # 32 × 1 × 2
    refusals = [
        (
            {"global_batch_size": 32},
            1,
            "global batch 64 (micro-batch 16 × 2 processes × 2 "
            "accumulated), now 32 (micro-batch 16 × 1 process × 2 accumulated): pass "
            "--global-batch-size 64",
        ),
        (
            {"global_batch_size": None},
            2,
            "global batch 64 (micro-batch 16 × 2 processes × 2 "
            "accumulated), now 32 (micro-batch 16 × 2 processes × 1 accumulated)",
        ),
        ({"seed": 2}, 4, "--seed 1, now 2"),
        ({"shuffle_buffer": 512}, 1, "--shuffle-buffer 256, now 512"),
    ]
    for changed, world, message in refusals:
        with pytest.raises(ValueError) as error:
            check_resumable(saved, {**current, **changed}, world)
        assert message in str(error.value) and "\n" not in str(error.value)
    bucketed = checkpoint_of(2, {"epoch": 0, "global_batches": 3}, bucket_window=4)
    check_resumable(bucketed, dict(bucketed[CheckpointKey.TRAIN_CONFIG]), 4)
    with pytest.raises(ValueError, match=r"--micro-batch-size 16, now 32 \(--bucket-window"):
        check_resumable(
            bucketed, {**bucketed[CheckpointKey.TRAIN_CONFIG], "micro_batch_size": 32}, 1
        )


def test_a_checkpoint_from_before_elastic_resume_goes_on_only_with_its_world_size():
    old = checkpoint_of(2, {"epoch": 0, "batches": 6})
    current = dict(old[CheckpointKey.TRAIN_CONFIG])
    check_resumable(old, current, 2)
    with pytest.raises(
        ValueError, match=r"2 processes, now 1 \(a checkpoint written before elastic resume"
    ):
        check_resumable(old, current, 1)


def test_an_old_checkpoint_resumes_with_a_warning(sample_shards, tmp_path, caplog):
    """A checkpoint whose position counts one rank's micro-batches (before elastic resume)
    goes on at the same global batch, with a warning that the rest of its epoch is not
    the same samples."""
    output = tmp_path / "run"
    common = [
        "--model",
        "tiny",
        "--micro-batch-size",
        "8",
        "--global-batch-size",
        "16",
        "--max-steps",
        "3",
        "--warmup-steps",
        "1",
        "--eval-every",
        "0",
        "--eval-batches",
        "1",
        "--num-workers",
        "0",
        "--no-tensorboard",
        "--shards",
        str(sample_shards),
        "--output",
        str(output),
    ]
    assert train.run([*common, "--stop-at-step", "2"]) == 0
    path = latest_checkpoint(output / "checkpoints")
    checkpoint = torch.load(path, weights_only=True)
    assert checkpoint[CheckpointKey.DATA_POSITION] == {"epoch": 0, "global_batches": 2}
    checkpoint[CheckpointKey.DATA_POSITION] = {"epoch": 0, "batches": 4}  # 2 steps × 2
    torch.save(checkpoint, path)
    with caplog.at_level(logging.WARNING):
        assert train.run([*common, "--resume"]) == 0
    assert (
        "the checkpoint was written before elastic resume; it goes on at global batch 2 of epoch 0"
        in caplog.text
    )
    final = torch.load(latest_checkpoint(output / "checkpoints"), weights_only=True)
    assert final[CheckpointKey.DATA_POSITION] == {"epoch": 0, "global_batches": 3}


# --------------------------------------------------------------------------- the real thing


# slow: torchrun, two trainers, then one (about 45 CPU-seconds); the same resume on another
# world is checked in process above.
@pytest.mark.slow
def test_a_2_process_run_resumed_on_1_reads_the_uninterrupted_global_batches(
    sample_shards, tmp_path, capsys
):
    """The figure: `bertkit train` under torchrun, 2 Gloo processes stopped at step 3,
    resumed on 1 process (4 micro-batches a step, 2 loader workers), global batch 64: steps
    4-6 read the uninterrupted run's global batches, key by key. The resume on 4 processes
    (1 a step, no workers) is bench/tests/test_elastic.py's, with -m slow: 4 more trainers
    cost a quarter of a minute. A resume with another global batch is refused in one line."""
    results = elastic_figure(sample_shards, tmp_path, resumed_on=((1, 2),))
    assert [(r.processes, r.accumulation, r.batches, r.keys) for r in results] == [
        (1, 4, 3, 192),
    ]
    assert all(r.equal for r in results), results
    output = tmp_path / "stopped"  # its checkpoint: step 3 of 2 processes
    flags = [*FLAGS, "--shards", str(sample_shards), "--output", str(output), "--max-steps", "9"]
    capsys.readouterr()
    assert train.run([*flags, "--global-batch-size", "32", "--resume"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bertkit train: error: --resume continues exactly only with")
    assert "global batch 64 (micro-batch 16 × 2 processes × 2 accumulated), now 32" in line
