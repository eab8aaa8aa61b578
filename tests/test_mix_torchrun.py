"""A mix under torchrun (2 Gloo processes on the CPU), stopped with --stop-at-step and resumed
on 1 process with the same global batch: the resumed steps read the uninterrupted run's
global batches, sample by sample and source by source (BERTKIT_RECORD_KEYS), as
tests/test_elastic.py shows for one source."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from schemas.checkpoint import CheckpointKey
from tests.support import mix_sources
from tests.support.elastic import run_training, train_command
from trainer.run.checkpoints import latest_checkpoint

wiki_shards = mix_sources.wiki_shards  # the second source, a session fixture


def mixed_global_batches(record: Path) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(epoch, global batch) → its (source, sample key) pairs: every rank's micro-batches in
    (accumulation step, rank) order, as the global batch's slots run."""
    micro: dict[tuple[int, int], list[tuple[int, int, list[tuple[int, int]]]]] = {}
    for path in sorted(record.glob("keys-rank-*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            pairs = list(zip(entry["sources"], entry["keys"], strict=True))
            key = (entry["epoch"], entry["global_batch"])
            micro.setdefault(key, []).append((entry["step"], entry["rank"], pairs))
    return {key: [p for *_, pairs in sorted(parts) for p in pairs] for key, parts in micro.items()}


# Slow (20 s, two torchrun jobs): the default tier keeps its parts, a mix resumed in one
# process (tests/test_mix_run.py) and a mix's global batches on any world size
# (tests/test_mix_loader.py); this joins them across processes.
@pytest.mark.slow
def test_a_mix_stopped_on_2_processes_and_resumed_on_1_reads_the_uninterrupted_batches(
    sample_shards, wiki_shards, tmp_path
) -> None:
    mix = ["--mix", "0.7,0.3", "--max-steps", "5"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"

    def command(processes: int, output: Path, *extra: str) -> list[str]:
        """tests/support/elastic.py's command, with the second source after the first."""
        line = train_command(processes, sample_shards, output, *mix, *extra)
        at = line.index("--shards")
        return [*line[: at + 2], str(wiki_shards), *line[at + 2 :]]

    run_training(command(2, whole, "--num-workers", "1"), tmp_path / "keys-whole")
    run_training(
        command(2, stopped, "--num-workers", "1", "--stop-at-step", "2"),
        tmp_path / "keys-stopped",
    )
    expected = mixed_global_batches(tmp_path / "keys-whole")
    assert sorted(expected) == [(0, g) for g in range(5)]
    assert {source for batch in expected.values() for source, _ in batch} == {0, 1}
    assert mixed_global_batches(tmp_path / "keys-stopped") == {
        key: pairs for key, pairs in expected.items() if key[1] < 2
    }
    resumed = tmp_path / "resumed"
    shutil.copytree(stopped, resumed)
    run_training(command(1, resumed, "--num-workers", "2", "--resume"), tmp_path / "keys-resumed")
    got = mixed_global_batches(tmp_path / "keys-resumed")
    assert got == {key: pairs for key, pairs in expected.items() if key[1] >= 2}
    # Each global batch of 64 takes 0.7 × 64 = 44.8 samples from the first source: 44 or 45.
    assert [sum(1 for s, _ in got[(0, g)] if s == 0) in (44, 45) for g in (2, 3, 4)] == [True] * 3
    a = torch.load(latest_checkpoint(whole / "checkpoints"), weights_only=True)
    b = torch.load(latest_checkpoint(resumed / "checkpoints"), weights_only=True)
    assert (b[CheckpointKey.WORLD_SIZE], b[CheckpointKey.DATA]) == (1, a[CheckpointKey.DATA])
    assert a[CheckpointKey.DATA_POSITION] == b[CheckpointKey.DATA_POSITION]
