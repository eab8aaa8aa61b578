"""The elastic-resume figure, run for real: `bertkit train` under torchrun on Gloo (CPU), 2
processes stopped at step s, resumed on other numbers of processes with the same global
batch, and the global batches after s compared, sample key by sample key, with those of
the uninterrupted 2-process run. The keys come from the loader's record
(BERTKIT_RECORD_KEYS, trainer/data.py). tests/test_elastic.py and bench/elastic.py both
run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.torchrun import torchrun_trainer
from trainer.data import RECORD_KEYS_ENV

# A tiny model, one loader worker per process (the resumed runs change it too), and windows
# of 4 global batches, so that six steps cross one.
FLAGS = [
    "--model",
    "tiny",
    "--micro-batch-size",
    "16",
    "--global-batch-size",
    "64",
    "--shuffle-buffer",
    "256",
    "--warmup-steps",
    "1",
    "--eval-every",
    "0",
    "--eval-batches",
    "1",
    "--checkpoint-every",
    "100",
    "--log-every",
    "1",
    "--no-tensorboard",
]


@dataclass(frozen=True)
class Comparison:
    """One resumed run against the uninterrupted one: the global batches after the stop."""

    processes: int
    workers: int
    accumulation: int
    batches: int  # global batches compared
    keys: int  # sample keys compared
    equal: bool
    seconds: float


def train_command(processes: int, shards: Path, output: Path, *extra: str) -> list[str]:
    """`bertkit train` under torchrun, `processes` on this machine (Gloo on CPU)."""
    return [
        *torchrun_trainer(processes),
        *FLAGS,
        "--shards",
        str(shards),
        "--output",
        str(output),
        *extra,
    ]


def run_training(command: list[str], record: Path, timeout: float = 300) -> float:
    """Run it with the loader's key record in `record`; its seconds. AssertionError with
    the output's tail if it fails."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "BERTKIT_PROGRESS": "0",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        RECORD_KEYS_ENV: str(record),
    }
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(command[-12:])}: exit {done.returncode}\n"
            f"{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    return time.monotonic() - started


def global_batches(record: Path) -> dict[tuple[int, int], list[int]]:
    """(epoch, global batch) → its sample keys: the micro-batches of every rank's record,
    concatenated in (accumulation step, rank) order, as the global batch's positions run."""
    micro: dict[tuple[int, int], list[tuple[int, int, list[int]]]] = {}
    for path in sorted(record.glob("keys-rank-*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            key = (entry["epoch"], entry["global_batch"])
            micro.setdefault(key, []).append((entry["step"], entry["rank"], entry["keys"]))
    return {key: [k for *_, keys in sorted(parts) for k in keys] for key, parts in micro.items()}


def elastic_figure(
    shards: Path,
    workdir: Path,
    stop: int = 3,
    steps: int = 6,
    resumed_on: tuple[tuple[int, int], ...] = ((1, 2), (4, 0)),
) -> list[Comparison]:
    """The uninterrupted 2-process run, the same stopped after step `stop`, and one copy of
    the stopped run resumed for each (processes, loader workers) of `resumed_on`."""
    whole, stopped = workdir / "whole", workdir / "stopped"
    common = ["--max-steps", str(steps)]
    run_training(
        train_command(2, shards, whole, *common, "--num-workers", "1"), workdir / "keys-whole"
    )
    run_training(
        train_command(
            2, shards, stopped, *common, "--num-workers", "1", "--stop-at-step", str(stop)
        ),
        workdir / "keys-stopped",
    )
    expected = global_batches(workdir / "keys-whole")
    assert sorted(expected) == [(0, g) for g in range(steps)], sorted(expected)
    assert global_batches(workdir / "keys-stopped") == {
        key: keys for key, keys in expected.items() if key[1] < stop
    }
    results = []
    for processes, workers in resumed_on:
        output = workdir / f"resumed-on-{processes}"
        shutil.copytree(stopped, output)
        record = workdir / f"keys-resumed-on-{processes}"
        extra = [*common, "--num-workers", str(workers), "--resume"]
        seconds = run_training(train_command(processes, shards, output, *extra), record)
        got = global_batches(record)
        after = {key: keys for key, keys in expected.items() if key[1] >= stop}
        results.append(
            Comparison(
                processes=processes,
                workers=workers,
                accumulation=64 // (16 * processes),
                batches=len(got),
                keys=sum(len(keys) for keys in got.values()),
                equal=got == after,
                seconds=seconds,
            )
        )
    return results
