"""The fault campaign: kill -9 every stage and the trainer at random points, break object
storage under reads and writes, and check that every rerun's output is byte-identical to an
undisturbed run's.

    python -m bench.faults --kills 5 --seed 1        # the whole campaign, then its table
    python -m bench.faults --kills 2 --only examples,train --s3-runs 0

Everything runs on the embedded real sample (data/: the enwiki dump and four books) through
the real commands, each in a child process of its own session (`python -m pipelines.cli
STAGE …` = `bertkit STAGE …`), so a kill takes its Beam or loader workers with it.

- **kill -9, stages** (wikipedia, books, vocab, examples, and examples on two Beam worker
  processes): an undisturbed reference run writes OUT/<row>/out; then the same command in
  the same directory is SIGKILLed right before each of the renames that publish its files
  (bench.killpoint; in-process runs only), and --kills times (its whole process group)
  after a seeded random delay between 30 % and 100 % of the reference's time. Every file
  the killed run left under a name the reference has must already hold the reference's
  bytes (files are written under a temporary name and renamed, or not at all).
  Then the same command again: every file of the reference, the same names and no others,
  compared by sha256. Every run passes --overwrite, which a rerun needs when the killed run
  left files; the same flags everywhere, since vocab.json records them (`overwrite`
  included) and manifests record input paths: nothing is normalised. Every other killed
  run starts in an empty directory, the others over the complete output of the run before.
- **kill -9, training**: a tiny BERT on the sample's shards (dropout on, one loader worker,
  every checkpoint kept), SIGKILLed right before each rename (a checkpoint, then `latest`)
  and --kills times at a random point, then rerun with --resume when `latest` is there
  (--overwrite when not). The checkpoint the killed run left (the
  one `latest` names) must equal the reference's at that step; after the rerun every
  checkpoint must equal the reference's (model, optimizer, schedule, data position, RNG:
  every tensor and value; in `train_config` only the `resume`/`overwrite` flags differ and
  are left out), `latest` the same, and metrics.jsonl (last line per kind and step, as its
  docstring says readers keep) the same values but the throughput figures. A killed
  checkpoint write's `checkpoints/.tmp-*` left after the rerun would be noted (below the
  table); --resume deletes them, so none should be.
- **object storage** (moto's S3 server on loopback behind bench.faultproxy): `bertkit
  examples` and `bertkit wikipedia` read from and write to s3:// while --rate of the
  requests meet a 503, a 500, a connection reset mid-request, a write done but its answer
  dropped, or an answer cut mid-body; the objects must be those of a fault-free run at the
  same place. Then an outage: every PUT from a random one (the 3rd to the 12th) on fails
  until the stage gives up, and the rerun (--overwrite, faults at --rate) must again give
  those objects. Last, the trainer streams the shards from s3:// through the faults (at
  least half its requests broken, since it makes few) and must train exactly as from the
  local directory (`train_config.shards` and `data.manifest`, the URL, left out).

The table: per row the faults injected (kills delivered to a running command, or requests
broken by the proxy), the runs recovered (reruns that exited 0 with output identical to the
reference), the files and bytes compared (reruns and what killed runs left; for training the
checkpoints' tensor bytes and metrics lines) and the mismatches, each printed. Kills that
landed after the command had already finished are counted apart. Results also go to
WORKDIR/faults/results.json.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.faultproxy import FaultProxy
from bench.measure import (
    DEFAULT_WORKDIR,
    REPO_ROOT,
    argument_parser,
    kill_process_group,
    print_table,
    repo_python,
    write_results,
)
from bench.s3server import client_environment, start_s3_server, stop_server

DUMP_GLOB = str(REPO_ROOT / "data" / "wikipedia" / "*.xml.bz2")
BOOKS_GLOB = str(REPO_ROOT / "data" / "books" / "*.txt")
# 8,000 tokens as in the demo; examples at 128 tokens, one pass, shards of 2,000: 4 train
# shards and 1 held-out on the sample, written in about a second.
VOCAB_FLAGS = ["--vocab-size", "8000"]
EXAMPLES_FLAGS = [
    "--max-seq-length",
    "128",
    "--dupe-factor",
    "1",
    "--heldout-fraction",
    "0.05",
    "--samples-per-shard",
    "2000",
]
TWO_WORKERS = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
# A tiny BERT for a few seconds: dropout on (its RNG must resume too), one loader worker (it
# replays its stream on resume), a checkpoint every 4 steps and all of them kept, so what a
# killed run left can be compared with the reference's checkpoint at the same step.
TRAIN_FLAGS = [
    "--model",
    "tiny",
    "--micro-batch-size",
    "16",
    "--lr",
    "2e-3",
    "--warmup-steps",
    "2",
    "--max-steps",
    "16",
    "--log-every",
    "1",
    "--eval-every",
    "8",
    "--eval-batches",
    "2",
    "--num-workers",
    "1",
    "--shuffle-buffer",
    "200",
    "--checkpoint-every",
    "4",
    "--keep-checkpoints",
    "100",
    "--no-tensorboard",
]
# metrics.jsonl figures that measure the machine, not the model.
TIMING_METRICS = ("seq_per_s", "tokens_per_s", "model_tflops", "mfu")
POLL_S = 0.002
TRAIN_READ_RATE = 0.5  # the least share of the trainer's S3 requests broken
RUN_TIMEOUT_S = 600
S3_BUCKET = "faults"


# --- Inputs and commands -------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """The fault-free documents, vocabulary and shards the later stages read."""

    wikipedia: Path
    books: Path
    vocab: Path
    shards: Path


def stage_argv(stage: str, inputs: Inputs, output: str) -> list[str]:
    """`bertkit STAGE …` on the sample, always with --overwrite (see the module doc)."""
    documents = [str(inputs.wikipedia), str(inputs.books)]
    if stage == "wikipedia":
        return ["wikipedia", "--input", DUMP_GLOB, "--output", output, "--overwrite"]
    if stage == "books":
        return ["books", "--input", BOOKS_GLOB, "--output", output, "--overwrite"]
    if stage == "vocab":
        return ["vocab", "--documents", *documents, "--output", output, *VOCAB_FLAGS, "--overwrite"]
    if stage in ("examples", "examples-2w"):
        workers = TWO_WORKERS if stage == "examples-2w" else []
        return [
            "examples",
            "--documents",
            *documents,
            "--vocab",
            str(inputs.vocab),
            "--output",
            output,
            *EXAMPLES_FLAGS,
            *workers,
            "--overwrite",
        ]
    raise ValueError(f"unknown stage {stage!r}")


def train_argv(shards: str, output: Path, *extra: str) -> list[str]:
    return ["train", "--shards", shards, "--output", str(output), *TRAIN_FLAGS, *extra]


def command(argv: list[str]) -> list[str]:
    """The child process for `bertkit ARGV`."""
    return [repo_python(), "-m", "pipelines.cli", *argv]


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    # One thread per process keeps the tiny model's arithmetic (and so its losses)
    # identical from run to run on a busy machine.
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", **(extra or {})}


def prepare_inputs(directory: Path) -> Inputs:
    """Fault-free wikipedia, books, vocab and examples runs into `directory`."""
    shutil.rmtree(directory, ignore_errors=True)
    inputs = Inputs(
        directory / "documents" / "wikipedia",
        directory / "documents" / "books",
        directory / "vocab",
        directory / "shards",
    )
    for stage, output in (
        ("wikipedia", inputs.wikipedia),
        ("books", inputs.books),
        ("vocab", inputs.vocab),
        ("examples", inputs.shards),
    ):
        run_to_end(command(stage_argv(stage, inputs, str(output))), check=True)
    return inputs


# --- Running and killing ---------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    returncode: int
    seconds: float
    output: str  # stdout and stderr, for the report when a run fails

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def run_to_end(cmd: list[str], env: dict[str, str] | None = None, check: bool = False) -> Finished:
    start = time.monotonic()
    done = subprocess.run(
        cmd,
        cwd=REPO_ROOT,
        env=env or child_environment(),
        timeout=RUN_TIMEOUT_S,
        capture_output=True,
        text=True,
        start_new_session=True,
    )
    finished = Finished(done.returncode, time.monotonic() - start, done.stdout + done.stderr)
    if check and finished.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({finished.returncode}):\n{finished.output}")
    return finished


def run_and_kill(
    cmd: list[str],
    after_s: float | None = None,
    when: Callable[[], bool] | None = None,
    env: dict[str, str] | None = None,
) -> Finished:
    """Start `cmd` in a session of its own and SIGKILL its whole process group `after_s`
    seconds in, or as soon as `when()` is true, whichever comes first. `killed` says whether
    the kill found it running (a command may finish first)."""
    start = time.monotonic()
    log = open(os.devnull, "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env or child_environment(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        while process.poll() is None:
            elapsed = time.monotonic() - start
            if (after_s is not None and elapsed >= after_s) or (when is not None and when()):
                kill_process_group(process.pid)
                break
            if elapsed > RUN_TIMEOUT_S:
                kill_process_group(process.pid)
                raise TimeoutError(f"{' '.join(cmd)} ran past {RUN_TIMEOUT_S} s")
            time.sleep(POLL_S)
        returncode = process.wait()
        _wait_for_group_gone(process.pid)
    finally:
        log.close()
    return Finished(returncode, time.monotonic() - start, "")


def _wait_for_group_gone(pgid: int, timeout_s: float = 30) -> None:
    """The killed command's workers (Beam's, the loader's) are gone before the rerun."""
    kill_process_group(pgid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise RuntimeError(f"process group {pgid} outlived SIGKILL for {timeout_s} s")


def killpoint_command(argv: list[str], before_rename: int) -> list[str]:
    """`bertkit ARGV`, SIGKILLed right before its N-th rename (bench.killpoint); 0: never."""
    return [repo_python(), "-m", "bench.killpoint", str(before_rename), "--", *argv]


def reference_run(argv: list[str], env: dict[str, str] | None = None) -> tuple[Finished, int]:
    """An undisturbed run of `bertkit ARGV`: (the run, how many files it renamed into place)."""
    finished = run_to_end(killpoint_command(argv, 0), env, check=True)
    counts = [line for line in finished.output.splitlines() if line.startswith("renames: ")]
    return finished, int(counts[-1].split()[-1])


# --- Comparing directories -------------------------------------------------------------------

Snapshot = dict[str, tuple[int, str]]  # relative path → (bytes, sha256)


def snapshot(directory: Path) -> Snapshot:
    """Every file under `directory` (none if it does not exist), by relative path."""
    if not directory.exists():
        return {}
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {p.relative_to(directory).as_posix(): _digest(p.read_bytes()) for p in files}


def _digest(data: bytes) -> tuple[int, str]:
    return len(data), hashlib.sha256(data).hexdigest()


@dataclass
class Tally:
    """One row of the table."""

    row: str
    faults: int = 0
    finished_first: int = 0  # kills that found the command already finished
    runs: int = 0
    recovered: int = 0
    files: int = 0
    bytes: int = 0
    mismatches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def compare_trees(self, expected: Snapshot, actual: Snapshot, where: str) -> bool:
        """The same names, no others, each with the same bytes."""
        problems = [f"{where}: {name} missing" for name in sorted(expected.keys() - actual.keys())]
        problems += [
            f"{where}: {name} is not in the reference"
            for name in sorted(actual.keys() - expected.keys())
        ]
        self.mismatches += problems
        same = self._compare_common(expected, actual, f"{where}: {{}} differs from the reference")
        return same and not problems

    def check_left_behind(self, expected: Snapshot, left: Snapshot, where: str) -> bool:
        """What a killed run left: a file under one of the reference's names is complete."""
        return self._compare_common(
            expected, left, f"{where}: {{}} left incomplete or wrong by the kill"
        )

    def _compare_common(self, expected: Snapshot, actual: Snapshot, message: str) -> bool:
        """Count and compare the files under names both snapshots have."""
        ok = True
        for name in sorted(expected.keys() & actual.keys()):
            self.files += 1
            self.bytes += expected[name][0]
            if actual[name] != expected[name]:
                self.mismatches.append(message.format(name))
                ok = False
        return ok


# --- Stages under kill -9 --------------------------------------------------------------------


def kill_stage(
    tally: Tally,
    argv: list[str],
    output: Path,
    reference: Snapshot,
    after_s: float | None = None,
    when: Callable[[], bool] | None = None,
    fresh: bool = True,
    before_rename: int | None = None,
) -> tuple[Finished, Snapshot, Finished]:
    """One trial: the command killed (in an empty `output` when `fresh`) after `after_s`,
    when `when()`, or right before its `before_rename`-th rename; what it left checked
    (returned); the same command rerun, and its output compared with `reference`."""
    if fresh:
        shutil.rmtree(output, ignore_errors=True)
    where = f"{tally.row} kill {tally.runs + 1}"
    cmd = command(argv) if before_rename is None else killpoint_command(argv, before_rename)
    killed = run_and_kill(cmd, after_s=after_s, when=when)
    if killed.killed:
        tally.faults += 1
    elif killed.returncode == 0:
        tally.finished_first += 1
    else:
        tally.mismatches.append(f"{where}: exited {killed.returncode} before the kill")
    left = snapshot(output)
    tally.check_left_behind(reference, left, where)
    rerun = run_to_end(command(argv))
    tally.runs += 1
    if rerun.returncode != 0:
        tally.mismatches.append(
            f"{where}: the rerun exited {rerun.returncode}: "
            f"{rerun.output.strip().splitlines()[-1:]}"
        )
    elif tally.compare_trees(reference, snapshot(output), where):
        tally.recovered += 1
    return killed, left, rerun


def stage_campaign(
    stage: str, inputs: Inputs, workdir: Path, kills: int, rng: random.Random
) -> Tally:
    """Kills right before each rename of the stage (in-process runs only), then `kills` at
    random points of its run."""
    tally = Tally(f"{stage} (kill -9)")
    output = workdir / stage / "out"
    shutil.rmtree(output, ignore_errors=True)
    argv = stage_argv(stage, inputs, str(output))
    finished, renames = reference_run(argv)
    reference = snapshot(output)
    for point in range(1, renames + 1):
        kill_stage(tally, argv, output, reference, fresh=point % 2 == 1, before_rename=point)
    print(
        f"  {tally.row}: killed before each of its {renames} renames; "
        f"{len(tally.mismatches)} mismatches so far"
    )
    for trial in range(kills):
        delay = rng.uniform(0.3, 1.0) * finished.seconds
        kill_stage(tally, argv, output, reference, after_s=delay, fresh=trial % 2 == 0)
        print(
            f"  {tally.row}: kill {trial + 1}/{kills} at {delay:.2f} s of "
            f"{finished.seconds:.2f}; {len(tally.mismatches)} mismatches so far"
        )
    return tally


# --- Training under kill -9 ------------------------------------------------------------------


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


def rerun_argv(shards: str, run_dir: Path) -> list[str]:
    """After a kill: --resume from the checkpoint `latest` names, or start over if none."""
    resume = (run_dir / "checkpoints" / "latest").exists()
    return train_argv(shards, run_dir, "--resume" if resume else "--overwrite")


def kill_training(
    tally: Tally,
    reference: TrainingReference,
    shards: str,
    run_dir: Path,
    after_s: float | None = None,
    when: Callable[[], bool] | None = None,
    env: dict[str, str] | None = None,
    before_rename: int | None = None,
) -> Finished:
    """One trial in an empty `run_dir`: training killed, what it left checked, rerun with
    --resume (or --overwrite without a checkpoint), and compared with `reference`."""
    shutil.rmtree(run_dir, ignore_errors=True)
    where = f"{tally.row} kill {tally.runs + 1}"
    argv = train_argv(shards, run_dir)
    cmd = command(argv) if before_rename is None else killpoint_command(argv, before_rename)
    killed = run_and_kill(cmd, after_s, when, env)
    if killed.killed:
        tally.faults += 1
    elif killed.returncode == 0:
        tally.finished_first += 1
    else:
        tally.mismatches.append(f"{where}: exited {killed.returncode} before the kill")
    check_killed_training(tally, reference, run_dir, where)
    rerun = run_to_end(command(rerun_argv(shards, run_dir)), env)
    tally.runs += 1
    if rerun.returncode != 0:
        tally.mismatches.append(
            f"{where}: the rerun exited {rerun.returncode}: "
            f"{rerun.output.strip().splitlines()[-1:]}"
        )
    elif compare_training(tally, reference, run_dir, where):
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


# --- Object storage ----------------------------------------------------------------------------


@dataclass
class S3:
    """moto's server, a boto3 client straight to it, and the campaign's bucket."""

    endpoint: str
    client: Any
    bucket: str = S3_BUCKET

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def upload_tree(self, local: Path, prefix: str) -> str:
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            self.client.upload_file(str(path), self.bucket, f"{prefix}/{path.relative_to(local)}")
        return self.url(prefix)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{prefix}/"
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def snapshot(self, prefix: str) -> Snapshot:
        """Every object under `prefix`/, read straight from the server (no faults)."""
        return {
            key[len(prefix) + 1 :]: _digest(
                self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            )
            for key in self.keys(prefix)
        }

    def delete(self, prefix: str) -> None:
        for key in self.keys(prefix):
            self.client.delete_object(Bucket=self.bucket, Key=key)


@contextmanager
def s3_server() -> Iterator[S3]:
    process, endpoint, client = start_s3_server()
    try:
        client.create_bucket(Bucket=S3_BUCKET)
        yield S3(endpoint, client)
    finally:
        stop_server(process)


def s3_flags(endpoint: str) -> list[str]:
    """Beam's s3:// filesystem flags for an endpoint (the proxy's or the server's)."""
    return [
        "--s3_endpoint_url",
        endpoint,
        "--s3_access_key_id",
        "test",
        "--s3_secret_access_key",
        "test",
        "--s3_region_name",
        "us-east-1",
    ]


@dataclass(frozen=True)
class RemoteInputs:
    wikipedia: str
    books: str
    vocab: str
    shards: str
    dumps: str  # the sample dump's folder


def upload_inputs(s3: S3, inputs: Inputs) -> RemoteInputs:
    return RemoteInputs(
        s3.upload_tree(inputs.wikipedia, "in/documents/wikipedia"),
        s3.upload_tree(inputs.books, "in/documents/books"),
        s3.upload_tree(inputs.vocab, "in/vocab"),
        s3.upload_tree(inputs.shards, "in/shards"),
        s3.upload_tree(Path(DUMP_GLOB).parent, "in/dumps"),
    )


def s3_stage_argv(stage: str, remote: RemoteInputs, output: str) -> list[str]:
    if stage == "wikipedia":
        dumps = f"{remote.dumps}/*.xml.bz2"
        return ["wikipedia", "--input", dumps, "--output", output, "--overwrite"]
    return [
        "examples",
        "--documents",
        remote.wikipedia,
        remote.books,
        "--vocab",
        remote.vocab,
        "--output",
        output,
        *EXAMPLES_FLAGS,
        "--overwrite",
    ]


def s3_reference(s3: S3, argv: list[str], prefix: str) -> Snapshot:
    """A fault-free run straight to the server, its objects read, then deleted: the faulty
    runs write at the same place."""
    s3.delete(prefix)
    run_to_end(command([*argv, *s3_flags(s3.endpoint)]), check=True)
    reference = s3.snapshot(prefix)
    s3.delete(prefix)
    return reference


def s3_faulty_run(
    tally: Tally, s3: S3, argv: list[str], prefix: str, reference: Snapshot, proxy: FaultProxy
) -> Finished:
    """The stage through `proxy`; its objects compared with `reference`."""
    where = f"{tally.row} run {tally.runs + 1}"
    before = proxy.injected
    finished = run_to_end(command([*argv, *s3_flags(proxy.endpoint)]))
    tally.faults += proxy.injected - before
    tally.runs += 1
    if finished.returncode != 0:
        tally.mismatches.append(
            f"{where}: exited {finished.returncode}: {finished.output.strip().splitlines()[-1:]}"
        )
    elif tally.compare_trees(reference, s3.snapshot(prefix), where):
        tally.recovered += 1
    return finished


def s3_stage_campaign(
    stage: str, s3: S3, remote: RemoteInputs, runs: int, rate: float, rng: random.Random
) -> Tally:
    tally = Tally(f"{stage} → s3 (5xx, resets, drops)")
    prefix = f"out/{stage}"
    argv = s3_stage_argv(stage, remote, s3.url(prefix))
    reference = s3_reference(s3, argv, prefix)
    for run in range(runs):
        with FaultProxy(s3.endpoint, rate=rate, seed=rng.randrange(1 << 30)) as proxy:
            s3_faulty_run(tally, s3, argv, prefix, reference, proxy)
        print(
            f"  {tally.row}: run {run + 1}/{runs}, {tally.faults} faults so far, "
            f"{len(tally.mismatches)} mismatches"
        )
    return tally


def outage_after(puts: int) -> Callable[[str, str], bool]:
    """`FaultProxy(only=…)`: every PUT (uploads, parts, copies) from the `puts`-th on."""
    counter = itertools.count()
    return lambda method, _target: method == "PUT" and next(counter) >= puts


def s3_outage_campaign(
    stage: str, s3: S3, remote: RemoteInputs, runs: int, rate: float, rng: random.Random
) -> Tally:
    """A PUT outage longer than the clients' retries: the stage fails; the rerun (faults at
    `rate`) must still give the reference's objects."""
    tally = Tally(f"{stage} → s3 (PUT outage, rerun)")
    prefix = f"out/{stage}-outage"
    argv = s3_stage_argv(stage, remote, s3.url(prefix))
    reference = s3_reference(s3, argv, prefix)
    for run in range(runs):
        where = f"{tally.row} run {run + 1}"
        with FaultProxy(
            s3.endpoint,
            rate=1.0,
            seed=0,
            faults=("503", "reset"),
            max_in_a_row=1 << 30,
            only=outage_after(rng.randrange(2, 12)),
        ) as proxy:
            failed = run_to_end(command([*argv, *s3_flags(proxy.endpoint)]))
            tally.faults += proxy.injected
        if failed.returncode == 0:
            tally.notes.append(
                f"{where}: the outage began after the last PUT; the stage ended well"
            )
        with FaultProxy(s3.endpoint, rate=rate, seed=rng.randrange(1 << 30)) as proxy:
            before = len(tally.mismatches)
            s3_faulty_run(tally, s3, argv, prefix, reference, proxy)
            if len(tally.mismatches) > before:
                tally.mismatches[-1] = f"{tally.mismatches[-1]} (after the outage)"
        print(
            f"  {tally.row}: run {run + 1}/{runs}: the outage run exited "
            f"{failed.returncode}; {len(tally.mismatches)} mismatches"
        )
    return tally


# The URL of the shards differs from the local path by design; the rest must not.
S3_TRAIN_FIELDS = {"train_config": ("resume", "overwrite", "shards"), "data": ("manifest",)}


def s3_training_campaign(
    s3: S3,
    inputs: Inputs,
    remote: RemoteInputs,
    workdir: Path,
    runs: int,
    rate: float,
    rng: random.Random,
) -> Tally:
    """The trainer streams the shards from s3:// through faults: the same run as from disk."""
    tally = Tally("train ← s3 (5xx, resets, cuts)")
    run_dir = workdir / "train-s3" / "out"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_to_end(command(train_argv(str(inputs.shards), run_dir)), check=True)
    reference = TrainingReference.read(run_dir, S3_TRAIN_FIELDS)
    for run in range(runs):
        shutil.rmtree(run_dir, ignore_errors=True)
        where = f"{tally.row} run {run + 1}"
        # The trainer makes few requests (the manifest, then one streamed GET per shard), so
        # it meets at least half of them broken whatever --rate says.
        read_rate = max(rate, TRAIN_READ_RATE)
        with FaultProxy(s3.endpoint, rate=read_rate, seed=rng.randrange(1 << 30)) as proxy:
            env = child_environment(client_environment(proxy.endpoint))
            finished = run_to_end(command(train_argv(remote.shards, run_dir)), env)
            tally.faults += proxy.injected
        tally.runs += 1
        if finished.returncode != 0:
            tally.mismatches.append(
                f"{where}: exited {finished.returncode}: "
                f"{finished.output.strip().splitlines()[-1:]}"
            )
        elif compare_training(tally, reference, run_dir, where, S3_TRAIN_FIELDS):
            tally.recovered += 1
        print(
            f"  {tally.row}: run {run + 1}/{runs}, {tally.faults} faults so far, "
            f"{len(tally.mismatches)} mismatches"
        )
    return tally


# --- The command ---------------------------------------------------------------------------------

STAGES = ("wikipedia", "books", "vocab", "examples", "examples-2w")
ROWS = (*STAGES, "train", "s3")


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.faults", __doc__)
    parser.add_argument("--kills", type=int, default=5, help="kills per stage and for training")
    parser.add_argument(
        "--s3-runs", type=int, default=2, help="faulty runs per object-storage row (0: none)"
    )
    parser.add_argument(
        "--rate", type=float, default=0.2, help="share of S3 requests broken by the proxy"
    )
    parser.add_argument("--seed", type=int, default=1, help="seeds kill points and faults")
    parser.add_argument(
        "--only", default=",".join(ROWS), help=f"comma-separated rows, of {', '.join(ROWS)}"
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    chosen = [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = sorted(set(chosen) - set(ROWS))
    if unknown:
        parser.error(f"--only: unknown rows {unknown}; choose from {', '.join(ROWS)}")
    workdir = args.workdir / "faults"
    rng = random.Random(args.seed)
    start = time.monotonic()
    print(f"inputs: fault-free runs of every stage into {workdir / 'inputs'}")
    inputs = prepare_inputs(workdir / "inputs")
    tallies: list[Tally] = []
    for stage in STAGES:
        if stage in chosen:
            tallies.append(stage_campaign(stage, inputs, workdir, args.kills, rng))
    if "train" in chosen:
        tallies.append(training_campaign(inputs, workdir, args.kills, rng))
    if "s3" in chosen and args.s3_runs > 0:
        with s3_server() as s3:
            remote = upload_inputs(s3, inputs)
            for stage in ("examples", "wikipedia"):
                tallies.append(s3_stage_campaign(stage, s3, remote, args.s3_runs, args.rate, rng))
            tallies.append(s3_outage_campaign("examples", s3, remote, args.s3_runs, args.rate, rng))
            tallies.append(
                s3_training_campaign(s3, inputs, remote, workdir, args.s3_runs, args.rate, rng)
            )
    report(tallies, args, time.monotonic() - start, workdir)
    return 1 if any(t.mismatches for t in tallies) else 0


def report(tallies: list[Tally], args: Any, seconds: float, workdir: Path) -> None:
    print(
        f"\nfault campaign: --kills {args.kills} --s3-runs {args.s3_runs} --rate {args.rate} "
        f"--seed {args.seed}, {seconds:.0f} s\n"
    )
    headers = [
        "row",
        "faults injected",
        "kills after the end",
        "runs",
        "runs recovered",
        "files compared",
        "bytes compared",
        "mismatches",
    ]
    rows = [
        [
            t.row,
            str(t.faults),
            str(t.finished_first),
            str(t.runs),
            str(t.recovered),
            f"{t.files:,}",
            f"{t.bytes:,}",
            str(len(t.mismatches)),
        ]
        for t in tallies
    ]
    total = [
        sum(getattr(t, name) for t in tallies)
        for name in ("faults", "finished_first", "runs", "recovered", "files", "bytes")
    ]
    rows.append(
        [
            "total",
            *map(str, total[:4]),
            f"{total[4]:,}",
            f"{total[5]:,}",
            str(sum(len(t.mismatches) for t in tallies)),
        ]
    )
    print_table(headers, rows)
    for tally in tallies:
        for line in tally.mismatches:
            print(f"MISMATCH {line}")
        for line in tally.notes:
            print(f"note: {line}")
    write_results(
        workdir / "results.json",
        {
            "args": {k: str(v) for k, v in vars(args).items()},
            "seconds": seconds,
            "rows": [asdict(t) for t in tallies],
        },
    )


if __name__ == "__main__":
    sys.exit(main())
