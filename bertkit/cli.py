"""`bertkit`: one command, a subcommand per stage.

    bertkit demo                      the data stages on the embedded real sample, then training
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
    bertkit docs [PAGE]                                   the pages of docs/, from any install

`bertkit COMMAND --help` shows a command's flags; Beam stages pass unknown flags to Beam.
`bertkit --help` lists the commands (`usage()`); `bertkit --version` says which bertkit, and
which of the libraries that shape its output, a bug report is about (`version()`).
"""

from __future__ import annotations

import contextlib
import importlib
import platform
import sys
from importlib import metadata

from pipelines.command.startup import exit_quietly_on_broken_pipe, import_command, starting

# Subcommand → module with a `main(argv)`; imported lazily so `bertkit --help` is instant.
# In the order a user meets them: the demo, the stages in the order they run, then training.
COMMANDS = {
    "demo": ("bertkit.demo", "the data stages on the embedded sample, then a tiny BERT on the CPU"),
    "wikipedia": ("pipelines.wikipedia", "Wikipedia XML dumps → sentence-split documents"),
    "books": ("pipelines.books", "book files (plain text) → sentence-split documents"),
    "corpus": ("pipelines.corpus", "JSON lines or Parquet records → sentence-split documents"),
    "dedup": ("pipelines.dedup", "documents → documents without exact and near duplicates"),
    "vocab": ("pipelines.vocab", "documents → a WordPiece vocabulary (vocab.txt, tokenizer.json)"),
    "examples": (
        "pipelines.examples",
        "documents + vocabulary → pre-training examples in WebDataset shards",
    ),
    "chain": ("pipelines.chain", "inputs → documents → vocabulary → shards, in one Beam job"),
    "inspect": (
        "pipelines.inspect",
        "look inside documents, shards and the other outputs, local or remote",
    ),
    "train": ("trainer.train", "shards (local or URL) → a trained BERT (torchrun for many GPUs)"),
    "export-hf": ("trainer.export", "a training checkpoint → a Hugging Face model directory"),
    "docs": ("bertkit.pages", "the pages on each job (docs/), installed with bertkit: list, print"),
}
# Where the list above breaks, and the heading of what follows.
_GROUPS = {
    "demo": "Try it",
    "wikipedia": "Make the data",
    "inspect": "Look",
    "train": "Train",
    "docs": "Read",
}


# The libraries whose version changes what bertkit writes or trains, in `bertkit --version`'s
# order: the core install's, then the train extra's (absent from a core install).
VERSIONED = ("apache-beam", "pyarrow", "tokenizers", "blingfire", "torch", "webdataset")


def version() -> str:
    """`bertkit --version`: bertkit's version, Python's, and each of VERSIONED's as installed
    ("not installed" where it is not), read from the installed packages' metadata: nothing is
    imported, so it answers at once."""

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    libraries = ", ".join(f"{name} {installed(name)}" for name in VERSIONED)
    return f"bertkit {installed('bertkit')} (Python {platform.python_version()}; {libraries})"


def usage() -> str:
    lines = [
        "usage: bertkit COMMAND [flags]",
        "",
        "Raw text → BERT pre-training data (Apache Beam stages) → a trained BERT.",
    ]
    for name, (_, summary) in COMMANDS.items():
        if name in _GROUPS:
            lines += ["", f"{_GROUPS[name]}:"]
        lines.append(f"  {name:<10} {summary}")
    lines += [
        "",
        "bertkit COMMAND --help shows a command's flags. The data stages also take Beam's",
        "flags (--runner, --direct_num_workers, …): see docs/operations.md.",
        "bertkit --version says which bertkit and libraries a bug report is about.",
        "A page named docs/NAME.md: `bertkit docs NAME` prints it, from any install.",
    ]
    return "\n".join(lines)


# Commands that need an extra beyond the core install (pipelines/io/extras.py).
EXTRAS = {"train": "train", "export-hf": "train"}
# Where such a command's flags load without the extra, so that `--help` answers in a core
# install (a user reads the flags before installing torch), and without torch's seconds of
# import where the extra is installed: each has `parse_arguments`.
HELP_WITHOUT_EXTRA = {"train": "trainer.config", "export-hf": "trainer.export_flags"}


def entry_module(module: str) -> str:
    """The module holding a command's `main`: a stage package's `cli`, which its __main__
    imports (the package itself imports nothing: pipelines/command/startup.py), so that
    `bertkit STAGE` imports the stage, Beam with it, as `python -m pipelines.STAGE` does."""
    return f"{module}.cli" if module.startswith("pipelines.") else module


def main(argv: list[str] | None = None) -> None:
    if argv is not None:  # a caller's own process: its stdout is its own business
        run(argv)
        return
    with exit_quietly_on_broken_pipe():  # `bertkit … | head`: quiet, exit 141
        run(sys.argv[1:], whole_process=True)


def run(args: list[str], whole_process: bool = False) -> None:
    """Run `bertkit ARGS`; `whole_process` when the command is the process (see `main`)."""
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        sys.exit(0)
    if args[0] in ("-V", "--version"):
        print(version())
        sys.exit(0)
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"bertkit: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    module = COMMANDS[command][0]
    # From the command line, the command is the whole process (pipelines/command/startup.py):
    # a signal while it starts is one line (the extras check imports pyarrow), its modules
    # imported there, Beam's BigQuery notice dropped while they are; a caller running it
    # inside its own process keeps its handlers and its collector as they are.
    with starting() if whole_process else contextlib.nullcontext():
        from pipelines.io import extras

        problem = command in EXTRAS and extras.extra_problem(
            f"`bertkit {command}`", EXTRAS[command]
        )
        if command in HELP_WITHOUT_EXTRA and {"-h", "--help"} & set(rest):
            with contextlib.suppress(SystemExit):  # argparse's help, exit 0
                importlib.import_module(HELP_WITHOUT_EXTRA[command]).parse_arguments(["--help"])
            if problem:
                print(f"\nbertkit: to run it: {problem}", file=sys.stderr)
            sys.exit(0)
        if problem:
            print(f"bertkit: error: {problem}", file=sys.stderr)
            sys.exit(2)
        if whole_process:
            command_module = import_command(
                entry_module(module), one_blas_thread=module.startswith("pipelines.")
            )
        else:
            command_module = importlib.import_module(entry_module(module))
    command_module.main(rest)


if __name__ == "__main__":
    main()
