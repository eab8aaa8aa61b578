"""The global batches a loader makes, read in-process the way `world` processes would make
them: every rank's micro-batches concatenated in (accumulation step, rank) order, so runs on
different numbers of processes compare key by key (tests/test_elastic.py, and a mix's in
tests/test_mix_loader.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch

from schemas.batch import BatchField
from trainer.collate import SAMPLE_SOURCE
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader


def sample_keys(batch: dict[str, torch.Tensor]) -> list[int]:
    return batch[BatchField.SAMPLE_INDEX].tolist()


def source_keys(batch: dict[str, torch.Tensor]) -> list[tuple[int, int]]:
    """(source, key) pairs; a one-source batch's source is 0."""
    keys = batch[BatchField.SAMPLE_INDEX]
    return list(zip(batch.get(SAMPLE_SOURCE, keys * 0).tolist(), keys.tolist(), strict=True))


def read_global_batches(
    source: Any,
    world: int,
    workers: int = 0,
    micro: int = 3,
    start: DataPosition | None = None,
    count: int | None = None,
    *,
    global_batch: int,
    window: int,
    keys: Callable[[dict[str, torch.Tensor]], list] = sample_keys,
    **flags: Any,
) -> list[list]:
    """Global batches from `start` on (`count` of them, across epochs; without, the rest of
    the epoch), each the list of its samples' `keys`."""
    start = start or DataPosition()
    accumulation = global_batch // (micro * world)
    per_rank = []
    for rank in range(world):
        config = LoaderConfig(
            micro,
            rank=rank,
            world_size=world,
            num_workers=workers,
            shuffle_buffer=window,
            accumulation=accumulation,
            **flags,
        )
        with PretrainingLoader(source, config) as loader:
            batches = loader.epoch(start) if count is None else loader.batches(start)
            taken = itertools.islice(batches, None if count is None else count * accumulation)
            per_rank.append([keys(batch) for batch in taken])
    steps = len(per_rank[0]) // accumulation
    return [
        [
            key
            for step in range(accumulation)
            for rank in range(world)
            for key in per_rank[rank][g * accumulation + step]
        ]
        for g in range(steps)
    ]
