"""Step 3 of the graph: each shuffle bucket sorted by place, cut into the equal shards of its
split; a shard that straddles two buckets is written from its pieces in a last step."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.progress import EXAMPLES_WRITTEN, SHARDS_WRITTEN, StageCounters
from pipelines.beam.shards import write_shard
from pipelines.beam.spill import pack_example, unpack_examples
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.keys import BucketKey
from schemas.examples import sample_key
from schemas.shards import shard_name

PIECES = "pieces"  # the tagged output of (shard path, piece file) for straddling shards
COUNTERS = (EXAMPLES_WRITTEN, SHARDS_WRITTEN)  # Beam counters of both shard-writing steps


def shard_bounds(total: int, shards: int) -> list[tuple[int, int]]:
    """Positions [start, end) of each shard: sizes differ by at most one."""
    return [(k * total // shards, (k + 1) * total // shards) for k in range(shards)]


def shard_count(total: int, samples_per_shard: int) -> int:
    return math.ceil(total / samples_per_shard) if total else 0


class OrderBucketFn(beam.DoFn):
    """One shuffle bucket: sort by place, write the shards inside it, hand on edge pieces."""

    def __init__(self, config: ExamplesConfig) -> None:
        self._config = config

    def setup(self) -> None:
        self._counters = StageCounters(COUNTERS)

    def process(self, element: tuple[tuple, list[str]], counts: dict[tuple, int]) -> Iterator[Any]:
        key, paths = BucketKey(*element[0]), element[1]
        siblings = {BucketKey(*k).bucket: n for k, n in counts.items() if k[0] == key.output}
        total = sum(siblings.values())
        start = sum(n for bucket, n in siblings.items() if bucket < key.bucket)
        records = [
            r for path in sorted(paths) for r in unpack_examples(files.read_file(path), path)
        ]
        records.sort()  # by place, then bytes: a total order
        end = start + len(records)
        for index, (low, high) in enumerate(
            shard_bounds(total, shard_count(total, self._config.samples_per_shard))
        ):
            first, last = max(low, start), min(high, end)
            if first >= last:
                continue
            samples = [(sample_key(p), records[p - start][1]) for p in range(first, last)]
            relative = f"{key.output}/{shard_name(index)}"
            if (first, last) == (low, high):
                shard = asdict(write_shard(self._config.output, relative, samples))
                self._counters.add(EXAMPLES_WRITTEN, len(samples))
                self._counters.add(SHARDS_WRITTEN)
                yield shard
            else:
                yield beam.pvalue.TaggedOutput(
                    PIECES, (relative, self._piece(key, relative, samples))
                )
        self._counters.flush()

    def _piece(self, key: BucketKey, relative: str, samples: list[tuple[str, bytes]]) -> str:
        piece = files.join(self._config.work_dir, "pieces", relative, f"b{key.bucket:05d}.bin")
        files.write_file(piece, b"".join(pack_example(int(k), data) for k, data in samples))
        return piece


class JoinPiecesFn(beam.DoFn):
    """A shard that straddles buckets: its pieces in order, written as one shard."""

    def __init__(self, config: ExamplesConfig) -> None:
        self._config = config

    def setup(self) -> None:
        self._counters = StageCounters(COUNTERS)

    def process(self, element: tuple[str, list[str]]) -> Iterator[dict[str, Any]]:
        relative, paths = element
        samples = [
            (sample_key(position), data)
            for path in sorted(paths)
            for position, data in unpack_examples(files.read_file(path), path)
        ]
        samples.sort()
        shard = asdict(write_shard(self._config.output, relative, samples))
        self._counters.add(EXAMPLES_WRITTEN, len(samples))
        self._counters.add(SHARDS_WRITTEN)
        self._counters.flush()
        yield shard
