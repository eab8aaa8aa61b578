"""The loader's worker processes live across epochs (trainer/data.py's `batches()`): the same
processes go on into the next epoch, and every rank still gets, epoch after epoch, the very
micro-batches (and positions) a loader without workers gives, from any resume position."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace

import pytest
import torch
from torch.utils.data import get_worker_info

import trainer.data
from tests.test_data import write_uneven_shards
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source
from trainer.mix import MixedSource
from trainer.order import epoch_turn

EPOCHS = 3


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, object]:
    """One source of 35 samples (shards of 7, 3, 11, 5, 9; blocks of 4) and a mix of it with
    one of 26 (0.6/0.4: a nominal epoch of 61 // G global batches)."""
    one = open_source(str(write_uneven_shards(tmp_path_factory.mktemp("one"), block_samples=4)))
    other = write_uneven_shards(tmp_path_factory.mktemp("other"), [10, 16], 4)
    mix = MixedSource((one, open_source(str(other))), ("one", "other"), (0.6, 0.4))
    return {"one": one, "mix": mix}


def contents(batch: dict[str, torch.Tensor]) -> list[tuple[str, str, list]]:
    return [(name, str(batch[name].dtype), batch[name].tolist()) for name in sorted(batch)]


def epoch_by_epoch(source, config: LoaderConfig, start: DataPosition) -> list[tuple]:
    """What a loader without workers gives, one `epoch()` after another: (contents, position)
    after each micro-batch."""
    loader = PretrainingLoader(source, replace(config, num_workers=0))
    rows = []
    for epoch in range(start.epoch, start.epoch + EPOCHS):
        first = start if epoch == start.epoch else DataPosition(epoch)
        for batch in loader.epoch(first):
            position = loader.position
            rows.append((contents(batch), (position.epoch, position.global_batches)))
    return rows


def test_epoch_turn_shifts_the_round_robin_by_the_micro_batches_before():
    # 10 micro-batches before the epoch from 3 workers: the epoch's first (k = 0) is
    # micro-batch 10 overall, worker 10 mod 3 = 1's; worker w makes k ≡ w − 10 (mod 3).
    assert [epoch_turn(worker, 3, 10) for worker in range(3)] == [2, 0, 1]
    assert [epoch_turn(worker, 2, 8) for worker in range(2)] == [0, 1]


# Micro-batch 3, resumed at global batch 1 of epoch 0, rank `world - 1` of `world`. One
# source (35 samples) makes 11 micro-batches an epoch with 2 workers and accumulation 1 (10 in
# the first), 10 (8) with accumulation 2, and 4 (2) on 2 ranks; the mix (61 samples): 20
# (19), 20 (18) and 10 (8). So 2 workers × accumulation 1 and 3 workers turn a later epoch's
# round robin (its count before is not a multiple of the workers); 2 × 2 never does.
@pytest.mark.parametrize("name", ["one", "mix"])
@pytest.mark.parametrize(("workers", "accumulation", "world"), [(2, 1, 1), (2, 2, 1), (3, 2, 2)])
def test_workers_give_the_batches_of_no_workers_over_three_epochs(
    sources, name, workers, accumulation, world
):
    source = sources[name]
    config = LoaderConfig(
        3, world - 1, world, workers, shuffle_buffer=12, accumulation=accumulation
    )
    start = DataPosition(0, 1)
    expected = epoch_by_epoch(source, config, start)
    with PretrainingLoader(source, config) as loader:
        got = []
        for batch in itertools.islice(loader.batches(start), len(expected)):
            position = loader.position
            got.append((contents(batch), (position.epoch, position.global_batches)))
    assert [position for _, position in got] == [position for _, position in expected]
    assert got == expected


def test_the_position_across_a_boundary_with_accumulation(sources):
    """After each micro-batch the position names the step it is in (whole global batches):
    one source, 5 global batches an epoch, 2 micro-batches a step, from (0, 4) on."""
    config = LoaderConfig(3, num_workers=3, shuffle_buffer=12, accumulation=2)
    with PretrainingLoader(sources["one"], config) as loader:
        positions = []
        for _ in itertools.islice(loader.batches(DataPosition(0, 4)), 6):
            positions.append((loader.position.epoch, loader.position.global_batches))
    assert positions == [(0, 4), (0, 5), (1, 0), (1, 1), (1, 1), (1, 2)]


def test_the_same_worker_processes_make_every_epoch(sources, monkeypatch):
    """Each micro-batch says which process made it and its worker number (collate wrapped
    here, in the parent the workers fork from): three epochs of 11 micro-batches, all from
    the pool's two processes, micro-batch i (counted over the epochs) from worker i mod 2."""
    collate = trainer.data.collate

    def collate_where(*args, **kwargs):
        made = torch.tensor([os.getpid(), get_worker_info().id])
        return {**collate(*args, **kwargs), "producer": made}

    monkeypatch.setattr(trainer.data, "collate", collate_where)
    config = LoaderConfig(3, num_workers=2, shuffle_buffer=12)
    with PretrainingLoader(sources["one"], config) as loader:
        made: dict[int, list[tuple[int, int]]] = {}
        batches = loader.batches(DataPosition())
        for batch in itertools.islice(batches, 33):
            made.setdefault(loader.position.epoch, []).append(tuple(batch["producer"].tolist()))
        [running] = loader._pools
        pool = {process.pid for process in running.processes}  # still running
        batches.close()
        assert loader._pools == []
    rows = [row for epoch in sorted(made) for row in made[epoch]]
    processes = {worker: {pid for pid, number in rows if number == worker} for worker in (0, 1)}
    assert [len(processes[0]), len(processes[1])] == [1, 1]  # one process each, every epoch
    assert processes[0] | processes[1] == pool and os.getpid() not in pool
    assert {epoch: [worker for _, worker in rows] for epoch, rows in made.items()} == {
        0: [0, 1] * 5 + [0],
        1: [1, 0] * 5 + [1],
        2: [0, 1] * 5 + [0],
    }


def test_close_ends_the_workers_of_every_open_generator(sources):
    """Two generators open on one loader (an evaluation pass beside the training batches):
    close() ends both pools' processes, not only the last one's."""
    config = LoaderConfig(3, num_workers=2, shuffle_buffer=12)
    loader = PretrainingLoader(sources["one"], config)
    first, second = loader.batches(DataPosition()), loader.batches(DataPosition(0, 2))
    next(first), next(second)
    processes = [process for pool in loader._pools for process in pool.processes]
    assert len(loader._pools) == 2 and len(processes) == 4
    loader.close()
    assert loader._pools == []
    assert [process.is_alive() for process in processes] == [False] * 4
    first.close(), second.close()  # their own ends after the loader's: nothing left to do
    assert loader._pools == []
