"""Benchmark bertkit's example and vocabulary stages against Google's script and bare tokenizers.

    python -m bench.examples                          # full: --sizes 12,25,50 --repeats 3
    python -m bench.examples --sizes 12,25,50,100     # the headline run, 100 MB
    python -m bench.examples --quick                  # 12 MB only, one repeat
    python -m bench.examples --sizes 25 --examples-only --google-bert ~/src/bert \\
        --tf-python ENV/bin/python                    # bertkit/Google at 25 MB and the demo's

Google's rows need a checkout of google-research/bert (`git clone
https://github.com/google-research/bert DIR && git -C DIR checkout d452612`, the commit the
figures in docs/benchmarks.md were measured at): --google-bert DIR runs its
create_pretraining_data.py from there with the TensorFlow of your environment (--tf-python:
its python; or --install-into DIR installs it into a venv there, pinned), and the results
record the commit.
Without it the benchmark runs bertkit's rows and says how to add Google's.

Run from the repository root. Inputs: the real sample's documents (97 Wikipedia articles + 4
books, 3.6 MB of sentence text, from `bertkit demo`) repeated with new ids until they hold N
MB (10^6 bytes) of text, as real documents directories with manifests (bench.scale_documents;
cached in --workdir). One vocabulary (30,522 tokens) is trained per benchmark run on the
smallest set and used by every example run. Every measured run is a fresh child process,
--repeats times, the tools' runs interleaved, and the median is reported; CPU is user+sys
over the whole process tree, peak RSS the largest process's VmHWM (bench.measure). Three
comparisons:

  examples  bertkit examples on every size and on the demo's own documents (3.6 MB,
            unscaled: where start-up weighs most), against google-research/bert's
            create_pretraining_data.py (--google-bert) on --google-mb (25) and on the demo's
            documents only, since it holds the whole corpus and every instance in memory:
            seq 128, dupe factor 5, the same documents and vocabulary (bench.examples_tools
            says how each tool is run and counted). Both ratios (bertkit's examples per
            CPU-second over Google's on the same input) are printed side by side, against
            their goals: ≥ 5× at 25 MB, ≥ 3.5× on the demo's documents
  vocab     bertkit vocab against bare tokenizers training the same WordPiece vocabulary on
            the same sample, on the largest size (bench.examples_vocab)
  bytes     bytes per example of bertkit's shards and of Google's TFRecords, on
            --google-mb (without Google's script, on it if it is among --sizes, else on
            the smallest size; bench.examples_bytes)

Throughput is examples per CPU-second (= per core) and per wall-second of the whole process,
start-up included (imports and pipeline set-up for bertkit, importing TensorFlow for
Google). The goals are the two ratios to Google's script measured in the same run (so
without --google-bert there is no verdict, only bertkit's figures), with peak RSS flat as
the input grows.
The vocab target is time: bertkit ≤ 1.2× bare tokenizers, wall-clock on the largest set (CPU
beside it).

Each tool's latest output is kept in WORKDIR/out/examples/, every run's log in
WORKDIR/logs/examples/; the results go to WORKDIR/examples-results.json. Other work on the
machine (tests) slows the runs; the medians and the load average in the results show how
much.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import measure, runs, scale_documents, venvs
from bench.examples_bytes import bertkit_bytes, google_bytes, print_bytes_table, storage_per_size
from bench.examples_tools import (
    DUPE_FACTOR,
    GOOGLE_HOW_TO,
    GOOGLE_TF,
    MAX_PREDICTIONS,
    MAX_SEQ_LENGTH,
    ExamplesJob,
    Settings,
    Summary,
    checkout_commit,
    describe_run,
    examples_command,
    google_checkout_problem,
    google_command,
    input_label,
    output_dir,
    run_interleaved,
    run_once,
)
from bench.examples_vocab import (
    VOCAB_SIZE,
    VOCAB_TARGET_RATIO,
    print_vocab_table,
    run_vocab_pair,
    vocab_command,
    vocab_ratios,
)
from bench.measure import DEFAULT_WORKDIR, MB, fmt, importlib_version, print_table, verdict_word
from bench.scale_documents import DEMO_SIZE, ScaledDocumentsInfo

GOOGLE_MB = 25.0  # the scaled input Google's script runs on (--google-mb)
# bertkit's examples per CPU-second over Google's, measured in the same run: on the scaled
# input, and on the demo's documents, where start-up (imports, vocabulary) weighs most.
SCALED_RATIO_GOAL = 5.0
DEMO_RATIO_GOAL = 3.5
# "Flat" RSS: within 25% from the smallest to the largest input (≥ 4× more text), where a
# whole-corpus-in-memory tool grows in proportion to its input.
RSS_FLAT_RATIO = 1.25


# --------------------------------------------------------------------------------------
# Reporting


def print_examples_table(
    bertkit: dict[float, Summary],
    google: dict[float, Summary],
    documents: dict[float, ScaledDocumentsInfo],
) -> None:
    print(
        f"\nExamples, seq {MAX_SEQ_LENGTH}, dupe factor {DUPE_FACTOR} "
        "(median of interleaved repeats; per core = per CPU-second of the whole process tree)"
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
    rows = []
    summaries = [*_by_input(bertkit), *_by_input(google)]
    for summary in summaries:
        docs = documents[summary.size_mb]
        rate = summary.per_cpu_s()
        ratio = google_ratio(summary, google.get(summary.size_mb))
        rows.append(
            [
                summary.tool,
                f"{docs.text_mb:.1f}" + (" (demo)" if summary.size_mb == DEMO_SIZE else ""),
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


def _by_input(summaries: dict[float, Summary]) -> list[Summary]:
    """Scaled sizes in order, then the demo's documents."""
    return sorted(summaries.values(), key=lambda s: (s.size_mb == DEMO_SIZE, s.size_mb))


def google_ratio(ours: Summary | None, google: Summary | None) -> float | None:
    """bertkit's examples per CPU-second over Google's on the same input (= Google's CPU-s
    per example over bertkit's)."""
    rate = ours.per_cpu_s() if ours else None
    reference = google.per_cpu_s() if google else None
    return rate / reference if rate and reference else None


def scaled_only(summaries: dict[float, Summary]) -> dict[float, Summary]:
    return {size: s for size, s in summaries.items() if size != DEMO_SIZE}


def rss_growth(bertkit: dict[float, Summary]) -> float | None:
    ok = [s for _, s in sorted(scaled_only(bertkit).items()) if s.ok and s.peak_rss_mib]
    if len(ok) < 2:
        return None
    return ok[-1].peak_rss_mib / ok[0].peak_rss_mib  # type: ignore[operator]


def examples_verdicts(
    bertkit: dict[float, Summary], google: dict[float, Summary], google_mb: float
) -> dict[str, Any]:
    scaled = [s for s in scaled_only(bertkit).values() if s.ok]
    largest = max(scaled, key=lambda s: s.size_mb, default=None)
    rate = largest.per_cpu_s() if largest else None
    google_scaled = google.get(google_mb)
    google_rate = google_scaled.per_cpu_s() if google_scaled else None
    scaled_ratio = google_ratio(bertkit.get(google_mb), google_scaled)
    demo_ratio = google_ratio(bertkit.get(DEMO_SIZE), google.get(DEMO_SIZE))
    return {
        "headline_size_mb": largest.size_mb if largest else None,
        "examples_per_cpu_s": rate,
        "google_size_mb": google_mb,
        "google_measured_per_cpu_s": google_rate,
        # Same input for both: --google-mb (Google runs on nothing larger), and the demo's.
        "ratio_vs_google_same_input": scaled_ratio,
        "ratio_goal": SCALED_RATIO_GOAL,
        "ratio_met": scaled_ratio is not None and scaled_ratio >= SCALED_RATIO_GOAL,
        "ratio_vs_google_demo": demo_ratio,
        "demo_ratio_goal": DEMO_RATIO_GOAL,
        "demo_ratio_met": demo_ratio is not None and demo_ratio >= DEMO_RATIO_GOAL,
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
    print(
        f"bertkit: {fmt(rate, ',.0f')} ex/CPU-s at {fmt(verdicts['headline_size_mb'], 'g')} MB "
        "(the largest size)"
    )
    if google_note:
        # The goals are ratios to Google's script measured in the same run, on the same
        # machine: a rate from another day or machine would say nothing about them.
        print(f"Google's script: {google_note}; bertkit / Google needs it measured in this run")
    else:
        print(
            f"Google's script measured here: {fmt(verdicts['google_measured_per_cpu_s'], ',.0f')} "
            f"ex/CPU-s at {verdicts['google_size_mb']:g} MB"
        )
        print("bertkit / Google, examples per CPU-second on the same input (same run):")
        for name, ratio, goal, met in (
            (
                f"{verdicts['google_size_mb']:g} MB",
                verdicts["ratio_vs_google_same_input"],
                verdicts["ratio_goal"],
                verdicts["ratio_met"],
            ),
            (
                "demo's documents",
                verdicts["ratio_vs_google_demo"],
                verdicts["demo_ratio_goal"],
                verdicts["demo_ratio_met"],
            ),
        ):
            print(
                f"  {name:<17} {fmt(ratio, '.2f')}×  (goal ≥ {goal:g}×: "
                f"{verdict_word(ratio is not None, met)})"
            )


# --------------------------------------------------------------------------------------
# Main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = measure.argument_parser("bench.examples", __doc__)
    parser.add_argument(
        "--sizes",
        type=runs.parse_sizes,
        default=[12.0, 25.0, 50.0],
        help="comma-separated MB of text; the smallest trains the vocab and is Google's input, "
        "the largest is the headline (default 12,25,50)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="fresh-process runs per tool and size (median)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: --sizes 12 --repeats 1")
    parser.add_argument(
        "--vocab-only",
        action="store_true",
        help="only bertkit vocab beside bare tokenizers, on the largest size",
    )
    parser.add_argument(
        "--google-bert",
        type=Path,
        metavar="DIR",
        help="a checkout of google-research/bert: adds its create_pretraining_data.py's rows "
        "(without it: bertkit's rows only, no ratio)",
    )
    parser.add_argument(
        "--google-mb",
        type=float,
        default=GOOGLE_MB,
        help="the scaled size Google's script runs on, added to --sizes if absent (default "
        f"{GOOGLE_MB:g}; --quick: the smallest size); it also runs on the demo's documents",
    )
    parser.add_argument(
        "--examples-only",
        action="store_true",
        help="skip bertkit vocab against bare tokenizers (the example rows and bytes only)",
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
    venvs.add_tool_arguments(parser, GOOGLE_TF)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [12.0], 1
        args.google_mb = min(args.sizes)
    if not args.sizes or args.repeats < 1:
        parser.error("--sizes needs at least one size and --repeats at least 1")
    if args.google_mb <= 0:
        parser.error("--google-mb must be above 0")
    if args.google_bert is not None and args.google_mb not in args.sizes:
        args.sizes = sorted({*args.sizes, args.google_mb})
    args.workdir = args.workdir.resolve()
    if args.google_bert is not None and not args.vocab_only:
        args.google_bert = args.google_bert.expanduser().resolve()
        if (problem := google_checkout_problem(args.google_bert)) is not None:
            parser.error(f"--google-bert: {problem}")
    return args


def prepare_documents(size_mb: float, workdir: Path, google_text: bool) -> ScaledDocumentsInfo:
    """Build (or reuse) the scaled documents, or the demo's (DEMO_SIZE), in a child process.

    Building reads Parquet with pyarrow; doing it here would raise this process's
    high-water RSS, which every child it launches then inherits in its ru_maxrss.
    """
    target = ["--demo"] if size_mb == DEMO_SIZE else ["--target-mb", f"{size_mb:g}"]
    arguments = [*target, "--workdir", str(workdir)]
    if google_text:
        arguments.append("--google-text")
    runs.build_in_child("bench.scale_documents", *arguments)
    return scale_documents.load_scaled_info(size_mb, workdir)


def train_shared_vocab(documents: ScaledDocumentsInfo, settings: Settings) -> Path:
    """The vocabulary every example run uses, trained once per benchmark run."""
    output = output_dir(settings.workdir, "vocab-shared", documents.target_mb)
    run = run_once("vocab-for-examples", vocab_command(documents, output), output, settings, 1)
    runs.print_run(f"  vocab for the example runs ({output}): {describe_run(run, None)}", run)
    if not run.ok:
        raise SystemExit("could not train the vocabulary the example runs need")
    return output


def vocab_only(args: argparse.Namespace, settings: Settings) -> int:
    """bertkit vocab beside bare tokenizers on the largest size, and nothing else."""
    largest = args.sizes[-1]
    documents = prepare_documents(largest, args.workdir, google_text=False)
    vocab_runs = run_vocab_pair(documents, settings)
    print_vocab_table(vocab_runs, documents)
    results = {
        "machine": measure.machine_description(
            beam=importlib_version("apache-beam"), tokenizers=importlib_version("tokenizers")
        ),
        "config": {"size": largest, "repeats": args.repeats, "vocab_size": VOCAB_SIZE},
        "vocab": {tool: asdict(summary) for tool, summary in vocab_runs.items()},
        "targets": {"vocab": {"ratio_required": VOCAB_TARGET_RATIO, **vocab_ratios(vocab_runs)}},
    }
    measure.write_results(args.workdir / "examples-vocab-results.json", results)
    return 0 if all(s.ok for s in vocab_runs.values()) else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(args.workdir, args.timeout, args.repeats)
    if args.vocab_only:
        return vocab_only(args, settings)
    smallest, largest = args.sizes[0], args.sizes[-1]
    if args.google_bert is None:
        google_note = f"not run; {GOOGLE_HOW_TO}"
    else:
        google_note = None
        google_python = venvs.tool_python(
            "python -m bench.examples", GOOGLE_TF, args.tf_python, args.install_into
        )
        commit = checkout_commit(args.google_bert)
        print(f"Google's script: {args.google_bert} at commit {commit or 'unknown (not git)'}")
    google_sizes = [args.google_mb, DEMO_SIZE] if google_note is None else []
    documents = {
        size: prepare_documents(size, args.workdir, size in google_sizes)
        for size in [*args.sizes, DEMO_SIZE]
    }
    vocab = train_shared_vocab(documents[smallest], settings)

    jobs = [
        ExamplesJob(
            "bertkit",
            documents[size],
            examples_command(documents[size], vocab, output_dir(args.workdir, "bertkit", size)),
        )
        for size in documents
    ]
    for size in google_sizes:
        text = Path(documents[size].path) / scale_documents.GOOGLE_TEXT_NAME
        output = output_dir(args.workdir, "google", size)
        command = google_command(google_python, args.google_bert, text, vocab, output)
        jobs.append(ExamplesJob("google", documents[size], command))
    summaries = run_interleaved(jobs, settings)
    bertkit = {s.size_mb: s for s in summaries if s.tool == "bertkit"}
    google = {s.size_mb: s for s in summaries if s.tool == "google"}
    failed = [s for s in google.values() if not s.ok]
    if failed:
        google_note = f"failed (see {failed[0].runs[-1]['log']})"
    vocab_runs = {} if args.examples_only else run_vocab_pair(documents[largest], settings)

    # On Google's input; without Google's script, --google-mb may not be among the sizes.
    bytes_mb = args.google_mb if args.google_mb in args.sizes else smallest
    ours_bytes = bertkit_bytes(output_dir(args.workdir, "bertkit", bytes_mb))
    theirs_bytes = google_bytes(output_dir(args.workdir, "google", bytes_mb)) if google else None
    per_size = storage_per_size(args.workdir, args.sizes)

    verdicts = examples_verdicts(bertkit, {k: s for k, s in google.items() if s.ok}, args.google_mb)
    print_examples_table(bertkit, google, documents)
    print_examples_verdicts(verdicts, google_note)
    if vocab_runs:
        print_vocab_table(vocab_runs, documents[largest])
    print_bytes_table(ours_bytes, theirs_bytes, per_size, bytes_mb)
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
    every = [*summaries, *vocab_runs.values()]
    return 0 if all(s.ok for s in every) else 1


def write_results(
    args: argparse.Namespace,
    documents: dict[float, ScaledDocumentsInfo],
    bertkit: dict[float, Summary],
    google: dict[float, Summary],
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
            "google_mb": args.google_mb,
            "repeats": args.repeats,
            "interleaved": True,
            "max_seq_length": MAX_SEQ_LENGTH,
            "max_predictions_per_seq": MAX_PREDICTIONS,
            "dupe_factor": DUPE_FACTOR,
            "vocab_size": VOCAB_SIZE,
            "mb": MB,
        },
        "documents": {input_label(size): asdict(info) for size, info in documents.items()},
        "examples": {input_label(size): asdict(summary) for size, summary in bertkit.items()},
        "google": {input_label(size): asdict(summary) for size, summary in google.items()},
        "google_note": google_note,
        "google_bert": {
            "dir": str(args.google_bert),
            "commit": checkout_commit(args.google_bert),
        }
        if args.google_bert
        else None,
        "vocab": {tool: asdict(summary) for tool, summary in vocab.items()},
        "bytes_per_example": storage,
        "targets": {
            "examples": verdicts,
            "vocab": {"ratio_required": VOCAB_TARGET_RATIO, **vocab_ratios(vocab)}
            if vocab
            else None,
        },
    }
    measure.write_results(args.workdir / "examples-results.json", results)


if __name__ == "__main__":
    sys.exit(main())
