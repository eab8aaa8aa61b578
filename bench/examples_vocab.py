"""bertkit vocab against bare tokenizers, for bench.examples: the same WordPiece training, timed.

  bertkit vocab  python -m pipelines.vocab --documents WIKI BOOKS --output V
                 --vocab-size 30522 --sample-mb 1024
  bare vocab     tokenizers alone on exactly the sample bertkit trains on
                 (pipelines.vocab.iter_sample_texts): BertNormalizer (lower-case),
                 BertPreTokenizer, WordPieceTrainer(30522, min_frequency 2, limit_alphabet
                 1000), [PAD] [UNK] [CLS] [SEP] [MASK]: what BertWordPieceTokenizer.train
                 does. Both pay the same imports (Beam's filesystems, pyarrow); bertkit also
                 starts a Beam pipeline, counts the words itself (pipelines.text.wordpiece)
                 and learns the pieces from the counts, writing three files. Both learn by the
                 same algorithm (tests/test_wordpiece.py: the same vocabulary when given the
                 same fixed ids), so the ratio is the speed of the two ways of making it, in
                 one process each (bertkit's default runner).

The two run alternately, --repeats times each on the largest set, so a change of load on
the machine hits both alike (bench.examples_tools measures and summarises the runs). The
target is time: bertkit ≤ 1.2× bare tokenizers, wall-clock (CPU beside it). vocab_command
also trains the one vocabulary every example run uses. Not a command.
"""

from __future__ import annotations

from pathlib import Path

from bench import runs
from bench.examples_tools import Settings, Summary, describe_run, output_dir, run_once, summarise
from bench.measure import RunMeasurement, fmt, print_table, repo_python, verdict_word
from bench.scale_documents import ScaledDocumentsInfo

VOCAB_SIZE = 30522
SAMPLE_MB = 1024.0  # bertkit vocab's default sample bound (MiB): every set here fits whole
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB_TARGET_RATIO = 1.2  # bertkit vocab wall time ≤ 1.2× bare tokenizers'

# Run as `python -c BARE_VOCAB_CODE OUTPUT SAMPLE_MB DIR...` with the project's Python (from
# the work directory: `pipelines` comes from the installed bertkit).
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


def run_vocab_pair(documents: ScaledDocumentsInfo, settings: Settings) -> dict[str, Summary]:
    """bertkit vocab and bare tokenizers, alternating, so load changes hit both alike."""
    size = documents.target_mb
    commands = {
        "bertkit": lambda out: vocab_command(documents, out),
        "bare": lambda out: bare_vocab_command(documents, out),
    }
    measured: dict[str, list[RunMeasurement]] = {tool: [] for tool in commands}
    for repeat in range(1, settings.repeats + 1):
        for tool, command in commands.items():
            output = output_dir(settings.workdir, f"vocab-{tool}", size)
            run = run_once(f"vocab-{tool}-{size:g}mb", command(output), output, settings, repeat)
            measured[tool].append(run)
            runs.print_run(
                f"  vocab {tool:<7} {size:>5g} MB  run {repeat}/{settings.repeats}: "
                f"{describe_run(run, None)}",
                run,
            )
            if not run.ok:
                return {t: summarise(t, size, r, [None] * len(r)) for t, r in measured.items()}
    return {tool: summarise(tool, size, r, [None] * len(r)) for tool, r in measured.items()}


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
    wall = ratios["wall"]
    verdict = verdict_word(wall is not None, wall is not None and wall <= VOCAB_TARGET_RATIO)
    print(
        f"bertkit / bare: wall {fmt(ratios['wall'], '.2f')}×, CPU {fmt(ratios['cpu'], '.2f')}×; "
        f"target: wall ≤ {VOCAB_TARGET_RATIO}× -> {verdict}"
    )
