"""The trainer under kill -9, for the fault campaign (bench/faults.py): a reference run, kills
before each checkpoint rename and at random points, `--resume`, and every tensor of every
checkpoint compared with the reference's. Not a command.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.faults_runs import (
    Finished,
    Inputs,
    Tally,
    command,
    killpoint_command,
    reference_run,
    run_and_kill,
    run_to_end,
    train_argv,
)

# metrics.jsonl figures that measure the machine, not the model.
TIMING_METRICS = ("seq_per_s", "tokens_per_s", "model_tflops", "mfu")


def checkpoint_names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").glob("step-*.pt"))


def last_metrics(run_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(kind, step) → its last line (a resumed run logs again the steps after its checkpoint),
    without the throughput figures."""
    records: dict[tuple[str, int], dict[str, Any]] = {}
    path = run_dir / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        records[(record["kind"], record["step"])] = {
            k: v for k, v in record.items() if k not in TIMING_METRICS
        }
    return records


def _values_equal(a: Any, b: Any, path: str, differences: list[str]) -> int:
    """Compare nested checkpoint values exactly; returns the tensor bytes compared."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
        if not same:
            differences.append(path)
        return a.numel() * a.element_size() if isinstance(a, torch.Tensor) else 0
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            differences.append(f"{path}: keys {sorted(map(str, a.keys() ^ b.keys()))}")
            return 0
        return sum(_values_equal(a[k], b[k], f"{path}.{k}", differences) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            differences.append(f"{path}: {len(a)} items, {len(b)}")
            return 0
        return sum(
            _values_equal(x, y, f"{path}[{i}]", differences)
            for i, (x, y) in enumerate(zip(a, b, strict=True))
        )
    if a != b and not (a != a and b != b):  # NaN equals NaN here
        differences.append(f"{path}: {a!r} != {b!r}")
    return 0


def load_checkpoint_values(path: Path, leave_out: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """A checkpoint's entries, with the named fields of its dict entries left out."""
    import torch

    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    for entry, names in leave_out.items():
        checkpoint[entry] = {k: v for k, v in checkpoint[entry].items() if k not in names}
    return checkpoint


# What differs between an uninterrupted run and a resumed one by design: the flags.
RESUME_FIELDS = {"train_config": ("resume", "overwrite")}


@dataclass
class TrainingReference:
    run_dir: Path
    checkpoints: dict[str, dict[str, Any]]
    latest: str
    metrics: dict[tuple[str, int], dict[str, Any]]

    @classmethod
    def read(cls, run_dir: Path, leave_out: dict[str, tuple[str, ...]]) -> TrainingReference:
        checkpoints = {
            name: load_checkpoint_values(run_dir / "checkpoints" / name, leave_out)
            for name in checkpoint_names(run_dir)
        }
        latest = (run_dir / "checkpoints" / "latest").read_text()
        return cls(run_dir, checkpoints, latest, last_metrics(run_dir))


def compare_training(
    tally: Tally,
    reference: TrainingReference,
    run_dir: Path,
    where: str,
    leave_out: dict[str, tuple[str, ...]] = RESUME_FIELDS,
) -> bool:
    """The run directory holds the reference's files (checkpoints, latest, metrics.jsonl)
    and nothing else but a killed checkpoint write's `.tmp-*` (noted, not compared), every
    checkpoint equal to the reference's, and the same metrics."""
    before = len(tally.mismatches)
    names = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    leftovers = [n for n in names if n.startswith("checkpoints/.tmp-")]
    expected = sorted(
        ["checkpoints/latest", "metrics.jsonl"]
        + [f"checkpoints/{n}" for n in reference.checkpoints]
    )
    if leftovers:
        tally.notes.append(f"{where}: the killed run's {', '.join(leftovers)} is still there")
    if [n for n in names if n not in leftovers] != expected:
        tally.mismatches.append(f"{where}: files {names}, expected {expected}")
    latest = run_dir / "checkpoints" / "latest"
    if not latest.exists() or latest.read_text() != reference.latest:
        tally.mismatches.append(f"{where}: checkpoints/latest is not {reference.latest.strip()}")
    for name, expected_values in reference.checkpoints.items():
        path = run_dir / "checkpoints" / name
        if not path.exists():
            continue  # reported above
        differences: list[str] = []
        tally.bytes += _values_equal(
            expected_values, load_checkpoint_values(path, leave_out), name, differences
        )
        tally.files += 1
        tally.mismatches += [f"{where}: {d}" for d in differences[:5]]
    metrics = last_metrics(run_dir)
    tally.files += 1
    tally.bytes += len(json.dumps(sorted(reference.metrics.items())))
    if metrics != reference.metrics:
        wrong = [
            k
            for k in reference.metrics.keys() | metrics.keys()
            if metrics.get(k) != reference.metrics.get(k)
        ]
        tally.mismatches.append(f"{where}: metrics differ at {sorted(wrong)[:5]}")
    return len(tally.mismatches) == before


def check_killed_training(
    tally: Tally, reference: TrainingReference, run_dir: Path, where: str
) -> None:
    """What a killed run left: `latest`, if there, names a checkpoint equal to the
    reference's at that step; so does every other complete checkpoint."""
    for name in checkpoint_names(run_dir):
        if name not in reference.checkpoints:
            tally.mismatches.append(f"{where}: the killed run wrote {name}, not in the reference")
            continue
        differences: list[str] = []
        try:
            values = load_checkpoint_values(run_dir / "checkpoints" / name, RESUME_FIELDS)
        except Exception as error:  # noqa: BLE001 (a damaged checkpoint is the finding)
            tally.mismatches.append(f"{where}: {name} left unreadable by the kill: {error}")
            continue
        tally.bytes += _values_equal(reference.checkpoints[name], values, name, differences)
        tally.files += 1
        tally.mismatches += [f"{where} (left by the kill): {d}" for d in differences[:5]]
    latest = run_dir / "checkpoints" / "latest"
    if latest.exists() and latest.read_text().strip() not in checkpoint_names(run_dir):
        tally.mismatches.append(f"{where}: latest names {latest.read_text().strip()}, not there")


def rerun_argv(shards: str, run_dir: Path, *flags: str) -> list[str]:
    """After a kill: --resume from the checkpoint `latest` names, or start over if none."""
    resume = (run_dir / "checkpoints" / "latest").exists()
    return train_argv(shards, run_dir, *flags, "--resume" if resume else "--overwrite")


def kill_training(
    tally: Tally,
    reference: TrainingReference,
    shards: str,
    run_dir: Path,
    after_s: float | None = None,
    when: Callable[[], bool] | None = None,
    env: dict[str, str] | None = None,
    before_rename: int | None = None,
    flags: tuple[str, ...] = (),
) -> Finished:
    """One trial in an empty `run_dir`: training killed, what it left checked, rerun with
    --resume (or --overwrite without a checkpoint), and compared with `reference`; `flags`
    after TRAIN_FLAGS in both runs (the reference's own)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    where = f"{tally.row} kill {tally.runs + 1}"
    argv = train_argv(shards, run_dir, *flags)
    cmd = command(argv) if before_rename is None else killpoint_command(argv, before_rename)
    killed = run_and_kill(cmd, after_s, when, env)
    tally.count_kill(killed, where)
    check_killed_training(tally, reference, run_dir, where)
    rerun = run_to_end(command(rerun_argv(shards, run_dir, *flags)), env)
    if tally.rerun_ok(rerun, where) and compare_training(tally, reference, run_dir, where):
        tally.recovered += 1
    return rerun


def training_campaign(inputs: Inputs, workdir: Path, kills: int, rng: random.Random) -> Tally:
    """Kills right before each rename (a checkpoint, then `latest`), then `kills` at random
    points of the run."""
    tally = Tally("train (kill -9, --resume)")
    # Every run in the same directory: train_config records --output.
    run_dir = workdir / "train" / "out"
    shutil.rmtree(run_dir, ignore_errors=True)
    shards = str(inputs.shards)
    finished, renames = reference_run(train_argv(shards, run_dir))
    reference = TrainingReference.read(run_dir, RESUME_FIELDS)
    for point in range(1, renames + 1):
        kill_training(tally, reference, shards, run_dir, before_rename=point)
    print(
        f"  {tally.row}: killed before each of its {renames} renames; "
        f"{len(tally.mismatches)} mismatches so far"
    )
    for trial in range(kills):
        delay = rng.uniform(0.3, 1.0) * finished.seconds
        kill_training(tally, reference, shards, run_dir, after_s=delay)
        print(
            f"  {tally.row}: kill {trial + 1}/{kills} at {delay:.2f} s of "
            f"{finished.seconds:.2f}; {len(tally.mismatches)} mismatches so far"
        )
    return tally
