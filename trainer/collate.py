"""The last stage of the input pipeline: decoded samples → the padded, checked tensors of
schemas/batch.py, and their move to the device.

Every field is range-checked against what the manifest promises (sequence length,
vocabulary size) and against the sample itself (positions inside its tokens) before a batch
is built: a corrupt or foreign sample stops the run with the shard and the sample named,
never with an IndexError inside the model. With --masking dynamic the stored masks are undone
and new ones drawn here, from (seed, epoch, sample key) (trainer/masking.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from pipelines.io.shards import ShardReadError
from schemas.batch import IGNORE_INDEX, PAD_MULTIPLE, BatchField
from schemas.examples import HEADER_BYTES, POSITION_DTYPE, ExampleHeader
from trainer.masking import DynamicMasking, draw_masks, restore_originals

if TYPE_CHECKING:  # types only: trainer.data imports this module
    from trainer.data import DataSource
    from trainer.samples import Sample

# A mixed batch's field (trainer/mix.py): each row's source number, (B,) int64, beside
# BatchField.SAMPLE_INDEX (a key within that source). One-source batches have none.
SAMPLE_SOURCE = "sample_source"
# A mixed sample's key for its masks: source k's key ^ (k + 1) << 48 (a split holds fewer
# than 2**48 samples), so two sources never draw the same masks for equal keys, and no
# mixed key is a one-source key.
SOURCE_KEY_SHIFT = 48


@dataclass(frozen=True, slots=True)
class SampleLimits:
    """What the manifest promises every sample respects; None where it says nothing."""

    max_tokens: int | None = None
    vocab_size: int | None = None

    @classmethod
    def of(cls, source: DataSource) -> SampleLimits:
        vocab = source.manifest.vocab if source.manifest is not None else {}
        return cls(source.max_seq_length, vocab.get("size"))


def collate(
    decoded: list[tuple[Sample, ExampleHeader]],
    limits: SampleLimits = SampleLimits(),
    masking: DynamicMasking | None = None,
    seed: int = 0,
    epoch: int = 0,
    mixed: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, torch.Tensor]:
    """A list of decoded samples → the padded tensors of schemas/batch.py, every field's
    range checked first (`check_fields`): an index error never reaches the model. With
    `masking`, the stored masks are undone and new ones drawn from (seed, epoch, sample key).
    `mixed`: a mix's rows' (source numbers, source epochs), (B,) int64 each: the batch gets
    SAMPLE_SOURCE, and masks are drawn from (seed, the row's source epoch, its key with the
    source folded in)."""
    if masking is not None:  # its tables are indexed by token id: none may lie past them
        vocab_size = min(limits.vocab_size or masking.vocab_size, masking.vocab_size)
        limits = SampleLimits(limits.max_tokens, vocab_size)
    size = len(decoded)
    headers = [header for _, header in decoded]
    lengths = np.fromiter((h.n_tokens for h in headers), dtype=np.int64, count=size)
    a_lengths = np.fromiter((h.segment_a_length for h in headers), dtype=np.int64, count=size)
    n_preds = np.fromiter((h.n_predictions for h in headers), dtype=np.int64, count=size)
    width = _round_up(int(lengths.max()), PAD_MULTIPLE)
    slots = _round_up(max(int(n_preds.max()), 1), PAD_MULTIPLE)
    input_ids = np.zeros((size, width), dtype=np.int64)  # [PAD] = 0 (schemas/vocab.py)
    positions = np.zeros((size, slots), dtype=np.int64)
    labels = np.full((size, slots), IGNORE_INDEX, dtype=np.int64)
    for row, (sample, header) in enumerate(decoded):
        data, dtype = sample[1], header.id_dtype
        n, p = header.n_tokens, header.n_predictions
        input_ids[row, :n] = np.frombuffer(data, dtype, n, HEADER_BYTES)
        positions[row, :p] = np.frombuffer(data, POSITION_DTYPE, p, header.positions_offset)
        labels[row, :p] = np.frombuffer(data, dtype, p, header.labels_offset)
    columns = np.arange(width)
    attention = columns < lengths[:, None]  # (B, L) True on real tokens
    token_types = (columns >= a_lengths[:, None]) & attention  # 1 for B [SEP], 0 elsewhere
    nsp = np.fromiter((h.next_sentence_label for h in headers), dtype=np.int64, count=size)
    index = np.fromiter((s[0] for s, _ in decoded), dtype=np.int64, count=size)
    check_fields(decoded, limits, lengths, a_lengths, n_preds, input_ids, positions, labels, nsp)
    if masking is not None:
        keys, epochs = index, epoch
        if mixed is not None:  # the source folded into the key, the source's own epoch
            keys, epochs = index ^ ((mixed[0] + 1) << SOURCE_KEY_SHIFT), mixed[1]
        restore_originals(input_ids, positions, labels, n_preds)
        positions, labels = draw_masks(masking, input_ids, lengths, keys, seed, epochs)
    batch = {
        BatchField.INPUT_IDS: torch.from_numpy(input_ids),
        BatchField.TOKEN_TYPE_IDS: torch.from_numpy(token_types.astype(np.int64)),
        BatchField.ATTENTION_MASK: torch.from_numpy(attention),
        BatchField.MASKED_POSITIONS: torch.from_numpy(positions),
        BatchField.MASKED_LABELS: torch.from_numpy(labels),
        BatchField.NEXT_SENTENCE_LABELS: torch.from_numpy(nsp),
        BatchField.SAMPLE_INDEX: torch.from_numpy(index),
    }
    if mixed is not None:
        batch[SAMPLE_SOURCE] = torch.from_numpy(np.asarray(mixed[0], dtype=np.int64))
    return batch


def check_fields(
    decoded: list[tuple[Sample, ExampleHeader]],
    limits: SampleLimits,
    lengths: np.ndarray,
    a_lengths: np.ndarray,
    n_preds: np.ndarray,
    input_ids: np.ndarray,
    positions: np.ndarray,
    labels: np.ndarray,
    nsp: np.ndarray,
) -> None:
    """Every field in range, or a ShardReadError naming the shard, the sample and the field."""
    predicted = np.arange(positions.shape[1]) < n_preds[:, None]  # (B, P) the real slots
    max_tokens = limits.max_tokens or lengths.max()
    vocab = limits.vocab_size or np.iinfo(np.int64).max
    problems = [
        (lengths > max_tokens, f"more than the manifest's {max_tokens} tokens"),
        (lengths < 3, "fewer than 3 tokens ([CLS] A [SEP])"),
        ((a_lengths < 2) | (a_lengths > lengths), "segment A's length outside its tokens"),
        (n_preds > lengths, "more predictions than tokens"),
        ((input_ids >= vocab).any(axis=1), f"a token id past the vocabulary's {vocab}"),
        ((predicted & (labels >= vocab)).any(axis=1), f"a label past the vocabulary's {vocab}"),
        (
            (predicted & ((positions < 1) | (positions >= lengths[:, None]))).any(axis=1),
            "a masked position outside its tokens",
        ),
        ((nsp != 0) & (nsp != 1), "a next-sentence label other than 0 or 1"),
    ]
    for bad, what in problems:
        if bad.any():
            sample = decoded[int(np.argmax(bad))][0]
            raise ShardReadError(
                f"{sample[2]}: sample {sample[0]:012d} has {what}; the shard is corrupt "
                "or not made for this run: rebuild it"
            )


@dataclass(frozen=True, slots=True)
class FixedShape:
    """The shapes batches are padded to under torch.compile, so that a few graphs serve every
    step. Tokens: to the narrowest of `widths` that holds the batch; that is the manifest's
    max_seq_length rounded up to PAD_MULTIPLE (one graph) or, with length bucketing, its four
    quarters (four graphs). Prediction slots: to the manifest's max_predictions_per_seq
    rounded up to PAD_MULTIPLE."""

    widths: tuple[int, ...]
    slots: int

    @classmethod
    def of(cls, max_seq_length: int, max_predictions: int, buckets: int = 1) -> FixedShape:
        widths = {
            _round_up(-(-max_seq_length * k // buckets), PAD_MULTIPLE)
            for k in range(1, buckets + 1)
        }
        return cls(tuple(sorted(widths)), _round_up(max(max_predictions, 1), PAD_MULTIPLE))

    @property
    def tokens(self) -> int:
        return self.widths[-1]

    def width_for(self, have: int) -> int:
        """The narrowest width that holds `have` tokens."""
        for width in self.widths:
            if width >= have:
                return width
        raise ValueError(f"a batch {have} tokens wide, more than the fixed {self.tokens}")


def pad_batch(batch: dict[str, torch.Tensor], fixed: FixedShape) -> dict[str, torch.Tensor]:
    """`batch` padded to `fixed`, in place: tokens with [PAD] (0) and a False attention mask,
    prediction slots with position 0 and IGNORE_INDEX labels. The loader's workers do it
    (LoaderConfig.pad_to) before the batch is pinned: padding a pinned batch would make new,
    pageable tensors, and their copy to the GPU synchronous."""
    width = fixed.width_for(batch[BatchField.INPUT_IDS].shape[1])
    _pad(
        batch,
        (BatchField.INPUT_IDS, BatchField.TOKEN_TYPE_IDS, BatchField.ATTENTION_MASK),
        width,
        0,
    )
    _pad(batch, (BatchField.MASKED_POSITIONS,), fixed.slots, 0)
    _pad(batch, (BatchField.MASKED_LABELS,), fixed.slots, IGNORE_INDEX)
    return batch


def to_device(
    batch: dict[str, torch.Tensor], device: torch.device, fixed: FixedShape | None
) -> dict[str, torch.Tensor]:
    """The batch on `device`, padded to `fixed` first if given and not padded yet."""
    if fixed is not None:
        pad_batch(batch, fixed)
    return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}


def _pad(batch: dict[str, torch.Tensor], names: tuple[str, ...], width: int, value: int) -> None:
    for name in names:
        have = batch[name].shape[1]
        if have > width:
            raise ValueError(f"{name} is {have} wide, more than the fixed {width}")
        if have < width:
            batch[name] = torch.nn.functional.pad(batch[name], (0, width - have), value=value)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
