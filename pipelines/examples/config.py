"""`bertkit examples`' one config: every flag, its type, default and help, written once.

The flags are Google's `create_pretraining_data.py` names and defaults (`--max_seq_length`,
`--dupe_factor`, …, also spelled with hyphens) plus bertkit's own; `pipelines.command.flags`
makes the command line from this dataclass, and the shards manifest records it (all but
`output` and `overwrite`, which say where and how to write, not what).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from pipelines.beam import files
from pipelines.command.flags import option
from schemas.shards import FULL_SENTENCES, MASKING_KINDS, NO_MASKS, PAIRS, SEQUENCE_KINDS, STATIC

WORK_DIR = "_work"  # spill files between steps; removed when the manifest is written
# Masking flags at their defaults: with --masking none a flag that is not is refused.
_STATIC_ONLY = {"masked_lm_prob": 0.15, "whole_word_mask": False, "max_predictions_per_seq": ()}


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
    vocab: str = option(
        help="vocabulary directory: `bertkit vocab`'s output, or a released BERT's (its "
        "vocab.txt, with or without tokenizer.json and tokenizer_config.json, or its "
        "tokenizer.json alone)"
    )
    output: str = option(help="output directory")
    cased: bool | None = option(
        None,
        help="a released vocabulary's casing where its directory does not say it (no "
        "do_lower_case in tokenizer_config.json): --cased keeps case, --no-cased lower-cases "
        "and strips accents; one that contradicts the directory is refused",
    )
    max_seq_lengths: tuple[int, ...] = option(
        (128,),
        flag="max-seq-length",
        parse=int_list,
        metavar="N[,N…]",
        help="one length or a comma list, e.g. 128,512: one output tree each",
    )
    sequences: str = option(
        PAIRS,
        choices=SEQUENCE_KINDS,
        help="pairs: Google's sentence pairs with a next-sentence label; full-sentences: "
        "RoBERTa's FULL-SENTENCES, contiguous text packed to --max-seq-length across "
        "documents, no next-sentence label",
    )
    masking: str = option(
        STATIC,
        choices=MASKING_KINDS,
        help="static: masks drawn here and stored (Google's); none: no masks stored, for a "
        "trainer that draws them (bertkit train --masking dynamic)",
    )
    max_predictions_per_seq: tuple[int, ...] = option(
        (),
        parse=int_list,
        metavar="N[,N…]",
        help="per length, comma list (default round(length × masked-lm-prob): 19 at 128)",
    )
    masked_lm_prob: float = option(0.15, help="share of tokens predicted")
    dupe_factor: int = option(10, help="passes over the corpus")
    short_seq_prob: float = option(
        0.1,
        help="chance that a document, in each pass, draws one shorter random target for all "
        "its pairs (Google's rule)",
    )
    seed: int = option(12345, help="random seed (Google's default)")
    whole_word_mask: bool = option(False, help="mask whole words")
    heldout_fraction: float = option(
        0.01, help="fraction of documents (by id hash) kept out for evaluation"
    )
    samples_per_shard: int = option(
        50_000, help="most samples in a shard; shards of a split are equal ±1"
    )
    partner_group_docs: int = option(
        1000,
        help="documents per random partner group: NotNext partners come from it; with "
        "--sequences full-sentences its documents, in id order, are one packed stream",
    )
    work_partition_mb: int = option(64, help="MB of token ids one pairing step holds")
    bucket_mb: int = option(
        64, help="MB of examples shuffled at once (another value: the same examples, reordered)"
    )
    spill_budget_mb: int = option(
        32, help="MB of spill records a step buffers before writing a file"
    )
    shuffle_levels: str = option(
        "auto",
        choices=("auto", "1", "2"),
        help="regroup spill files in one level or two (auto: two where that writes at least "
        "4x fewer files, see docs/stages/examples.md); the output is the same either way",
    )
    regroup_budget_mb: int = option(
        1024,
        help="MB of spill records a regroup step (and, on two levels, a mapper) buffers "
        "before writing: larger means fewer, larger spill files",
    )
    overwrite: bool = option(False, help="replace the shards and manifest of an earlier run")

    def __post_init__(self) -> None:
        # Google's rule: round(length × probability). A probability that is not a finite
        # number derives nothing here: `validate` names it (round(nan) would raise first).
        # Without masks there is nothing to predict, so nothing to derive.
        if (
            self.masking == STATIC
            and not self.max_predictions_per_seq
            and math.isfinite(self.masked_lm_prob)
        ):
            derived = tuple(round(n * self.masked_lm_prob) for n in self.max_seq_lengths)
            object.__setattr__(self, "max_predictions_per_seq", derived)

    @property
    def work_dir(self) -> str:
        return files.join(self.output, WORK_DIR)

    def validate(self) -> None:
        """Stop before any work on flags that cannot make examples, naming every problem."""
        problems = _kind_problems(self)
        if self.masking == STATIC:
            problems += _length_problems(self)
        else:
            problems += _bad_lengths(self.max_seq_lengths)
        problems += _range_problems(self)
        if problems:
            raise ExamplesConfigError("; ".join(problems))


def _length_problems(config: ExamplesConfig) -> list[str]:
    problems = []
    lengths, predictions = config.max_seq_lengths, config.max_predictions_per_seq
    if predictions and len(predictions) != len(lengths):  # none: the probability is not finite
        problems.append(
            f"--max-predictions-per-seq has {len(predictions)} values for "
            f"{len(lengths)} --max-seq-length values: give one per length"
        )
    problems += _bad_lengths(lengths)
    for length, count in zip(lengths, predictions, strict=False):
        derived = math.isfinite(config.masked_lm_prob) and count == round(
            length * config.masked_lm_prob
        )
        if derived and not 0 < config.masked_lm_prob < 1:
            continue  # the probability's own problem says it all
        if count < 1 and derived:
            problems.append(
                f"--masked-lm-prob {config.masked_lm_prob} predicts round({length} × "
                f"{config.masked_lm_prob}) = {count} tokens at length {length}: raise it, or "
                "give --max-predictions-per-seq"
            )
        elif count < 1:
            problems.append(f"--max-predictions-per-seq {count}: must be at least 1")
        elif count > length - 3 and 8 <= length <= 65535 and derived:
            problems.append(
                f"--masked-lm-prob {config.masked_lm_prob} predicts round({length} × "
                f"{config.masked_lm_prob}) = {count} tokens at length {length}, more than its "
                f"{length - 3} positions that are not [CLS] or [SEP]: lower it, or give "
                "--max-predictions-per-seq"
            )
        elif count > length - 3 and 8 <= length <= 65535:
            problems.append(
                f"--max-predictions-per-seq {count} at length {length}: must be at most "
                f"{length - 3} (the positions that are not [CLS] or [SEP])"
            )
    return problems


def _bad_lengths(lengths: tuple[int, ...]) -> list[str]:
    problems = []
    if len(set(lengths)) != len(lengths):
        problems.append(f"--max-seq-length repeats a length: {lengths}")
    for length in lengths:
        if not 8 <= length <= 65535:
            problems.append(f"--max-seq-length {length}: must be between 8 and 65535")
    return problems


def _kind_problems(config: ExamplesConfig) -> list[str]:
    """Flags that mean nothing for the kind of sequences or masking asked for."""
    problems = []
    if config.sequences not in SEQUENCE_KINDS:
        problems.append(f"--sequences {config.sequences!r}: one of {', '.join(SEQUENCE_KINDS)}")
    if config.masking not in MASKING_KINDS:
        problems.append(f"--masking {config.masking!r}: one of {', '.join(MASKING_KINDS)}")
    if config.masking == NO_MASKS:
        for name, default in _STATIC_ONLY.items():
            if getattr(config, name) != default:
                flag = "--" + name.replace("_", "-")
                problems.append(
                    f"{flag} shapes stored masks, and --masking none stores none: drop it (the "
                    "trainer's --mask-rate, --whole-word-mask and --max-predictions shape "
                    "dynamic masks)"
                )
    if config.sequences == FULL_SENTENCES and config.short_seq_prob != 0.1:
        problems.append(
            f"--short-seq-prob {config.short_seq_prob} draws short targets for sentence pairs; "
            "--sequences full-sentences fills every sequence to --max-seq-length: drop it"
        )
    copies = config.sequences == FULL_SENTENCES and config.masking == NO_MASKS
    if copies and config.dupe_factor != 1:
        problems.append(
            f"--dupe-factor {config.dupe_factor} with --sequences full-sentences --masking "
            "none would store the same text again, without masks to tell the copies apart: "
            "give --dupe-factor 1 and train more epochs (each draws new masks)"
        )
    return problems


def _range_problems(config: ExamplesConfig) -> list[str]:
    """Each number in the range where it means something."""
    problems = []
    for name, inside, describe in _FRACTIONS:
        value = getattr(config, name)
        if not math.isfinite(value):
            problems.append(f"--{name.replace('_', '-')} {value}: must be a finite number")
        elif not inside(value):
            problems.append(f"--{name.replace('_', '-')} {value}: must be in {describe}")
    if not 1 <= config.dupe_factor <= 65535:
        problems.append(f"--dupe-factor {config.dupe_factor}: must be in [1, 65535]")
    if config.partner_group_docs < 2:
        problems.append(
            f"--partner-group-docs {config.partner_group_docs}: must be at least 2 "
            "(a NotNext needs a partner)"
        )
    for name in _AT_LEAST_ONE:
        value = getattr(config, name)
        if value < 1:
            problems.append(f"--{name.replace('_', '-')} {value}: must be at least 1")
    return problems


_FRACTIONS = (
    ("masked_lm_prob", lambda p: 0 < p < 1, "(0, 1)"),
    ("short_seq_prob", lambda p: 0 <= p <= 1, "[0, 1]"),
    ("heldout_fraction", lambda p: 0 <= p < 1, "[0, 1)"),
)
# Counts and budgets in MB: 0 would mean a shard of nothing, or a spill file per record.
_AT_LEAST_ONE = (
    "samples_per_shard",
    "work_partition_mb",
    "bucket_mb",
    "spill_budget_mb",
    "regroup_budget_mb",
)
