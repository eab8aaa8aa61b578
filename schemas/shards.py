"""The manifest of a shards directory (`DIR/manifest.json`), written last.

Layout of `DIR` (`bertkit examples`):
    seq128/train/shard-000000.tar …    WebDataset shards (schemas/examples.py), balanced
    seq128/heldout/shard-000000.tar …  held-out documents' examples
    seq512/…                           one tree per --max-seq-length
    _rejects/rejects-*.jsonl           documents or instances that made no example, and why
    manifest.json                      this record

A shard's path names its place: `DIR/seqN/SPLIT/shard-*.tar` is listed in `DIR/manifest.json`
as `seqN/SPLIT/shard-*.tar` (`SHARD_DEPTH` levels below the manifest; `shards_by_path`).

A reader checks `schema_version`, `vocab.sha256` and `max_seq_length` before it trusts a
shard, and a shard's sha256 before it trusts its bytes. Holds no timestamps or host names:
the same inputs and flags give the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from schemas.checks import (
    RecordError,
    need_dict,
    need_int,
    need_relative_path,
    need_sha256,
    need_str,
)
from schemas.examples import EXAMPLE_MEMBER, EXAMPLES_SCHEMA_VERSION

SHARD_DEPTH = 3  # seqN/SPLIT/shard-NNNNNN.tar: a shard's manifest is three levels up


@dataclass(frozen=True, slots=True)
class ShardInfo:
    path: str  # relative to the manifest's directory, e.g. "seq128/train/shard-000000.tar"
    samples: int
    bytes: int
    sha256: str
    first_key: str  # keys are positions in the split: shard i holds first_key … + samples - 1


@dataclass(slots=True)
class SplitShards:
    samples: int
    not_next: int  # examples with next_sentence_label = 1
    tokens: int  # sum of input lengths
    predictions: int  # sum of masked_lm_positions lengths
    shards: list[ShardInfo]


def _check_split(split: SplitShards, where: str) -> None:
    for name in ("samples", "not_next", "tokens", "predictions"):
        need_int(getattr(split, name), f"{where}.{name}")
    for index, info in enumerate(split.shards):
        field = f"{where}.shards[{index}]"
        need_relative_path(info.path, f"{field}.path")
        need_int(info.samples, f"{field}.samples")
        need_int(info.bytes, f"{field}.bytes", 1024)  # a tar ends with two 512-byte blocks
        need_sha256(info.sha256, f"{field}.sha256")
        need_str(info.first_key, f"{field}.first_key")
    listed = sum(info.samples for info in split.shards)
    if listed != split.samples:
        raise RecordError(
            f"{where}: its shards hold {listed} samples, `samples` says {split.samples}"
        )


@dataclass(slots=True)
class SequenceOutput:
    max_seq_length: int
    max_predictions_per_seq: int
    splits: dict[str, SplitShards]  # "train", "heldout"


@dataclass(slots=True)
class ShardsManifest:
    vocab: dict[str, Any]  # {"path", "sha256", "size", "cased"}
    inputs: list[dict[str, Any]]  # documents directories: {"path", "manifest_sha256", …}
    config: dict[str, Any]  # every flag, resolved
    layout: dict[str, Any]  # derived sizes: partner groups, partitions, buckets, id width
    deviations: list[str]  # where the algorithm deliberately differs from Google's
    counts: dict[str, int]  # documents, sentences, tokens, per split, …
    dropped: dict[str, int]  # reason → count (filtered on purpose, e.g. empty sentences)
    rejected: dict[str, int]  # reason → count (see _rejects/)
    outputs: dict[str, SequenceOutput]  # "seq128" → …
    rejects_files: list[str] = field(default_factory=list)
    member: str = EXAMPLE_MEMBER
    record: str = "PretrainingExample"
    schema_version: str = EXAMPLES_SCHEMA_VERSION
    bertkit_version: str = "0.1.0"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ShardsManifest:
        raw = json.loads(text)
        raw["outputs"] = {
            name: SequenceOutput(
                max_seq_length=out["max_seq_length"],
                max_predictions_per_seq=out["max_predictions_per_seq"],
                splits={
                    split: SplitShards(
                        **{**shards, "shards": [ShardInfo(**s) for s in shards["shards"]]}
                    )
                    for split, shards in out["splits"].items()
                },
            )
            for name, out in raw["outputs"].items()
        }
        manifest = cls(**raw)
        manifest.validate()
        return manifest

    def validate(self) -> None:
        """Types, ranges and paths of every field a reader relies on (schemas/checks.py)."""
        need_dict(self.vocab, "vocab")
        if "size" in self.vocab:
            need_int(self.vocab["size"], "vocab.size", 1)
        if "sha256" in self.vocab:
            need_sha256(self.vocab["sha256"], "vocab.sha256")
        for name, output in self.outputs.items():
            where = f"outputs.{name}"
            need_int(output.max_seq_length, f"{where}.max_seq_length", 8, 65535)
            need_int(output.max_predictions_per_seq, f"{where}.max_predictions_per_seq", 1)
            for split, shards in output.splits.items():
                _check_split(shards, f"{where}.splits.{split}")

    def shards_by_path(self) -> dict[str, tuple[str, str, ShardInfo]]:
        """Relative shard path → (output name, split, info), for finding a shard named alone."""
        return {
            info.path: (name, split, info)
            for name, output in self.outputs.items()
            for split, shards in output.splits.items()
            for info in shards.shards
        }

    def all_shards(self) -> list[ShardInfo]:
        return [
            shard
            for out in self.outputs.values()
            for split in out.splits.values()
            for shard in split.shards
        ]
