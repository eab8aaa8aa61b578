"""bench.loader's reference rows: the same shards read by plain webdataset with a decoder and
collate of the benchmark's own (what a user of the shards without bertkit's loader would
write), by bertkit's tar reader alone, and by Python's tarfile (the 1.x layout); and
`take_batches`, which every row's batches go through."""

from __future__ import annotations

import contextlib
import tarfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from pipelines.io.shards import iter_tar_samples
from schemas.batch import IGNORE_INDEX, PAD_MULTIPLE, BatchField
from schemas.examples import SAMPLES_MEMBER, PretrainingExample, sample_key, unpack_samples


def take_batches(batches: Iterator[dict[str, torch.Tensor]], limit: int | None) -> int:
    """Samples in the batches, consumed until `limit` samples (all of them without one)."""
    samples = 0
    with contextlib.closing(batches):  # type: ignore[type-var]
        for batch in batches:
            samples += len(batch[BatchField.INPUT_IDS])
            if limit is not None and samples >= limit:
                break
    return samples


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def collate_examples(examples: list[PretrainingExample]) -> dict[str, torch.Tensor]:
    """The baseline's collate: decoded examples → the same tensors as trainer.data.collate."""
    size = len(examples)
    width = _round_up(max(len(e.input_ids) for e in examples), PAD_MULTIPLE)
    slots = _round_up(max(max(len(e.masked_lm_positions) for e in examples), 1), PAD_MULTIPLE)
    input_ids = np.zeros((size, width), dtype=np.int64)
    token_types = np.zeros((size, width), dtype=np.int64)
    attention = np.zeros((size, width), dtype=bool)
    positions = np.zeros((size, slots), dtype=np.int64)
    labels = np.full((size, slots), IGNORE_INDEX, dtype=np.int64)
    for row, example in enumerate(examples):
        n, p = len(example.input_ids), len(example.masked_lm_positions)
        input_ids[row, :n] = example.input_ids
        token_types[row, example.segment_a_length : n] = 1
        attention[row, :n] = True
        positions[row, :p] = example.masked_lm_positions
        labels[row, :p] = example.masked_lm_ids
    nsp = np.array([e.next_sentence_label for e in examples], dtype=np.int64)
    index = np.array([int(e.key) for e in examples], dtype=np.int64)
    return {
        BatchField.INPUT_IDS: torch.from_numpy(input_ids),
        BatchField.TOKEN_TYPE_IDS: torch.from_numpy(token_types),
        BatchField.ATTENTION_MASK: torch.from_numpy(attention),
        BatchField.MASKED_POSITIONS: torch.from_numpy(positions),
        BatchField.MASKED_LABELS: torch.from_numpy(labels),
        BatchField.NEXT_SENTENCE_LABELS: torch.from_numpy(nsp),
        BatchField.SAMPLE_INDEX: torch.from_numpy(index),
    }


def decode_wds_block(block: dict[str, Any]) -> list[PretrainingExample]:
    """A webdataset record (one block member) → its examples, keyed first key + i."""
    first = int(block["__key__"])
    return [
        PretrainingExample.decode(data, sample_key(first + number))
        for number, data in enumerate(unpack_samples(block[SAMPLES_MEMBER]))
    ]


def webdataset_rows(paths: list[str], batch_size: int, limit: int | None) -> int:
    import webdataset

    dataset = (
        webdataset.WebDataset(paths, shardshuffle=False)
        .map(decode_wds_block)
        .unlisted()  # a block's examples, one by one
        .batched(batch_size, collation_fn=collate_examples, partial=False)
    )
    return take_batches(iter(dataset), limit)


def reader_rows(paths: list[str], limit: int | None) -> int:
    samples = 0
    for path in paths:
        with open(path, "rb") as stream:
            for _key, _data in iter_tar_samples(stream, path):
                samples += 1
                if limit is not None and samples >= limit:
                    return samples
    return samples


def tarfile_rows(paths: list[str], limit: int | None) -> int:
    samples = 0
    for path in paths:
        with tarfile.open(path, mode="r|") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                archive.extractfile(member).read()  # type: ignore[union-attr]
                samples += 1
                if limit is not None and samples >= limit:
                    return samples
    return samples
