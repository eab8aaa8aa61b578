"""Benchmark bertkit's example and vocabulary stages against Google's script and bare tokenizers.

    python bench/examples.py                         # full: --sizes 12,25,50 --repeats 3
    python bench/examples.py --quick                 # 12 MB only, one repeat
    python bench/examples.py --sizes 12,25,50,100 --no-google

Inputs: the real sample's documents (97 Wikipedia articles + 4 books, 3.6 MB of sentence
text, from `bertkit demo`) repeated with new ids until they hold N MB (10^6 bytes) of text,
as real documents directories with manifests (bench/scale_documents.py; cached in
--workdir). One vocabulary (30,522 tokens) is trained per benchmark run on the smallest set
and used by every example run. Every measured run is a fresh child process, --repeats times,
and the median is reported; CPU is user+sys over the whole process tree, peak RSS the largest
process's VmHWM (bench/measure.py):

  examples   python -m pipelines.examples --documents WIKI BOOKS --vocab V --output O
             --max-seq-length 128 --dupe-factor 5          (FnApiRunner, in process)
  google     google-research/bert's create_pretraining_data.py (bench/third_party/google_bert,
             TF1 API through tf.compat.v1, from a throwaway venv in --workdir: TensorFlow is
             never a bertkit dependency) on the smallest set only, since it holds the whole
             corpus and every instance in memory: the same documents as one sentence per
             line, our vocab.txt, --max_seq_length 128 --max_predictions_per_seq 20
             --dupe_factor 5 --masked_lm_prob 0.15 --do_lower_case
  vocab      python -m pipelines.vocab --documents WIKI BOOKS --output V --vocab-size 30522
  bare vocab tokenizers alone on exactly the sample bertkit trains on
             (pipelines.vocab.iter_sample_texts): BertNormalizer (lower-case), BertPreTokenizer,
             WordPieceTrainer(30522, min_frequency 2, limit_alphabet 1000), [PAD] [UNK] [CLS]
             [SEP] [MASK]: what BertWordPieceTokenizer.train does. Both pay the same imports
             (Beam's filesystems, pyarrow), so the ratio is bertkit's own extra work: the
             character count pass that fixes the alphabet, the checks, the three files.

Examples are counted from OUT/manifest.json (train + heldout), Google's from its "Wrote N
total instances" log line; throughput is examples per CPU-second (= per core) and per
wall-second of the whole process, start-up included (imports and pipeline set-up cost bertkit
~1.5 CPU-s, importing TensorFlow costs Google ~2.5). The target is 5× Google's 2,450 examples/s
per core (shared/DESIGN.md) = 12,250, with peak RSS flat as the input grows; Google's
figure measured here is printed beside it. The vocab target is time: bertkit ≤ 1.2× bare
tokenizers, wall-clock on the largest set (CPU beside it).

Bytes per example (smallest set): bertkit's shard bytes per sample (manifest: shard bytes /
samples, tar headers and padding included) and its payload (the `example.bin` member);
Google's TFRecord bytes per record and serialized tf.train.Example, measured from its
output's record framing, and the same layout computed from bertkit's examples with the
protobuf wire format (what Google's padded record would take for our examples).
Results go to --workdir/examples-results.json. Other work on the machine (tests) slows the
runs; the medians and the load average in the results show how much.

A correct run on the 12 MB set (same seed, same vocab): bertkit 123,317 examples (train +
heldout), Google 124,705; bertkit shards 1,024 bytes per sample (353 of payload), Google's
records 811, and the computed layout agrees with Google's measured tf.train.Example (795).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Run as a script: `measure` and `scale_documents` from bench/, `pipelines` and `schemas` from
# the repository root (imported only after the measurements, see bertkit_bytes).
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import measure
import scale_documents
from measure import (
    RunMeasurement,
    fmt,
    importlib_version,
    indent,
    measure_command,
    print_table,
    repo_python,
    tail_of,
)
from scale_documents import MB, ScaledDocumentsInfo

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKDIR = REPO_ROOT / "bench" / ".work"
BENCH_NAME = "examples"  # outputs and logs go to WORKDIR/{out,logs}/examples/, beside extract's
GOOGLE_DIR = REPO_ROOT / "bench" / "third_party" / "google_bert"

MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20  # round(128 × 0.15): bertkit's default at 128, Google's flag
DUPE_FACTOR = 5
VOCAB_SIZE = 30522
SAMPLE_MB = 1024.0  # bertkit vocab's default sample bound (MiB): every set here fits whole
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

GOOGLE_REFERENCE_PER_CORE = 2450.0  # shared/DESIGN.md, "Figures to beat": seq 128, dupe 5
EXAMPLES_TARGET_FACTOR = 5.0
EXAMPLES_TARGET_PER_CORE = EXAMPLES_TARGET_FACTOR * GOOGLE_REFERENCE_PER_CORE  # 12,250
VOCAB_TARGET_RATIO = 1.2  # bertkit vocab wall time ≤ 1.2× bare tokenizers'
# "Flat" RSS: within 25% from the smallest to the largest input (≥ 4× more text), where a
# whole-corpus-in-memory tool grows in proportion (Google: ~1 GB at 12 MB of text).
RSS_FLAT_RATIO = 1.25
GOOGLE_WROTE_RE = re.compile(r"Wrote (\d+) total instances")
TFRECORD_FRAMING = 16  # uint64 length, uint32 CRC of the length, data, uint32 CRC of the data

# Run as `python -c BARE_VOCAB_CODE OUTPUT SAMPLE_MB DIR...` from the repository root.
BARE_VOCAB_CODE = f"""
import os
import sys
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from pipelines.vocab import iter_sample_texts

output, sample_mb, *documents = sys.argv[1:]
os.makedirs(output, exist_ok=True)
tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
tokenizer.normalizer = normalizers.BertNormalizer(
    clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
)
tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
trainer = trainers.WordPieceTrainer(
    vocab_size={VOCAB_SIZE},
    min_frequency=2,
    limit_alphabet=1000,
    special_tokens={SPECIAL_TOKENS!r},
    continuing_subword_prefix="##",
    show_progress=False,
)
tokenizer.train_from_iterator(iter_sample_texts(documents, float(sample_mb), 0), trainer=trainer)
tokenizer.model.save(output)
print(tokenizer.get_vocab_size(), "tokens")
"""


# --------------------------------------------------------------------------------------
# The tools


@dataclass(frozen=True)
class Settings:
    workdir: Path
    timeout_s: float
    repeats: int


def output_dir(workdir: Path, tool: str, size_mb: float) -> Path:
    return workdir / "out" / BENCH_NAME / f"{tool}-{size_mb:g}mb"


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


def vocab_command(documents: ScaledDocumentsInfo, output: Path) -> list[str]:
    return [
        repo_python(),
        "-m",
        "pipelines.vocab",
        "--documents",
        *documents.directories,
        "--output",
        str(output),
        "--vocab-size",
        str(VOCAB_SIZE),
        "--sample-mb",
        f"{SAMPLE_MB:g}",
    ]


def bare_vocab_command(documents: ScaledDocumentsInfo, output: Path) -> list[str]:
    return [
        repo_python(),
        "-c",
        BARE_VOCAB_CODE,
        str(output),
        f"{SAMPLE_MB:g}",
        *documents.directories,
    ]


def google_python(workdir: Path) -> Path:
    return workdir / "google-bert-venv" / "bin" / "python"


def google_command(workdir: Path, text: Path, vocab: Path, output: Path) -> list[str]:
    return [
        str(google_python(workdir)),
        str(GOOGLE_DIR / "create_pretraining_data.py"),
        f"--input_file={text}",
        f"--output_file={output / 'examples.tfrecord'}",
        f"--vocab_file={vocab / 'vocab.txt'}",
        "--do_lower_case=True",
        f"--max_seq_length={MAX_SEQ_LENGTH}",
        f"--max_predictions_per_seq={MAX_PREDICTIONS}",
        f"--dupe_factor={DUPE_FACTOR}",
        "--masked_lm_prob=0.15",
    ]


def ensure_google_venv(workdir: Path) -> str | None:
    """Install tensorflow-cpu and six into a throwaway venv; None if ready, else why not."""
    python = google_python(workdir)
    check = [str(python), "-c", "import six, tensorflow.compat.v1 as tf; print(tf.__version__)"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return None
    venv = python.parent.parent
    print(f"installing tensorflow-cpu and six into {venv} (never a bertkit dependency)", flush=True)
    base_python = shutil.which("python3.11") or sys.executable
    log = workdir / "logs" / "google-bert-venv-install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        steps = [
            [base_python, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "-q", "tensorflow-cpu", "six"],
            check,
        ]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                return f"`{' '.join(step[:4])} …` failed (log: {log})"
    return None


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
    if run.timed_out:
        return f"TIMED OUT after {run.wall_s:.0f} s (log: {run.log})"
    if run.returncode != 0:
        return f"FAILED with exit code {run.returncode} (log: {run.log})"
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
    shutil.rmtree(output, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    if create_output:  # Google's script writes into an existing directory only
        output.mkdir()
    log = settings.workdir / "logs" / BENCH_NAME / f"{label}-r{repeat}.log"
    return measure_command(command, settings.workdir, log, settings.timeout_s)


def summarise(
    tool: str, size_mb: float, runs: list[RunMeasurement], examples: list[int | None]
) -> Summary:
    raw = [asdict(run) for run in runs]
    if not runs or not all(run.ok for run in runs):
        return Summary(tool, size_mb, ok=False, repeats=len(runs), runs=raw)
    if len(set(examples)) > 1:
        # bertkit and Google are both deterministic for a fixed seed: a change is a bug.
        print(f"  warning: {tool} made {examples} examples in its repeats", flush=True)
    return Summary(
        tool,
        size_mb,
        ok=True,
        repeats=len(runs),
        examples=examples[-1],
        wall_s=statistics.median(run.wall_s for run in runs),
        cpu_s=statistics.median(run.cpu_s for run in runs),
        peak_rss_mib=statistics.median(run.peak_rss_mib for run in runs),
        tree_rss_mib=statistics.median(run.tree_rss_mib for run in runs),
        runs=raw,
    )


def bertkit_examples(output: Path) -> int | None:
    """Examples of every split, from the stage's own manifest."""
    path = output / "manifest.json"
    if not path.exists():
        return None
    splits = json.loads(path.read_text())["outputs"][f"seq{MAX_SEQ_LENGTH}"]["splits"]
    return sum(split["samples"] for split in splits.values())


def google_examples(log: Path) -> int | None:
    found = GOOGLE_WROTE_RE.findall(log.read_text(errors="replace")) if log.exists() else []
    return int(found[-1]) if found else None


def run_examples_tool(
    tool: str, documents: ScaledDocumentsInfo, command: list[str], settings: Settings
) -> Summary:
    size = documents.target_mb
    output = output_dir(settings.workdir, tool, size)
    runs, examples = [], []
    for repeat in range(1, settings.repeats + 1):
        label = f"{tool}-{size:g}mb"
        run = run_once(label, command, output, settings, repeat, create_output=tool == "google")
        count = bertkit_examples(output) if tool == "bertkit" else google_examples(Path(run.log))
        runs.append(run)
        examples.append(count)
        print(
            f"  {tool:<8} {size:>5g} MB  run {repeat}/{settings.repeats}: "
            f"{describe_run(run, count)}",
            flush=True,
        )
        if not run.ok:
            print(indent(tail_of(Path(run.log))), flush=True)
            break  # a failing tool will fail again; don't burn the remaining repeats
    return summarise(tool, size, runs, examples)


def run_vocab_pair(documents: ScaledDocumentsInfo, settings: Settings) -> dict[str, Summary]:
    """bertkit vocab and bare tokenizers, alternating, so load changes hit both alike."""
    size = documents.target_mb
    commands = {
        "bertkit": lambda out: vocab_command(documents, out),
        "bare": lambda out: bare_vocab_command(documents, out),
    }
    runs: dict[str, list[RunMeasurement]] = {tool: [] for tool in commands}
    for repeat in range(1, settings.repeats + 1):
        for tool, command in commands.items():
            output = output_dir(settings.workdir, f"vocab-{tool}", size)
            run = run_once(f"vocab-{tool}-{size:g}mb", command(output), output, settings, repeat)
            runs[tool].append(run)
            print(
                f"  vocab {tool:<7} {size:>5g} MB  run {repeat}/{settings.repeats}: "
                f"{describe_run(run, None)}",
                flush=True,
            )
            if not run.ok:
                print(indent(tail_of(Path(run.log))), flush=True)
                return {t: summarise(t, size, r, [None] * len(r)) for t, r in runs.items()}
    return {tool: summarise(tool, size, r, [None] * len(r)) for tool, r in runs.items()}


# --------------------------------------------------------------------------------------
# Bytes per example


def varint_sizes(values: Any) -> Any:
    """Bytes of each non-negative int as a protobuf varint (7 bits per byte)."""
    import numpy as np

    values = np.asarray(values, dtype=np.uint64)
    sizes = np.ones(values.shape, dtype=np.int64)
    for bits in range(7, 64, 7):
        sizes += values >= (1 << bits)
    return sizes


def varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def google_example_bytes(input_ids: Any, positions: Any, masked_ids: Any) -> int:
    """Serialized size of Google's padded tf.train.Example for one example (wire format).

    Example{features=1: Features{feature=1: map<string, Feature>}}; every map entry is a
    message {key=1, value=2}; Feature{int64_list=3 | float_list=2}, each a packed list.
    Padding zeros take 1 byte each, input_mask and segment_ids 1 byte per value, the 20
    masked_lm_weights 4 bytes each (floats are fixed-width).
    """
    n, k = len(input_ids), len(positions)
    padding, unused = MAX_SEQ_LENGTH - n, MAX_PREDICTIONS - k
    # Packed payload bytes per feature; every field number is < 16, so every tag is 1 byte.
    payloads = {
        "input_ids": int(varint_sizes(input_ids).sum()) + padding,
        "input_mask": MAX_SEQ_LENGTH,
        "segment_ids": MAX_SEQ_LENGTH,
        "masked_lm_positions": int(varint_sizes(positions).sum()) + unused,
        "masked_lm_ids": int(varint_sizes(masked_ids).sum()) + unused,
        "masked_lm_weights": 4 * MAX_PREDICTIONS,
        "next_sentence_labels": 1,
    }
    features = 0
    for key, payload in payloads.items():
        packed = 1 + varint_size(payload) + payload  # Int64List/FloatList: value=1, packed
        feature = 1 + varint_size(packed) + packed  # Feature: the oneof list field
        entry = (1 + varint_size(len(key)) + len(key)) + (1 + varint_size(feature) + feature)
        features += 1 + varint_size(entry) + entry
    return 1 + varint_size(features) + features


def bertkit_bytes(output: Path) -> dict[str, float] | None:
    """Shard bytes per sample (manifest), mean payload, and Google's layout for the same
    examples (computed), over every shard of an examples output directory."""
    manifest_path = output / "manifest.json"
    if not manifest_path.exists():
        return None
    from pipelines.io.shards import read_shard_samples  # lazily: pulls in Beam and numpy
    from schemas.examples import PretrainingExample

    splits = json.loads(manifest_path.read_text())["outputs"][f"seq{MAX_SEQ_LENGTH}"]["splits"]
    shards = [shard for split in splits.values() for shard in split["shards"]]
    samples = sum(shard["samples"] for shard in shards)
    payload = google = 0
    for shard in shards:
        with (output / shard["path"]).open("rb") as stream:
            for key, data in read_shard_samples(stream, shard["path"]):
                example = PretrainingExample.decode(data, key)
                payload += len(data)
                google += google_example_bytes(
                    example.input_ids, example.masked_lm_positions, example.masked_lm_ids
                )
    return {
        "samples": samples,
        "shard_bytes_per_sample": sum(shard["bytes"] for shard in shards) / samples,
        "payload_bytes_per_sample": payload / samples,
        "google_layout_bytes_computed": google / samples,
    }


def google_bytes(output: Path) -> dict[str, float] | None:
    """Records, bytes per record and mean serialized tf.train.Example of a TFRecord file,
    read from its framing (no TensorFlow needed)."""
    path = output / "examples.tfrecord"
    if not path.exists():
        return None
    records = example_bytes = 0
    with path.open("rb") as stream:
        while header := stream.read(12):
            length = int.from_bytes(header[:8], "little")
            stream.seek(length + 4, 1)
            records += 1
            example_bytes += length
    if not records:
        return None
    return {
        "records": records,
        "record_bytes": path.stat().st_size / records,
        "example_bytes": example_bytes / records,
    }


def storage_per_size(workdir: Path, sizes: list[float]) -> dict[str, float | None]:
    """Shard bytes per sample of every size's kept output: the layout does not grow with it."""
    result: dict[str, float | None] = {}
    for size in sizes:
        path = output_dir(workdir, "bertkit", size) / "manifest.json"
        if not path.exists():
            result[f"{size:g}"] = None
            continue
        splits = json.loads(path.read_text())["outputs"][f"seq{MAX_SEQ_LENGTH}"]["splits"]
        shards = [shard for split in splits.values() for shard in split["shards"]]
        samples = sum(shard["samples"] for shard in shards)
        result[f"{size:g}"] = sum(s["bytes"] for s in shards) / samples if samples else None
    return result


# --------------------------------------------------------------------------------------
# Reporting


def print_examples_table(
    bertkit: dict[float, Summary],
    google: Summary | None,
    documents: dict[float, ScaledDocumentsInfo],
) -> None:
    print(
        f"\nExamples, seq {MAX_SEQ_LENGTH}, dupe factor {DUPE_FACTOR} "
        "(median of repeats; per core = per CPU-second of the whole process tree)"
    )
    headers = [
        "tool",
        "text MB",
        "examples",
        "CPU s",
        "wall s",
        "ex/CPU-s",
        "ex/wall-s",
        "peak RSS MiB",
        "tree RSS MiB",
        "vs Google/core",
    ]
    reference = google.per_cpu_s() if google else None
    rows = []
    summaries = [(s, documents[size]) for size, s in sorted(bertkit.items())]
    if google:
        summaries.append((google, documents[google.size_mb]))
    for summary, docs in summaries:
        rate = summary.per_cpu_s()
        ratio = rate / reference if rate and reference else None
        rows.append(
            [
                summary.tool,
                f"{docs.text_mb:.1f}",
                fmt(summary.examples, ",d") if summary.ok else "FAILED",
                fmt(summary.cpu_s, ".1f"),
                fmt(summary.wall_s, ".1f"),
                fmt(rate, ",.0f"),
                fmt(summary.per_wall_s(), ",.0f"),
                fmt(summary.peak_rss_mib, ".0f"),
                fmt(summary.tree_rss_mib, ".0f"),
                fmt(ratio, ".2f") + ("×" if ratio else ""),
            ]
        )
    print_table(headers, rows)


def rss_growth(bertkit: dict[float, Summary]) -> float | None:
    ok = [s for _, s in sorted(bertkit.items()) if s.ok and s.peak_rss_mib]
    if len(ok) < 2:
        return None
    return ok[-1].peak_rss_mib / ok[0].peak_rss_mib  # type: ignore[operator]


def examples_verdicts(bertkit: dict[float, Summary], google: Summary | None) -> dict[str, Any]:
    largest = max((s for s in bertkit.values() if s.ok), key=lambda s: s.size_mb, default=None)
    smallest = min((s for s in bertkit.values() if s.ok), key=lambda s: s.size_mb, default=None)
    rate = largest.per_cpu_s() if largest else None
    google_rate = google.per_cpu_s() if google else None
    same_input = smallest.per_cpu_s() if smallest and google and google.ok else None
    return {
        "headline_size_mb": largest.size_mb if largest else None,
        "examples_per_cpu_s": rate,
        "target_per_cpu_s": EXAMPLES_TARGET_PER_CORE,
        "met": rate is not None and rate >= EXAMPLES_TARGET_PER_CORE,
        "google_measured_per_cpu_s": google_rate,
        "google_reference_per_cpu_s": GOOGLE_REFERENCE_PER_CORE,
        # Same input for both: the smallest set (Google runs on nothing larger).
        "ratio_vs_google_same_input": same_input / google_rate
        if same_input and google_rate
        else None,
        "ratio_vs_google_reference": rate / GOOGLE_REFERENCE_PER_CORE if rate else None,
        "peak_rss_largest_over_smallest": rss_growth(bertkit),
    }


def print_examples_verdicts(verdicts: dict[str, Any], google_note: str | None) -> None:
    rate = verdicts["examples_per_cpu_s"]
    growth = verdicts["peak_rss_largest_over_smallest"]
    if growth is None:
        print("peak RSS, largest / smallest input: n/a (one size)")
    else:
        flat = " (flat)" if growth <= RSS_FLAT_RATIO else f" (grows: over {RSS_FLAT_RATIO}×)"
        print(f"peak RSS, largest / smallest input: {growth:.2f}×{flat}")
    if google_note:
        print(f"Google's script: {google_note}; the reference figure is used instead")
    else:
        print(
            f"Google's script measured here: {fmt(verdicts['google_measured_per_cpu_s'], ',.0f')} "
            f"ex/CPU-s (reference {GOOGLE_REFERENCE_PER_CORE:,.0f}); bertkit on the same input: "
            f"{fmt(verdicts['ratio_vs_google_same_input'], '.2f')}×"
        )
    verdict = "not measured" if rate is None else ("MET" if verdicts["met"] else "NOT MET")
    print(
        f"target: ≥ {EXAMPLES_TARGET_FACTOR:g} × {GOOGLE_REFERENCE_PER_CORE:,.0f} = "
        f"{EXAMPLES_TARGET_PER_CORE:,.0f} ex/CPU-s at {fmt(verdicts['headline_size_mb'], 'g')} MB "
        f"-> {verdict} ({fmt(rate, ',.0f')} ex/CPU-s, "
        f"{fmt(verdicts['ratio_vs_google_reference'], '.2f')}× the reference)"
    )


def vocab_ratios(vocab: dict[str, Summary]) -> dict[str, float | None]:
    ours, bare = vocab.get("bertkit"), vocab.get("bare")
    if not (ours and bare and ours.ok and bare.ok):
        return {"wall": None, "cpu": None}
    return {
        "wall": ours.wall_s / bare.wall_s,  # type: ignore[operator]
        "cpu": ours.cpu_s / bare.cpu_s,  # type: ignore[operator]
    }


def print_vocab_table(vocab: dict[str, Summary], documents: ScaledDocumentsInfo) -> None:
    print(
        f"\nVocab, WordPiece {VOCAB_SIZE:,} tokens on {documents.text_mb:.1f} MB of text "
        "(median of repeats)"
    )
    rows = []
    for tool, summary in vocab.items():
        name = "bertkit vocab" if tool == "bertkit" else "bare tokenizers"
        rows.append(
            [
                name,
                fmt(summary.wall_s, ".1f"),
                fmt(summary.cpu_s, ".1f"),
                fmt(documents.text_mb / summary.wall_s if summary.wall_s else None, ".2f"),
                fmt(summary.peak_rss_mib, ".0f"),
            ]
        )
    print_table(["tool", "wall s", "CPU s", "MB/wall-s", "peak RSS MiB"], rows)
    ratios = vocab_ratios(vocab)
    verdict = (
        "not measured"
        if ratios["wall"] is None
        else ("MET" if ratios["wall"] <= VOCAB_TARGET_RATIO else "NOT MET")
    )
    print(
        f"bertkit / bare: wall {fmt(ratios['wall'], '.2f')}×, CPU {fmt(ratios['cpu'], '.2f')}×; "
        f"target: wall ≤ {VOCAB_TARGET_RATIO}× -> {verdict}"
    )


def print_bytes_table(
    ours: dict[str, float] | None,
    google: dict[str, float] | None,
    per_size: dict[str, float | None],
    size_mb: float,
) -> None:
    print(f"\nBytes per example at seq {MAX_SEQ_LENGTH} ({size_mb:g} MB input)")
    rows = []
    if ours:
        rows += [
            [
                "bertkit shard (tar)",
                f"{ours['shard_bytes_per_sample']:,.0f}",
                "shard bytes / samples: 512 B tar header + payload padded to 512 B",
            ],
            [
                "bertkit payload",
                f"{ours['payload_bytes_per_sample']:,.0f}",
                "the example.bin member: ids uint16, no padding, provenance ids",
            ],
            [
                "Google layout, computed",
                f"{ours['google_layout_bytes_computed']:,.0f}",
                "bertkit's examples as Google's padded tf.train.Example (wire format)",
            ],
        ]
    if google:
        rows += [
            [
                "Google TFRecord record",
                f"{google['record_bytes']:,.0f}",
                f"measured: file bytes / {google['records']:,} records",
            ],
            [
                "Google tf.train.Example",
                f"{google['example_bytes']:,.0f}",
                f"measured: record minus its {TFRECORD_FRAMING} B framing",
            ],
        ]
    print_table(["what", "bytes", "how"], rows, left=(0, 2))
    sizes = ", ".join(f"{size} MB: {fmt(value, ',.0f')}" for size, value in per_size.items())
    print(f"bertkit shard bytes per sample by input size: {sizes}")
    if ours and google:
        record = google["record_bytes"]
        print(
            f"Google record / bertkit: {record / ours['shard_bytes_per_sample']:.2f}× the shard "
            f"bytes, {record / ours['payload_bytes_per_sample']:.2f}× the payload"
        )


# --------------------------------------------------------------------------------------
# Main


def parse_sizes(text: str) -> list[float]:
    return sorted({float(part) for part in text.split(",") if part.strip()})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=[12.0, 25.0, 50.0],
        help="comma-separated MB of text; the smallest trains the vocab and is Google's input, "
        "the largest is the headline (default 12,25,50)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="fresh-process runs per tool and size (median)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: --sizes 12 --repeats 1")
    parser.add_argument(
        "--no-google", action="store_true", help="skip Google's script (use the reference figure)"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="cache for scaled documents, the TensorFlow venv, outputs, logs",
    )
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds before a run is killed"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [12.0], 1
    if not args.sizes or args.repeats < 1:
        parser.error("--sizes needs at least one size and --repeats at least 1")
    args.workdir = args.workdir.resolve()
    return args


def prepare_documents(size_mb: float, workdir: Path, google_text: bool) -> ScaledDocumentsInfo:
    """Build (or reuse) the scaled documents in a child process.

    Building reads Parquet with pyarrow; doing it here would raise this process's
    high-water RSS, which every child it launches then inherits in its ru_maxrss.
    """
    script = Path(scale_documents.__file__).resolve()
    command = [repo_python(), str(script), "--target-mb", f"{size_mb:g}", "--workdir", str(workdir)]
    subprocess.run(command + (["--google-text"] if google_text else []), check=True)
    return scale_documents.load_scaled_info(size_mb, workdir)


def train_shared_vocab(documents: ScaledDocumentsInfo, settings: Settings) -> Path:
    """The vocabulary every example run uses, trained once per benchmark run."""
    output = output_dir(settings.workdir, "vocab-shared", documents.target_mb)
    run = run_once("vocab-for-examples", vocab_command(documents, output), output, settings, 1)
    print(f"  vocab for the example runs ({output}): {describe_run(run, None)}", flush=True)
    if not run.ok:
        print(indent(tail_of(Path(run.log))), flush=True)
        raise SystemExit("could not train the vocabulary the example runs need")
    return output


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(args.workdir, args.timeout, args.repeats)
    smallest, largest = args.sizes[0], args.sizes[-1]
    google_note = "skipped (--no-google)" if args.no_google else ensure_google_venv(args.workdir)
    documents = {
        size: prepare_documents(size, args.workdir, size == smallest and google_note is None)
        for size in args.sizes
    }
    vocab = train_shared_vocab(documents[smallest], settings)

    bertkit: dict[float, Summary] = {}
    for size in args.sizes:
        output = output_dir(args.workdir, "bertkit", size)
        bertkit[size] = run_examples_tool(
            "bertkit", documents[size], examples_command(documents[size], vocab, output), settings
        )
    google: Summary | None = None
    if google_note is None:
        text = Path(documents[smallest].path) / scale_documents.GOOGLE_TEXT_NAME
        output = output_dir(args.workdir, "google", smallest)
        command = google_command(args.workdir, text, vocab, output)
        google = run_examples_tool("google", documents[smallest], command, settings)
        if not google.ok:
            google_note = f"failed (see {google.runs[-1]['log']})"
    vocab_runs = run_vocab_pair(documents[largest], settings)

    ours_bytes = bertkit_bytes(output_dir(args.workdir, "bertkit", smallest))
    theirs_bytes = google_bytes(output_dir(args.workdir, "google", smallest)) if google else None
    per_size = storage_per_size(args.workdir, args.sizes)

    verdicts = examples_verdicts(bertkit, google if google and google.ok else None)
    print_examples_table(bertkit, google, documents)
    print_examples_verdicts(verdicts, google_note)
    print_vocab_table(vocab_runs, documents[largest])
    print_bytes_table(ours_bytes, theirs_bytes, per_size, smallest)
    write_results(
        args,
        documents,
        bertkit,
        google,
        google_note,
        vocab_runs,
        verdicts,
        {"bertkit": ours_bytes, "google": theirs_bytes, "shard_bytes_per_sample": per_size},
    )
    summaries = [*bertkit.values(), *vocab_runs.values(), *([google] if google else [])]
    return 0 if all(s.ok for s in summaries) else 1


def write_results(
    args: argparse.Namespace,
    documents: dict[float, ScaledDocumentsInfo],
    bertkit: dict[float, Summary],
    google: Summary | None,
    google_note: str | None,
    vocab: dict[str, Summary],
    verdicts: dict[str, Any],
    storage: dict[str, Any],
) -> None:
    results = {
        "machine": measure.machine_description(
            beam=importlib_version("apache-beam"), tokenizers=importlib_version("tokenizers")
        ),
        "config": {
            "sizes": args.sizes,
            "repeats": args.repeats,
            "max_seq_length": MAX_SEQ_LENGTH,
            "max_predictions_per_seq": MAX_PREDICTIONS,
            "dupe_factor": DUPE_FACTOR,
            "vocab_size": VOCAB_SIZE,
            "mb": MB,
        },
        "documents": {f"{size:g}": asdict(info) for size, info in documents.items()},
        "examples": {f"{size:g}": asdict(summary) for size, summary in bertkit.items()},
        "google": asdict(google) if google else None,
        "google_note": google_note,
        "vocab": {tool: asdict(summary) for tool, summary in vocab.items()},
        "bytes_per_example": storage,
        "targets": {
            "examples": verdicts,
            "vocab": {"ratio_required": VOCAB_TARGET_RATIO, **vocab_ratios(vocab)},
        },
    }
    measure.write_results(args.workdir / "examples-results.json", results)


if __name__ == "__main__":
    sys.exit(main())
