"""Run bertkit on the embedded real sample, end to end, and say where everything is.

The chain: the enwiki sample dump → `bertkit wikipedia` and the four public-domain books →
`bertkit books` (Parquet documents) → `bertkit vocab` (WordPiece) → `bertkit examples`
(masked sentence pairs in WebDataset shards) → `bertkit train` (a tiny BERT, on the CPU)
→ held-out evaluation against the unigram baseline → `bertkit export-hf`, and last the data
report (`bertkit inspect --report`): OUTPUT/report.html, one page of plots to open in a browser.

A correct run reports 97 Wikipedia documents (of 206 pages, 109 are dropped: 99 redirects,
8 disambiguation pages, the list-only "List of anthropologists" and 1 page outside the
article namespace, itself a redirect), 4 books, an 8,000-token vocabulary, 40,133 training
examples at 128 tokens (and 1,450 held out), and a held-out MLM accuracy well above the
unigram baseline (always predicting the most frequently masked token, ","); the README's
Quickstart and docs/benchmarks.md give the figures measured on 2 cores.

    bertkit demo [--output out/demo] [--train-steps 1200]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipelines import books, examples, vocab, wikipedia
from pipelines.command import flags
from pipelines.command.flags import ZERO_OR_MORE, option
from pipelines.io import extras, storage

# data/ in a checkout (bertkit/sample links to it), a copy of it in a wheel
SAMPLE_DIR = (Path(__file__).parent / "sample").resolve()
WIKIPEDIA_SAMPLE = SAMPLE_DIR / "wikipedia" / "*.xml.bz2"
BOOKS_SAMPLE = SAMPLE_DIR / "books" / "*.txt"
REPORT_FILE = "report.html"  # the data report, written last into --output


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """Every flag of `bertkit demo`."""

    output: str = option("out/demo", help="where to write (replaced)")
    train_steps: int = option(
        1200, help="tiny-BERT steps of 32 (0: no training)", bounds=ZERO_OR_MORE
    )


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bertkit demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    flags.add_flags(parser, DemoConfig)
    args = flags.checked_config(DemoConfig, parser.parse_args(argv), parser)
    if storage.is_url(args.output):
        parser.error(f"--output {args.output}: the demo writes to a local directory")
    missing_extra = args.train_steps > 0 and extras.extra_problem("training", "train")
    if missing_extra:  # before the stages run, not after them
        flags.refuse(parser, f"{missing_extra}; or --train-steps 0 for the data stages only")
    output = Path(args.output)
    wiki_dir, books_dir = output / "documents" / "wikipedia", output / "documents" / "books"

    vocab_dir, shards_dir = output / "vocab", output / "shards"
    run_dir, hf_dir = output / "run", output / "hf"
    documents = [str(wiki_dir), str(books_dir)]

    print(f"1/6 Wikipedia: {WIKIPEDIA_SAMPLE} → {wiki_dir}")
    code = _stage(
        wikipedia.main, ["--input", str(WIKIPEDIA_SAMPLE), "--output", str(wiki_dir), "--overwrite"]
    )
    if code:
        return _stopped("1/6 Wikipedia", code)
    print(f"2/6 Books: {BOOKS_SAMPLE} → {books_dir}")
    code = _stage(
        books.main, ["--input", str(BOOKS_SAMPLE), "--output", str(books_dir), "--overwrite"]
    )
    if code:
        return _stopped("2/6 Books", code)
    # 8,000 tokens: the 3.6 MB sample has too few pairs seen twice to fill BERT's 30,522.
    print(f"3/6 Vocabulary: documents → {vocab_dir}")
    vocab_flags = ["--output", str(vocab_dir), "--vocab-size", "8000", "--overwrite"]
    code = _stage(vocab.main, ["--documents", *documents, *vocab_flags])
    if code:
        return _stopped("3/6 Vocabulary", code)
    print(f"4/6 Examples: documents → {shards_dir}")
    code = _stage(
        examples.main,
        [
            "--documents",
            *documents,
            "--vocab",
            str(vocab_dir),
            "--output",
            str(shards_dir),
            "--max-seq-length",
            "128",
            "--dupe-factor",
            "5",
            "--heldout-fraction",
            "0.05",
            "--samples-per-shard",
            "10000",
            "--overwrite",
        ],
    )
    if code:
        return _stopped("4/6 Examples", code)

    trained = args.train_steps > 0
    if trained:
        print(
            f"5/6 Training a tiny BERT on the CPU ({args.train_steps} steps of 32): "
            f"{shards_dir} → {run_dir}"
        )
        code = _train(shards_dir, run_dir, args.train_steps)
        if code:
            return _stopped("5/6 Training", code)
        print(f"6/6 Export for transformers: {run_dir}/checkpoints → {hf_dir}")
        code = _export(run_dir, hf_dir)
        if code:
            return _stopped("6/6 Export", code)
        _report(shards_dir, run_dir)

    print(
        "\nDone. Look inside:\n"
        f"  bertkit inspect {shards_dir}                 # summary from the manifest\n"
        f"  bertkit inspect {shards_dir} --show 2        # examples with their tokens\n"
        f"  bertkit inspect {shards_dir} --stats         # NotNext, predictions, 80/10/10\n"
        f"  bertkit inspect {shards_dir}/seq128/train/shard-000000.tar --json 1\n"
        f"  bertkit inspect {wiki_dir} --schema          # the Document Arrow schema\n"
        f"  bertkit inspect {books_dir} --show 1\n"
        f"  bertkit inspect {vocab_dir}                  # size, casing, sha256, sample tokens"
    )
    if trained:
        print(
            f"  bertkit inspect {run_dir}                    # checkpoints: steps, model, recipe\n"
            f"  tail -2 {run_dir}/metrics.jsonl            # the last metrics, JSON lines\n"
            f"  tensorboard --logdir {run_dir}\n"
            "  # with transformers installed (the dev extra, or pip install transformers):\n"
            f'  python -c "from transformers import pipeline; '
            f"print(pipeline('fill-mask', '{hf_dir}')('the river flows into the [MASK].'))\""
        )
    return _data_report(shards_dir, output / REPORT_FILE)


def _stage(main: Callable[[list[str]], None], argv: list[str]) -> int:
    """A Beam stage as its command runs it (`stage_main`: one line and its exit code for a
    refusal, a failed write or Ctrl-C and SIGTERM, its workers ended), in this process."""
    try:
        main(argv)
    except SystemExit as exited:
        return exited.code if isinstance(exited.code, int) else 1
    return 0


def _stopped(step: str, code: int) -> int:
    """The demo ends at the first step that did not finish (which said why): the steps after
    it would read what it did not write."""
    print(
        f"bertkit demo: stopped at step {step} (exit {code}); the steps after it did not run",
        file=sys.stderr,
    )
    return code


def _data_report(shards_dir: Path, report: Path) -> int:
    """The last step: the data report (`bertkit inspect --report`) of the shards, the
    documents and vocabulary they name; it only reads them."""
    from pipelines.inspect import run as inspect

    code = inspect([str(shards_dir), "--report", str(report)])
    if code == 0:
        print(f"\nData report (open it in a browser): {report}")
    return code


EVALUATED_ALONG = 200  # steps: a shorter run is evaluated once, at its end


def train_args(shards_dir: Path, run_dir: Path, steps: int) -> list[str]:
    """A tiny BERT (2 layers, 128 wide) on the CPU; its speed and the loader's are in
    docs/benchmarks.md (`python -m bench.train_step`, `python -m bench.loader`).

    Tuned for a short run on the sample's 40,133 examples: lr 1e-3 leaves the unigram plateau
    within the run, where 5e-3 stays on it (always ","); no dropout, since the run sees each
    example about once; no loader worker, since the loader needs a small share of a core and
    a worker process would take a core from the model. The whole held-out split is evaluated
    four times along the run, or only at the end of a run under EVALUATED_ALONG steps (a
    quick check, as the tests run it), for whose few steps each evaluation, over more
    sequences than the run trains on, would cost more than the training.
    """
    # --overwrite: an earlier demo's run is replaced, and only its own files are deleted.
    return [
        "--shards",
        str(shards_dir),
        "--output",
        str(run_dir),
        "--model",
        "tiny",
        "--micro-batch-size",
        "32",
        "--max-steps",
        str(steps),
        "--lr",
        "1e-3",
        "--warmup-steps",
        str(max(steps // 12, 1)),
        "--dropout",
        "0",
        "--eval-every",
        str(steps // 4 if steps >= EVALUATED_ALONG else 0),
        "--eval-batches",
        "0",
        "--log-every",
        "100",
        "--num-workers",
        "0",
        "--checkpoint-every",
        str(steps),
        "--overwrite",
    ]


def _train(shards_dir: Path, run_dir: Path, steps: int) -> int:
    from trainer import train  # lazily: torch is the `train` extra

    return train.run(train_args(shards_dir, run_dir, steps))


def _export(run_dir: Path, hf_dir: Path) -> int:
    from trainer import export

    return export.run_saying([str(run_dir / "checkpoints"), "--output", str(hf_dir), "--overwrite"])


def _report(shards_dir: Path, run_dir: Path) -> None:
    """The held-out MLM accuracy next to the unigram baseline it has to beat."""
    import json

    from trainer.data import open_source
    from trainer.evaluate import unigram_baseline
    from trainer.metrics import METRICS_FILE

    evals = [
        record
        for record in map(json.loads, (run_dir / METRICS_FILE).read_text().splitlines())
        if record["kind"] == "eval"
    ]
    token, baseline = unigram_baseline(
        open_source(str(shards_dir), "train"), open_source(str(shards_dir), "heldout")
    )
    word = (shards_dir.parent / "vocab" / "vocab.txt").read_text().splitlines()[token]
    accuracy = evals[-1]["mlm_accuracy"]
    print(
        f"Held-out MLM accuracy {accuracy:.3f} after {evals[-1]['step']} steps, against "
        f"{baseline:.3f} for always predicting {word!r} (the unigram baseline): "
        f"{accuracy / max(baseline, 1e-9):.1f}×; NSP accuracy {evals[-1]['nsp_accuracy']:.3f}"
    )


def main(argv: list[str] | None = None) -> None:
    try:
        code = run(argv)
    except KeyboardInterrupt:  # Ctrl-C between its steps (each step says its own)
        print("bertkit demo: interrupted (SIGINT)", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
