"""`bertkit`: one command, a subcommand per stage.

    bertkit demo                      run the whole chain on the embedded real sample
    bertkit wikipedia --input … --output …   (= python -m pipelines.wikipedia)
    bertkit books --input … --output …       (= python -m pipelines.books)
    bertkit corpus --input 'DIR/*.jsonl.zst' --output …   (= python -m pipelines.corpus)
    bertkit dedup --documents DIR … --output DIR          (= python -m pipelines.dedup)
    bertkit vocab --documents DIR … --output DIR          (= python -m pipelines.vocab)
    bertkit examples --documents DIR … --vocab DIR --output DIR   (= python -m pipelines.examples)
    bertkit chain --wikipedia … --books … --output DIR    (= python -m pipelines.chain)
    bertkit inspect PATH_OR_URL [--schema] [--show N] [--json N] [--stats] [--report OUT.html]
    bertkit train --shards DIR_OR_URL --output DIR …      (= python -m trainer.train)
    bertkit export-hf CHECKPOINT --output DIR             (= python -m trainer.export)

`bertkit COMMAND --help` shows a stage's flags; Beam stages pass unknown flags to Beam.
"""

from __future__ import annotations

import importlib
import sys

from pipelines.command.startup import import_command
from pipelines.io import extras

# Subcommand → module with a `main(argv)`; imported lazily so `bertkit --help` is instant.
COMMANDS = {
    "demo": ("bertkit.demo", "run the chain on the embedded real sample"),
    "wikipedia": ("pipelines.wikipedia", "Wikipedia XML dumps → sentence-split documents"),
    "books": ("pipelines.books", "book files → sentence-split documents"),
    "corpus": ("pipelines.corpus", "JSON lines or Parquet records → sentence-split documents"),
    "dedup": ("pipelines.dedup", "documents → documents without exact and near duplicates"),
    "vocab": ("pipelines.vocab", "documents → WordPiece vocabulary (vocab.txt, tokenizer.json)"),
    "chain": (
        "pipelines.chain",
        "wikipedia/books/corpus → documents → vocab → shards in one Beam job",
    ),
    "inspect": (
        "pipelines.inspect",
        "look inside documents, shards or a manifest, local or remote",
    ),
    "examples": ("pipelines.examples", "documents → pre-training sequences in WebDataset shards"),
    "train": ("trainer.train", "shards (local or URL) → a trained BERT (torchrun for many GPUs)"),
    "export-hf": (
        "trainer.export",
        "trainer checkpoint → HF model directory (BertForPreTraining or BertForMaskedLM)",
    ),
}


def usage() -> str:
    lines = ["usage: bertkit COMMAND [flags]   (bertkit COMMAND --help for its flags)", ""]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in COMMANDS.items()]
    return "\n".join(lines)


# Commands that need an extra beyond the core install (pipelines/io/extras.py).
EXTRAS = {"train": "train", "export-hf": "train"}


def entry_module(module: str) -> str:
    """The module holding a command's `main`: a stage package's `cli`, which its __main__
    imports (the package itself imports nothing: pipelines/command/startup.py), so that
    `bertkit STAGE` imports the stage, Beam with it, as `python -m pipelines.STAGE` does."""
    return f"{module}.cli" if module.startswith("pipelines.") else module


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        sys.exit(0)
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"bertkit: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    problem = command in EXTRAS and extras.extra_problem(f"`bertkit {command}`", EXTRAS[command])
    if problem:
        print(f"bertkit: error: {problem}", file=sys.stderr)
        sys.exit(2)
    module = COMMANDS[command][0]
    # From the command line, the command is the whole process (pipelines/command/startup.py):
    # its modules imported there, Beam's BigQuery notice dropped while they are; a caller
    # running it inside its own process keeps its collector as it is.
    if argv is None:
        command_module = import_command(
            entry_module(module), one_blas_thread=module.startswith("pipelines.")
        )
    else:
        command_module = importlib.import_module(entry_module(module))
    command_module.main(rest)


if __name__ == "__main__":
    main()
