"""The two example makers bench.examples compares, and how every run of them is measured.

  bertkit  python -m pipelines.examples --documents WIKI BOOKS --vocab V --output O
           --max-seq-length 128 --dupe-factor 5          (FnApiRunner, in process)
  google   google-research/bert's create_pretraining_data.py from the user's checkout
           (--google-bert DIR), run as it is on TensorFlow 2 by bench/tf1_on_tf2.py (its TF1
           API is tensorflow.compat.v1) with the user's TensorFlow (--tf-python: a python
           that has it; or --install-into DIR: a venv DIR/google-bert-venv, pinned; bench.venvs:
           TensorFlow is never a bertkit dependency):
           the same documents as one sentence per line, bertkit's vocab.txt,
           --max_seq_length 128 --max_predictions_per_seq 20 --dupe_factor 5
           --masked_lm_prob 0.15 --do_lower_case

Every run is a fresh child process on a fresh output directory (bench.runs); the tools'
repeats are interleaved (run_interleaved). A Summary holds the medians over a tool's
--repeats runs on one input, and how many examples it made:
bertkit's from OUT/manifest.json (train + heldout), Google's from its "Wrote N total
instances" log line. bench.examples_vocab times its two vocabulary trainers with the same
runs and summaries. Not a command: bench.examples runs these.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import runs, venvs
from bench.measure import REPO_ROOT, RunMeasurement, repo_python
from bench.scale_documents import DEMO_SIZE, ScaledDocumentsInfo

BENCHMARK = "examples"  # outputs and logs go to WORKDIR/{out,logs}/examples/
GOOGLE_SCRIPT = "create_pretraining_data.py"  # with its tokenization.py beside it
GOOGLE_REPOSITORY = "https://github.com/google-research/bert"
# The commit the published figures were measured at (2018-11-27). Later commits make the same
# examples (master, eedf571, with its default --do_whole_word_mask=False) but read that flag
# once per token, which costs master more CPU-seconds (docs/benchmarks.md, "Examples"):
# compare figures at one commit.
GOOGLE_MEASURED_COMMIT = "d45261273d2dc27e0d25b1cf9e3adb312545a236"
GOOGLE_HOW_TO = (
    f"add --google-bert DIR, a checkout of {GOOGLE_REPOSITORY} "
    f"(measured at commit {GOOGLE_MEASURED_COMMIT[:7]})"
)
TF1_ON_TF2 = REPO_ROOT / "bench" / "tf1_on_tf2.py"
GOOGLE_VENV = "google-bert-venv"
# TensorFlow for Google's script: the user's, or with --install-into a venv of it, pinned.
GOOGLE_TF = venvs.Tool(
    name=GOOGLE_VENV,
    flag="--tf-python",
    what="TensorFlow (tensorflow-cpu 2.21.0 and six, for Google's script)",
    packages=("tensorflow-cpu==2.21.0", "six==1.17.0"),
    check_code="import six, tensorflow.compat.v1 as tf; print(tf.__version__)",
)
GOOGLE_WROTE_RE = re.compile(r"Wrote (\d+) total instances")

MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20  # round(128 × 0.15): bertkit's default at 128, Google's flag
DUPE_FACTOR = 5


# --------------------------------------------------------------------------------------
# The commands


@dataclass(frozen=True)
class Settings:
    workdir: Path
    timeout_s: float
    repeats: int


def input_label(size_mb: float) -> str:
    """How outputs, logs and tables name an input: "25mb", or "demo" for the demo's own
    documents (bench.scale_documents.DEMO_SIZE)."""
    return "demo" if size_mb == DEMO_SIZE else f"{size_mb:g}mb"


def output_dir(workdir: Path, tool: str, size_mb: float) -> Path:
    if size_mb == DEMO_SIZE:
        return workdir / "out" / BENCHMARK / f"{tool}-demo"
    return runs.output_dir(workdir, BENCHMARK, tool, size_mb)


def examples_command(documents: ScaledDocumentsInfo, vocab: Path, output: Path) -> list[str]:
    return [
        repo_python(),
        "-m",
        "pipelines.examples",
        "--documents",
        *documents.directories,
        "--vocab",
        str(vocab),
        "--output",
        str(output),
        "--max-seq-length",
        str(MAX_SEQ_LENGTH),
        "--dupe-factor",
        str(DUPE_FACTOR),
    ]


def google_checkout_problem(checkout: Path) -> str | None:
    """Why `checkout` is not a google-research/bert checkout bench.examples can run, or None."""
    names = (GOOGLE_SCRIPT, "tokenization.py")
    missing = [name for name in names if not (checkout / name).is_file()]
    if missing:
        return (
            f"{checkout} has no {' or '.join(missing)}: pass a checkout of google-research/bert "
            f"(git clone {GOOGLE_REPOSITORY} DIR)"
        )
    return None


def checkout_commit(checkout: Path) -> str | None:
    """The commit `checkout` has checked out, when it is a git work tree of its own (not a
    folder inside another repository's)."""
    result = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--show-toplevel", "HEAD"],
        capture_output=True,
        text=True,
    )
    lines = result.stdout.split()
    if result.returncode != 0 or len(lines) != 2 or Path(lines[0]) != checkout.resolve():
        return None
    return lines[1]


def google_command(python: str, checkout: Path, text: Path, vocab: Path, output: Path) -> list[str]:
    """Google's script on `text`, run by `python` (GOOGLE_TF's, bench.venvs.tool_python)."""
    return [
        python,
        str(TF1_ON_TF2),
        str(checkout / GOOGLE_SCRIPT),
        f"--input_file={text}",
        f"--output_file={output / 'examples.tfrecord'}",
        f"--vocab_file={vocab / 'vocab.txt'}",
        "--do_lower_case=True",
        f"--max_seq_length={MAX_SEQ_LENGTH}",
        f"--max_predictions_per_seq={MAX_PREDICTIONS}",
        f"--dupe_factor={DUPE_FACTOR}",
        "--masked_lm_prob=0.15",
    ]


# --------------------------------------------------------------------------------------
# Running and summarising


@dataclass(frozen=True)
class Summary:
    """Medians over the successful repeats of one tool on one input."""

    tool: str
    size_mb: float
    ok: bool
    repeats: int
    examples: int | None = None  # example tools only (the same in every repeat)
    wall_s: float | None = None
    cpu_s: float | None = None
    peak_rss_mib: float | None = None
    tree_rss_mib: float | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)

    def per_cpu_s(self) -> float | None:
        return self.examples / self.cpu_s if self.ok and self.examples and self.cpu_s else None

    def per_wall_s(self) -> float | None:
        return self.examples / self.wall_s if self.ok and self.examples and self.wall_s else None


def describe_run(run: RunMeasurement, examples: int | None) -> str:
    if (problem := runs.failure(run)) is not None:
        return problem
    rate = f"  {examples / run.cpu_s:8,.0f} ex/CPU-s" if examples else ""
    return (
        f"wall {run.wall_s:6.1f} s  cpu {run.cpu_s:6.1f} s ({run.processes} proc){rate}  "
        f"peak {run.peak_rss_mib:5.0f} MiB  tree {run.tree_rss_mib:5.0f} MiB"
    )


def run_once(
    label: str,
    command: list[str],
    output: Path,
    settings: Settings,
    repeat: int,
    create_output: bool = False,
) -> RunMeasurement:
    """One measured run on a fresh output directory (the last run's output is kept)."""
    log = runs.log_path(settings.workdir, BENCHMARK, label, repeat)
    return runs.run_fresh(command, settings.workdir, output, log, settings.timeout_s, create_output)


def summarise(
    tool: str, size_mb: float, measured: list[RunMeasurement], examples: list[int | None]
) -> Summary:
    raw = [asdict(run) for run in measured]
    if not measured or not all(run.ok for run in measured):
        return Summary(tool, size_mb, ok=False, repeats=len(measured), runs=raw)
    if len(set(examples)) > 1:
        # bertkit and Google are both deterministic for a fixed seed: a change is a bug.
        print(f"  warning: {tool} made {examples} examples in its repeats", flush=True)
    return Summary(
        tool,
        size_mb,
        ok=True,
        repeats=len(measured),
        examples=examples[-1],
        **runs.median_figures(measured),
        runs=raw,
    )


def manifest_splits(output: Path) -> dict[str, Any] | None:
    """The splits of a bertkit examples output at MAX_SEQ_LENGTH, from its manifest.json."""
    from schemas.shards import seq_dir  # lazily: the harness imports no bertkit module to start

    path = output / "manifest.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())["outputs"][seq_dir(MAX_SEQ_LENGTH)]["splits"]


def bertkit_examples(output: Path) -> int | None:
    """Examples of every split, from the stage's own manifest."""
    splits = manifest_splits(output)
    return None if splits is None else sum(split["samples"] for split in splits.values())


def google_examples(log: Path) -> int | None:
    found = GOOGLE_WROTE_RE.findall(log.read_text(errors="replace")) if log.exists() else []
    return int(found[-1]) if found else None


@dataclass(frozen=True)
class ExamplesJob:
    """One tool on one input: what run_interleaved repeats."""

    tool: str
    documents: ScaledDocumentsInfo
    command: list[str]


def run_interleaved(jobs: list[ExamplesJob], settings: Settings) -> list[Summary]:
    """Every job --repeats times, interleaved (repeat 1 of every job, then repeat 2, …), so
    that other work on the machine slows every tool alike; a job that fails is not run again.
    One Summary per job, in the jobs' order."""
    measured: list[list[RunMeasurement]] = [[] for _ in jobs]
    examples: list[list[int | None]] = [[] for _ in jobs]
    for repeat in range(1, settings.repeats + 1):
        for job, runs_so_far, counts in zip(jobs, measured, examples, strict=True):
            if runs_so_far and not runs_so_far[-1].ok:
                continue
            size = job.documents.target_mb
            output = output_dir(settings.workdir, job.tool, size)
            label = f"{job.tool}-{input_label(size)}"
            # Google's script writes into an existing directory only.
            create = job.tool == "google"
            run = run_once(label, job.command, output, settings, repeat, create_output=create)
            count = (
                bertkit_examples(output)
                if job.tool == "bertkit"
                else google_examples(Path(run.log))
            )
            runs_so_far.append(run)
            counts.append(count)
            line = f"  {job.tool:<8} {input_label(size):>6}  run {repeat}/{settings.repeats}: "
            runs.print_run(line + describe_run(run, count), run)
    return [
        summarise(job.tool, job.documents.target_mb, runs_so_far, counts)
        for job, runs_so_far, counts in zip(jobs, measured, examples, strict=True)
    ]
