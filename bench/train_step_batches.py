"""bench.train_step's batches: real ones from the shards through the trainer's loader, or
synthetic ones, full length or with padding like the demo's pair shards at 512. Not a
command: `python -m bench.train_step [--synthetic [--padding F]]` uses these.

    data = synthetic_batches(seq=512, batch=64, count=8, vocab=30522, padding=0.18)
    data = real_batches(Path("out/demo/shards"), seq=128, batch=256, count=8)
"""

from __future__ import annotations

# First: without the train extra, one line naming the install command (bench/train_extra.py).
import bench.train_extra  # noqa: F401

# isort: split
import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch

from schemas.batch import IGNORE_INDEX, PAD_MULTIPLE, BatchField
from trainer.data import (
    DataConfigError,
    DataPosition,
    LoaderConfig,
    PretrainingLoader,
    open_source,
)

MASKED_FRACTION = 0.15
# The shortest synthetic sequence with --padding: a pair of one-token segments with [CLS]
# and two [SEP], and room for a prediction; the shortened ones are uniform from it to
# seq - SHORTEST, so their mean is half the length.
SHORTEST = 8


@dataclass
class Batches:
    """The cached batches (on the CPU) and where they came from."""

    batches: list[dict[str, torch.Tensor]]
    vocab_size: int
    synthetic: bool
    description: str


def real_batches(shards: Path, seq: int, batch: int, count: int, window: int = 0) -> Batches:
    source = open_source(str(shards), "train", seq)
    if source.manifest is None:
        raise DataConfigError(f"{shards}: no manifest, so no vocabulary size")
    loader = PretrainingLoader(source, LoaderConfig(batch, num_workers=0, bucket_window=window))
    batches = []
    with contextlib.closing(loader.epoch(DataPosition())) as epoch:  # type: ignore[type-var]
        for collated in epoch:
            batches.append(collated)
            if len(batches) == count:
                break
    vocab = int(source.manifest.vocab["size"])
    return Batches(
        batches,
        vocab,
        synthetic=False,
        description=f"real shards: {shards} seq{seq} train split, {len(batches)} batches of "
        f"{batch} cached and cycled (vocabulary {vocab:,} tokens"
        + (f", length bucketing over {window} batches)" if window else ")"),
    )


def sequence_lengths(
    seq: int, batch: int, padding: float, generator: torch.Generator
) -> torch.Tensor:
    """(batch,) lengths: full, or (with probability 2 × `padding`) uniform from SHORTEST to
    seq - SHORTEST, so that the expected share of padded positions is `padding` (the demo's
    pair shards at 512: 30 % of sequences shorter, 18 % of positions padding). Where the
    draw gives none shorter, the last sequence is: a batch at `padding` > 0 always has
    padding, as a real batch of that mix does."""
    lengths = torch.full((batch,), seq, dtype=torch.int64)
    if padding <= 0:
        return lengths
    short = torch.rand(batch, generator=generator) < 2 * padding
    if not short.any():
        short[-1] = True
    drawn = torch.randint(SHORTEST, seq - SHORTEST + 1, (batch,), generator=generator)
    return torch.where(short, drawn, lengths)


def synthetic_batches(
    seq: int, batch: int, count: int, vocab: int, seed: int = 0, padding: float = 0.0
) -> Batches:
    """Random batches: ids uniform over the vocabulary, 15 % of each sequence's positions
    predicted; every sequence full length, or `padding` of the positions padding
    (`sequence_lengths`), laid out as the trainer's collate lays them (tokens first)."""
    generator = torch.Generator().manual_seed(seed)
    most = max(1, round(MASKED_FRACTION * seq))
    slots = -(-most // PAD_MULTIPLE) * PAD_MULTIPLE
    batches = []
    for index in range(count):
        lengths = sequence_lengths(seq, batch, padding, generator)
        positions = torch.arange(seq)
        real = positions[None, :] < lengths[:, None]
        input_ids = torch.randint(1, vocab, (batch, seq), generator=generator) * real
        token_types = ((positions[None, :] >= (lengths[:, None] // 2)) & real).long()
        # Positions 1 … length-1 (never [CLS]), ascending, distinct within a row: random
        # keys, the padding's pushed past every real one, the first `predictions` kept.
        keys = torch.rand(batch, seq - 1, generator=generator) + (~real[:, 1:]) * 2.0
        predictions = (lengths.double() * MASKED_FRACTION).round().long().clamp(1, most)
        ranked = keys.argsort(dim=1)[:, :slots] + 1
        kept = torch.arange(slots)[None, :] < predictions[:, None]
        # The kept positions first, ascending; the other slots point at [CLS], no label.
        order = torch.where(kept, ranked, seq + ranked).sort(dim=1).values
        masked_positions = torch.where(kept, order, 0)
        labels = torch.randint(1, vocab, (batch, slots), generator=generator)
        batches.append(
            {
                BatchField.INPUT_IDS: input_ids,
                BatchField.TOKEN_TYPE_IDS: token_types,
                BatchField.ATTENTION_MASK: real,
                BatchField.MASKED_POSITIONS: masked_positions,
                BatchField.MASKED_LABELS: torch.where(kept, labels, IGNORE_INDEX),
                BatchField.NEXT_SENTENCE_LABELS: torch.randint(0, 2, (batch,), generator=generator),
                BatchField.SAMPLE_INDEX: torch.arange(index * batch, (index + 1) * batch),
            }
        )
    shape = (
        f"{padding:.0%} of the positions padding (a share {2 * padding:.0%} of the sequences "
        f"shorter, {SHORTEST} to {seq - SHORTEST} tokens)"
        if padding
        else f"every sequence {seq} tokens"
    )
    return Batches(
        batches,
        vocab,
        synthetic=True,
        description=f"SYNTHETIC batches (no shards read): {count} of {batch}, random ids over "
        f"{vocab:,} tokens, {shape}, 15 % of positions predicted (at most {most})",
    )
