"""Statistics of shards and documents, computed from every record and compared with the
manifest's counts. Plain functions over decoded records: tests call them on literal input."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.inspect.reading import iter_document_batches, read_examples
from pipelines.inspect.targets import Target, shard_refs
from schemas.documents import DocumentColumn
from schemas.examples import (
    NOT_NEXT,
    PretrainingExample,
)
from schemas.manifest import DocumentsManifest, OutputFile
from schemas.shards import ShardsManifest

LENGTH_BUCKET = 16  # tokens per bar of the example-length histogram


def _histogram(counts: Counter[int], width: int, upper: int) -> list[tuple[int, int, int]]:
    """Buckets (first, last, count) of `width` values from 1 up to `upper`, empty ones too."""
    top = max([upper, *counts]) if counts else upper
    buckets = [0] * max(1, -(-top // width))
    for value, count in counts.items():
        buckets[max(value - 1, 0) // width] += count
    return [(i * width + 1, (i + 1) * width, count) for i, count in enumerate(buckets)]


def _power_of_two_histogram(counts: Counter[int]) -> list[tuple[int, int, int]]:
    """Buckets 1, 2–3, 4–7, …: sentences per document span four orders of magnitude."""
    buckets: Counter[int] = Counter()
    for value, count in counts.items():
        buckets[max(value, 1).bit_length() - 1] += count
    if not buckets:
        return []
    return [(1 << b, (2 << b) - 1, buckets[b]) for b in range(min(buckets), max(buckets) + 1)]


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(slots=True)
class ExampleStats:
    """Accumulates example statistics as examples stream past: memory does not grow."""

    mask_id: int | None
    max_length: int | None = None
    examples: int = 0
    tokens: int = 0
    not_next: int = 0
    lengths: Counter[int] = field(default_factory=Counter)
    predictions: Counter[int] = field(default_factory=Counter)
    masked_mask: int = 0
    masked_keep: int = 0
    masked_random: int = 0

    def add(self, example: PretrainingExample) -> None:
        n_tokens = len(example.input_ids)
        self.examples += 1
        self.tokens += n_tokens
        self.not_next += int(example.next_sentence_label == NOT_NEXT)
        self.lengths[n_tokens] += 1
        self.predictions[len(example.masked_lm_positions)] += 1
        inputs = example.input_ids[example.masked_lm_positions]
        is_mask = inputs == self.mask_id if self.mask_id is not None else np.zeros(0, bool)
        is_keep = inputs == example.masked_lm_ids
        if self.mask_id is not None:
            is_keep &= ~is_mask
            self.masked_mask += int(is_mask.sum())
        self.masked_keep += int(is_keep.sum())
        self.masked_random += len(inputs) - int(is_keep.sum()) - int(is_mask.sum())

    def result(self) -> dict[str, Any]:
        predicted = sum(n * c for n, c in self.predictions.items())
        known = self.mask_id is not None
        return {
            "examples": self.examples,
            "tokens": self.tokens,
            "not_next": self.not_next,
            "not_next_ratio": _ratio(self.not_next, self.examples),
            "length_min": min(self.lengths, default=None),
            "length_max": max(self.lengths, default=None),
            "length_histogram": _histogram(self.lengths, LENGTH_BUCKET, self.max_length or 0),
            "predictions": {
                "total": predicted,
                "mean": _ratio(predicted, self.examples),
                "min": min(self.predictions, default=None),
                "max": max(self.predictions, default=None),
                "per_token": _ratio(predicted, self.tokens),
            },
            # Without the vocabulary's [MASK] id, [MASK] and random replacements are one
            # count, "replaced"; with it, "replaced" is None.
            "masked": {
                "mask": self.masked_mask if known else None,
                "keep": self.masked_keep,
                "random": self.masked_random if known else None,
                "replaced": None if known else self.masked_random,
                "mask_ratio": _ratio(self.masked_mask, predicted) if known else None,
                "keep_ratio": _ratio(self.masked_keep, predicted),
                "random_ratio": _ratio(self.masked_random, predicted) if known else None,
            },
        }


def example_stats(
    examples: Iterable[PretrainingExample], mask_id: int | None, max_length: int | None = None
) -> dict[str, Any]:
    """Counts, length histogram, NotNext ratio, predictions and mask/keep/random ratios."""
    stats = ExampleStats(mask_id, max_length)
    for example in examples:
        stats.add(example)
    return stats.result()


@dataclass(slots=True)
class SplitTally:
    """What was read of one seqN/SPLIT, in the manifest's SplitShards terms."""

    shards: int = 0
    samples: int = 0
    not_next: int = 0
    tokens: int = 0
    predictions: int = 0

    def add(self, example: PretrainingExample) -> None:
        self.samples += 1
        self.not_next += int(example.next_sentence_label == NOT_NEXT)
        self.tokens += len(example.input_ids)
        self.predictions += len(example.masked_lm_positions)


@dataclass(slots=True)
class ShardsStats:
    """Statistics over chosen shards, per split and overall; `complete` False after an error."""

    examples: ExampleStats
    splits: dict[str, SplitTally] = field(default_factory=dict)
    complete: bool = False

    def result(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "shards": sum(t.shards for t in self.splits.values()),
            "splits": {label: _tally_dict(t) for label, t in self.splits.items()},
            **self.examples.result(),
        }


def _tally_dict(tally: SplitTally) -> dict[str, int]:
    return {
        "shards": tally.shards,
        "examples": tally.samples,
        "not_next": tally.not_next,
        "tokens": tally.tokens,
        "predictions": tally.predictions,
    }


def collect_shards_stats(
    target: Target,
    stats: ShardsStats,
    seq: int | None = None,
    split: str | None = None,
    verify: bool = True,
) -> ShardsStats:
    """Fill `stats` from every chosen shard; on a ShardReadError `stats` holds what was read."""
    for shard in shard_refs(target, seq, split):
        tally = stats.splits.setdefault(shard.label, SplitTally())
        tally.shards += 1
        for example in read_examples(shard, verify):
            tally.add(example)
            stats.examples.add(example)
    stats.complete = True
    return stats


def manifest_mismatches(target: Target, stats: dict[str, Any]) -> list[str]:
    """Splits whose counts read differ from the manifest's (only whole splits are read)."""
    if not isinstance(target.manifest, ShardsManifest) or target.shard is not None:
        return []
    problems = []
    for label, read in stats["splits"].items():
        name, _, split = label.partition("/")
        recorded = target.manifest.outputs[name].splits[split]
        expected = {
            "shards": len(recorded.shards),
            "examples": recorded.samples,
            "not_next": recorded.not_next,
            "tokens": recorded.tokens,
            "predictions": recorded.predictions,
        }
        problems += _differences(label, expected, read)
    return problems


@dataclass(slots=True)
class DocumentStats:
    """Documents, sentences and text bytes, per file and overall, as batches stream past."""

    documents: int = 0
    sentences: int = 0
    text_bytes: int = 0
    sentences_per_document: Counter[int] = field(default_factory=Counter)
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    complete: bool = False

    def add(self, output_file: OutputFile, batch: pa.Table | pa.RecordBatch) -> None:
        column = batch.column(DocumentColumn.SENTENCES)
        per_document = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        sentence_bytes = pc.sum(pc.binary_length(pc.list_flatten(column))).as_py() or 0
        self.documents += batch.num_rows
        self.sentences += int(per_document.sum())
        self.text_bytes += sentence_bytes
        self.sentences_per_document.update(per_document.tolist())
        tally = self.files.setdefault(
            output_file.name, {"documents": 0, "sentences": 0, "text_bytes": 0}
        )
        tally["documents"] += batch.num_rows
        tally["sentences"] += int(per_document.sum())
        tally["text_bytes"] += sentence_bytes

    def result(self) -> dict[str, Any]:
        counts = self.sentences_per_document
        return {
            "complete": self.complete,
            "files": len(self.files),
            "documents": self.documents,
            "sentences": self.sentences,
            "text_bytes": self.text_bytes,
            "sentences_per_document": {
                "mean": _ratio(self.sentences, self.documents),
                "min": min(counts, default=None),
                "max": max(counts, default=None),
                "histogram": _power_of_two_histogram(counts),
            },
            "per_file": self.files,
        }


def collect_document_stats(
    target: Target, stats: DocumentStats, verify: bool = True
) -> DocumentStats:
    """Fill `stats` from every documents file, reading only the sentences column."""
    for output_file, batch in iter_document_batches(target, [DocumentColumn.SENTENCES], verify):
        stats.add(output_file, batch)
    stats.complete = True
    return stats


def document_mismatches(manifest: DocumentsManifest, stats: dict[str, Any]) -> list[str]:
    """Files whose documents, sentences or text bytes differ from the manifest's."""
    problems = []
    for output_file in manifest.files:
        read = stats["per_file"].get(
            output_file.name, {"documents": 0, "sentences": 0, "text_bytes": 0}
        )
        expected = {
            "documents": output_file.documents,
            "sentences": output_file.sentences,
            "text_bytes": output_file.text_bytes,
        }
        problems += _differences(output_file.name, expected, read)
    return problems


def _differences(label: str, expected: dict[str, int], read: dict[str, int]) -> list[str]:
    """One problem line naming each count that differs from the manifest's, or none."""
    differing = [f"{k} {read[k]} (manifest {v})" for k, v in expected.items() if read[k] != v]
    return [f"{label}: " + ", ".join(differing)] if differing else []
