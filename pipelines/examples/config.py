"""`bertkit examples`' one config: every flag, its type, default and help, written once.

The flags are Google's `create_pretraining_data.py` names and defaults (`--max_seq_length`,
`--dupe_factor`, …, also spelled with hyphens) plus bertkit's own; `pipelines.io.flags`
makes the command line from this dataclass, and the shards manifest records it (all but
`output` and `overwrite`, which say where and how to write, not what).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from pipelines.beam import files
from pipelines.io.flags import option

WORK_DIR = "_work"  # spill files between steps; removed when the manifest is written


class ExamplesConfigError(ValueError):
    """Flags or inputs that cannot make examples; raised before any work starts."""


def int_list(text: str) -> tuple[int, ...]:
    """ "128,512" → (128, 512): Google's flags take one value, bertkit a comma list."""
    try:
        values = tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers like 128,512") from None
    if not values:
        raise argparse.ArgumentTypeError("empty: expected integers like 128,512")
    return values


@dataclass(frozen=True, slots=True)
class ExamplesConfig:
    """Every flag of `bertkit examples`; the manifest records it resolved."""

    documents: tuple[str, ...] = option(help="documents directories", metavar="DIR")
    vocab: str = option(help="vocabulary directory from `bertkit vocab`")
    output: str = option(help="output directory")
    max_seq_lengths: tuple[int, ...] = option(
        (128,), flag="max-seq-length", parse=int_list, metavar="N[,N…]",
        help="one length or a comma list, e.g. 128,512: one output tree each",
    )  # fmt: skip
    max_predictions_per_seq: tuple[int, ...] = option(
        (), parse=int_list, metavar="N[,N…]",
        help="per length, comma list (default round(length × masked-lm-prob): 19 at 128)",
    )  # fmt: skip
    masked_lm_prob: float = option(0.15, help="share of tokens predicted")
    dupe_factor: int = option(10, help="passes over the corpus")
    short_seq_prob: float = option(0.1, help="share of examples with a shorter random target")
    seed: int = option(12345, help="random seed (Google's default)")
    whole_word_mask: bool = option(False, help="mask whole words")
    heldout_fraction: float = option(
        0.01, help="fraction of documents (by id hash) kept out for evaluation"
    )
    samples_per_shard: int = option(
        50_000, help="most samples in a shard; shards of a split are equal ±1"
    )
    partner_group_docs: int = option(1000, help="documents per random NotNext partner group")
    work_partition_mb: int = option(64, help="MB of token ids one pairing step holds")
    bucket_mb: int = option(64, help="MB of examples sorted at once")
    spill_budget_mb: int = option(
        32, help="MB of spill records a step buffers before writing a file"
    )
    shuffle_levels: str = option(
        "auto",
        choices=("auto", "1", "2"),
        help="regroup spill files in one level or two (auto: two where that writes at least "
        "4x fewer files, see pipelines/examples/shuffle.py); the output is the same either way",
    )
    regroup_budget_mb: int = option(
        256, help="MB of spill records a second-level regroup step buffers before writing"
    )
    overwrite: bool = option(False, help="replace the shards and manifest of an earlier run")

    def __post_init__(self) -> None:
        if not self.max_predictions_per_seq:  # Google's rule: round(length × probability)
            derived = tuple(round(n * self.masked_lm_prob) for n in self.max_seq_lengths)
            object.__setattr__(self, "max_predictions_per_seq", derived)

    @property
    def work_dir(self) -> str:
        return files.join(self.output, WORK_DIR)

    def validate(self) -> None:
        """Stop before any work on flags that cannot make examples, naming every problem."""
        problems = _length_problems(self) + _range_problems(self)
        if problems:
            raise ExamplesConfigError("; ".join(problems))


def _length_problems(config: ExamplesConfig) -> list[str]:
    problems = []
    if len(config.max_predictions_per_seq) != len(config.max_seq_lengths):
        problems.append(
            f"--max-predictions-per-seq has {len(config.max_predictions_per_seq)} values for "
            f"{len(config.max_seq_lengths)} --max-seq-length values: give one per length"
        )
    if len(set(config.max_seq_lengths)) != len(config.max_seq_lengths):
        problems.append(f"--max-seq-length repeats a length: {config.max_seq_lengths}")
    for length in config.max_seq_lengths:
        if not 8 <= length <= 65535:
            problems.append(f"--max-seq-length {length}: must be between 8 and 65535")
    if any(p < 1 for p in config.max_predictions_per_seq):
        problems.append("--max-predictions-per-seq must be at least 1")
    return problems


def _range_problems(config: ExamplesConfig) -> list[str]:
    problems = []
    if not 0 < config.masked_lm_prob < 1:
        problems.append(f"--masked-lm-prob {config.masked_lm_prob}: must be in (0, 1)")
    if not 0 <= config.short_seq_prob <= 1:
        problems.append(f"--short-seq-prob {config.short_seq_prob}: must be in [0, 1]")
    if config.dupe_factor < 1 or config.dupe_factor > 65535:
        problems.append(f"--dupe-factor {config.dupe_factor}: must be in [1, 65535]")
    if not 0 <= config.heldout_fraction < 1:
        problems.append(f"--heldout-fraction {config.heldout_fraction}: must be in [0, 1)")
    for name in ("samples_per_shard", "partner_group_docs", "work_partition_mb", "bucket_mb"):
        if getattr(config, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be at least 1")
    if config.partner_group_docs < 2:
        problems.append("--partner-group-docs must be at least 2 (a NotNext needs a partner)")
    return problems
