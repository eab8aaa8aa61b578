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
from pipelines.examples.keys import output_name
from pipelines.io.hashing import stable_hash64, unit_fraction
from schemas import MANIFEST_NAME
from schemas.examples import id_width_for_vocab

# Planning estimates: BERT's uncased WordPiece makes ~1 token per 4.6 bytes of English text;
# an example costs its ids plus ~60 bytes of predictions, header and provenance.
_BYTES_PER_TOKEN_ESTIMATE = 4.6
_EXAMPLE_OVERHEAD_ESTIMATE = 60


def read_documents_inputs(directories: Sequence[str]) -> list[DocumentsInput]:
    """Each documents directory's manifest, checked; the stage refuses what it cannot use."""
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
    text_bytes = sum(i.manifest.counts.get("text_bytes", 0) for i in inputs)
    id_width = id_width_for_vocab(vocab_size)
    shares = {"train": 1 - config.heldout_fraction, "heldout": config.heldout_fraction}
    splits, buckets = {}, {}
    for split, share in shares.items():
        split_docs = documents * share
        groups = max(1, round(split_docs / config.partner_group_docs))
        token_bytes = text_bytes * share / _BYTES_PER_TOKEN_ESTIMATE * id_width
        partitions = max(1, min(groups, math.ceil(token_bytes / (config.work_partition_mb << 20))))
        splits[split] = SplitLayout(groups, partitions)
        for length in config.max_seq_lengths:
            example_bytes = (
                token_bytes * config.dupe_factor * (1 + _EXAMPLE_OVERHEAD_ESTIMATE / length)
            )
            buckets[output_name(length, split)] = max(
                1, math.ceil(example_bytes / (config.bucket_mb << 20))
            )
    return Layout(id_width, splits, buckets)


def split_of(document_id: str, heldout_fraction: float) -> str:
    """Held-out documents by a hash of the id alone: the same for every seed and length."""
    return "heldout" if unit_fraction("heldout", document_id) < heldout_fraction else "train"
