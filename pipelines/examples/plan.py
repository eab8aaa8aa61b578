"""What is fixed before any work starts: the inputs, the units of the first step, and the
sizes of every step.

Sizes come from the inputs' manifests and the flags alone (never from the data as it
flows), so every worker of every runner routes a document the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.beam.documents import DocumentsInput, read_documents_input
from pipelines.examples.config import ExamplesConfig, ExamplesConfigError
from pipelines.examples.keys import BucketKey, PartitionKey
from pipelines.examples.shuffle import (
    Routing,
    SpillSizes,
    level_files,
    plan_routing,
    spill_files,
)
from pipelines.io.hashing import stable_hash64, unit_fraction
from pipelines.io.places import repeated_place
from schemas import MANIFEST_NAME
from schemas.examples import id_width_for_vocab
from schemas.shards import split_dir

# Planning estimates: BERT's uncased WordPiece makes ~1 token per 4.6 bytes of English text;
# an example costs its ids plus ~60 bytes of predictions, header and provenance.
_BYTES_PER_TOKEN_ESTIMATE = 4.6
_EXAMPLE_OVERHEAD_ESTIMATE = 60


def read_documents_inputs(directories: Sequence[str]) -> list[DocumentsInput]:
    """Each documents directory's manifest, checked; the stage refuses what it cannot use."""
    repeated = repeated_place(directories)
    if repeated:
        raise ExamplesConfigError(
            f"{repeated}: its documents would make examples twice; name each directory once"
        )
    inputs = []
    for directory in directories:
        documents_input = read_documents_input(directory)
        if not documents_input.manifest.counts.get("documents"):
            raise ExamplesConfigError(
                f"{directory} holds no documents (see its {MANIFEST_NAME}): nothing to make "
                "examples from"
            )
        inputs.append(documents_input)
    return inputs


@dataclass(frozen=True, slots=True)
class SplitLayout:
    groups: int  # random NotNext partner groups per pass
    partitions: int  # pairing steps per pass (each holds groups / partitions groups)


@dataclass(frozen=True, slots=True)
class Layout:
    """Sizes derived from the inputs' manifests and the flags: fixed before work starts."""

    id_width: int
    splits: dict[str, SplitLayout]
    buckets: dict[str, int]  # output name ("seq128/train") → shuffle buckets

    def group_of(self, seed: int, dupe_pass: int, split: str, document_id: str) -> int:
        return stable_hash64("partner-group", seed, dupe_pass, document_id) % (
            self.splits[split].groups
        )

    def partition_of(self, split: str, group: int) -> int:
        return group % self.splits[split].partitions


def plan_layout(config: ExamplesConfig, inputs: list[DocumentsInput], vocab_size: int) -> Layout:
    documents = sum(i.manifest.counts["documents"] for i in inputs)
    id_width = id_width_for_vocab(vocab_size)
    splits, buckets = {}, {}
    for split, (share, token_bytes) in _split_token_bytes(config, inputs, id_width).items():
        groups = max(1, round(documents * share / config.partner_group_docs))
        partitions = max(1, min(groups, math.ceil(token_bytes / (config.work_partition_mb << 20))))
        splits[split] = SplitLayout(groups, partitions)
        for length in config.max_seq_lengths:
            example_bytes = _example_bytes(config, token_bytes, length)
            buckets[split_dir(length, split)] = max(
                1, math.ceil(example_bytes / (config.bucket_mb << 20))
            )
    return Layout(id_width, splits, buckets)


def _split_token_bytes(
    config: ExamplesConfig, inputs: list[DocumentsInput], id_width: int
) -> dict[str, tuple[float, float]]:
    """Each split's share of the documents and estimated bytes of token ids."""
    text_bytes = sum(i.manifest.counts.get("text_bytes", 0) for i in inputs)
    shares = {"train": 1 - config.heldout_fraction, "heldout": config.heldout_fraction}
    return {
        split: (share, text_bytes * share / _BYTES_PER_TOKEN_ESTIMATE * id_width)
        for split, share in shares.items()
    }


def _example_bytes(config: ExamplesConfig, token_bytes: float, length: int) -> float:
    """Estimated bytes of the examples made at `length` from `token_bytes` of token ids."""
    return token_bytes * config.dupe_factor * (1 + _EXAMPLE_OVERHEAD_ESTIMATE / length)


def split_of(document_id: str, heldout_fraction: float) -> str:
    """Held-out documents by a hash of the id alone: the same for every seed and length."""
    return "heldout" if unit_fraction("heldout", document_id) < heldout_fraction else "train"


@dataclass(frozen=True)
class Routes:
    """How the graph's two regroupings reach their keys (pipelines/examples/shuffle.py)."""

    partitions: Routing  # documents files → pairing steps
    buckets: Routing  # pairing steps → shuffle buckets
    partition_sizes: SpillSizes | None = None  # what the plan expected of each
    bucket_sizes: SpillSizes | None = None

    def level_files(self) -> dict[str, tuple[int, int]]:
        """About how many spill files each level of each regrouping writes, as planned:
        {"partitions": (mappers' files, regroup steps' files), "buckets": (…)}."""
        assert self.partition_sizes is not None and self.bucket_sizes is not None
        return {
            "partitions": level_files(self.partitions, self.partition_sizes),
            "buckets": level_files(self.buckets, self.bucket_sizes),
        }

    def spill_files(self) -> tuple[int, int]:
        """About how many spill files both regroupings write: as planned, and on one level."""
        planned = one_level = 0
        for routing, sizes in (
            (self.partitions, self.partition_sizes),
            (self.buckets, self.bucket_sizes),
        ):
            assert sizes is not None
            planned += spill_files(routing, sizes)
            one_level += spill_files(Routing(routing.keys), sizes)
        return planned, one_level


def plan_routes(config: ExamplesConfig, layout: Layout, inputs: list[DocumentsInput]) -> Routes:
    """One level or two for each regrouping, from the manifests and flags alone."""
    partition_keys = [
        PartitionKey(split, dupe_pass, partition)
        for split, split_layout in layout.splits.items()
        for dupe_pass in range(config.dupe_factor)
        for partition in range(split_layout.partitions)
    ]
    bucket_keys = [
        BucketKey(output, bucket)
        for output, buckets in layout.buckets.items()
        for bucket in range(buckets)
    ]
    token_bytes = _split_token_bytes(config, inputs, layout.id_width)
    documents_files = sum(len(i.manifest.files) for i in inputs)
    spilled_documents = sum(b for _, b in token_bytes.values()) * config.dupe_factor
    examples = sum(
        _example_bytes(config, b, length)
        for _, b in token_bytes.values()
        for length in config.max_seq_lengths
    )
    budgets = (config.spill_budget_mb << 20, config.regroup_budget_mb << 20)
    partition_sizes = SpillSizes(
        documents_files,
        spilled_documents / max(1, documents_files),
        spilled_documents / len(partition_keys),
        *budgets,
    )
    bucket_sizes = SpillSizes(
        len(partition_keys), examples / len(partition_keys), examples / len(bucket_keys), *budgets
    )
    return Routes(
        plan_routing(partition_keys, partition_sizes, config.shuffle_levels),
        plan_routing(bucket_keys, bucket_sizes, config.shuffle_levels),
        partition_sizes,
        bucket_sizes,
    )
