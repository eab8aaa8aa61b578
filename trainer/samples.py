"""A sample between its read and its batch: the carrier (`RawSample`, `Sample`), what the
training loader holds until a batch takes them (`HeldSamples`, read by `StreamReader`), the
header checked (`decode_samples`, schemas/examples.py), evaluation's grouping
(`batch_samples`). trainer/data.py re-exports these.

**Held as blocks.** A training read (a window of the epoch's order, thousands of samples)
keeps the samples in the bytes of the blocks they came in, with where each one lies in them:
a few numpy arrays, no object per sample. A sample's (key, bytes, shard) tuple is made by
`HeldSamples.pick` just before its micro-batch is decoded, in the order the batch takes them,
and let go with the batch: the many small objects of a window are never all alive at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from pipelines.io import storage
from pipelines.io.retry import ResumingStream, RetryPolicy, range_opener
from pipelines.io.shards import SampleBlock, ShardReadError, iter_tar_blocks, load_blocks
from pipelines.io.shards.source import read_listed_blocks
from schemas.examples import ExampleDecodeError, ExampleHeader, read_header
from schemas.shards import block_table_path
from trainer.source import ShardEntry


class RawSample(NamedTuple):
    """A sample as `read_samples` hands it out, its fields named."""

    index: int  # the sample's key: its position in its split
    data: bytes
    shard: str


# A sample (key, bytes, shard): a RawSample, or the plain tuple `HeldSamples.pick` makes for
# a training micro-batch (untracked by the garbage collector after its first pass, where a
# RawSample, a tuple subclass, is gone over in every full collection). Decoding and
# collating index it, so either kind goes through them as it is.
Sample = tuple[int, bytes, str]
Decoded = tuple[Sample, ExampleHeader]


def decode_samples(samples: Iterable[Sample]) -> Iterator[Decoded]:
    """Each sample's header, checked; a bad sample stops the run naming its shard."""
    for sample in samples:
        try:
            yield sample, read_header(sample[1])
        except ExampleDecodeError:
            # Read again for the message with the sample's key: its text is made only for
            # the one bad sample, not for every good one.
            try:
                read_header(sample[1], f"{sample[0]:012d}")
            except ExampleDecodeError as error:
                raise ShardReadError(f"{sample[2]}: {error}") from error
            raise


def batch_samples(
    decoded: Iterable[Decoded], batch_size: int, batches: int
) -> Iterator[list[Decoded]]:
    """Groups of `batch_size` (the last one short only when not dropping)."""
    group: list[Decoded] = []
    made = 0
    for item in decoded:
        group.append(item)
        if len(group) == batch_size:
            yield group
            made += 1
            group = []
            if made == batches:
                return
    if group and made < batches:
        yield group


class HeldSamples:
    """Samples held in their blocks' bytes: sample i is (keys[i],
    blocks[owner[i]][starts[i]:ends[i]], shards[owner[i]]). `pick` makes those tuples;
    `select` and `join` reorder and combine without making any."""

    __slots__ = ("blocks", "ends", "keys", "owner", "shards", "starts")

    def __init__(
        self,
        blocks: list[bytes],
        shards: list[str],
        owner: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        keys: np.ndarray,
    ) -> None:
        self.blocks, self.shards = blocks, shards  # one each a block
        self.owner, self.starts, self.ends, self.keys = owner, starts, ends, keys

    def __len__(self) -> int:
        return len(self.keys)

    def pick(self, at: np.ndarray | slice) -> list[Sample]:
        """The samples at `at` (indices or a slice), as (key, bytes, shard) tuples."""
        blocks, shards = self.blocks, self.shards
        return [
            (key, blocks[block][start:end], shards[block])
            for key, block, start, end in zip(
                self.keys[at].tolist(),
                self.owner[at].tolist(),
                self.starts[at].tolist(),
                self.ends[at].tolist(),
                strict=True,
            )
        ]

    def select(self, at: np.ndarray) -> HeldSamples:
        """The samples at `at`, in that order: the same blocks, held as they are."""
        return HeldSamples(
            self.blocks, self.shards, self.owner[at], self.starts[at], self.ends[at], self.keys[at]
        )

    @staticmethod
    def join(parts: Sequence[HeldSamples]) -> HeldSamples:
        """The parts' samples, one after the other."""
        if len(parts) == 1:
            return parts[0]
        bases = np.cumsum([0, *(len(part.blocks) for part in parts[:-1])])
        return HeldSamples(
            [block for part in parts for block in part.blocks],
            [shard for part in parts for shard in part.shards],
            np.concatenate([part.owner + base for part, base in zip(parts, bases, strict=True)]),
            np.concatenate([part.starts for part in parts]),
            np.concatenate([part.ends for part in parts]),
            np.concatenate([part.keys for part in parts]),
        )


class _Holding:
    """HeldSamples in the making: the wanted samples of each block, as the blocks come."""

    def __init__(self) -> None:
        self.blocks: list[bytes] = []
        self.shards: list[str] = []
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, blocks: list[SampleBlock], shard: str, first: int, wanted: np.ndarray) -> None:
        """Take the samples at `wanted` (sorted offsets in the shard) that `blocks` hold, the
        first of them at offset `first` of the shard."""
        if all(block.starts is None for block in blocks):  # 1.x members: a sample each
            self._add_members(blocks, shard, first, wanted)
            return
        for block in blocks:
            if block.starts is None or block.ends is None or block.first is None:
                self._add_members([block], shard, first, wanted)
                first += 1
                continue
            count = len(block.starts)
            low, high = np.searchsorted(wanted, (first, first + count))
            if low < high:
                chosen = wanted[low:high] - first
                owner = np.full(len(chosen), len(self.blocks), dtype=np.int64)
                keys = chosen + block.first
                self.parts.append((owner, block.starts[chosen], block.ends[chosen], keys))
                self.blocks.append(block.data)
                self.shards.append(shard)
            first += count

    def _add_members(
        self, members: list[SampleBlock], shard: str, first: int, wanted: np.ndarray
    ) -> None:
        """1.x members, one sample each: the wanted ones, each its own block."""
        low, high = np.searchsorted(wanted, (first, first + len(members)))
        taken = [members[i] for i in (wanted[low:high] - first).tolist()]
        if not taken:
            return
        count = len(taken)
        owner = np.arange(len(self.blocks), len(self.blocks) + count, dtype=np.int64)
        ends = np.array([len(member.data) for member in taken], np.int64)
        keys = np.array([int(member.key) for member in taken], np.int64)
        self.parts.append((owner, np.zeros(count, np.int64), ends, keys))
        self.blocks += [member.data for member in taken]
        self.shards += [shard] * count

    def held(self) -> HeldSamples:
        if not self.parts:
            empty = np.zeros(0, np.int64)
            return HeldSamples([], [], empty, empty, empty, empty)
        columns = zip(*self.parts, strict=True)
        owner, starts, ends, keys = (np.concatenate(column) for column in columns)
        return HeldSamples(self.blocks, self.shards, owner, starts, ends, keys)


class StreamReader:
    """Samples of an epoch's stream (its shards concatenated in their epoch order) by their
    offset in it: of each shard, only the blocks that hold wanted samples, one byte range
    per run of consecutive blocks, each block verified. A shard's block table is read once
    per reader (one epoch of one worker). A shard without a manifest is read from its start
    up to the last sample wanted."""

    def __init__(self, shards: list[ShardEntry], policy: RetryPolicy, verify: bool) -> None:
        self.shards, self.policy, self.verify = shards, policy, verify
        self.starts = np.cumsum([0, *(shard.samples for shard in shards)])
        self._loaded: dict[int, ShardEntry] = {}

    def read(self, wanted: np.ndarray) -> HeldSamples:
        """The samples at `wanted` (sorted, unique stream offsets), in that order, held in
        their blocks."""
        numbers = np.searchsorted(self.starts, wanted, side="right") - 1
        shard_numbers, firsts = np.unique(numbers, return_index=True)
        into = _Holding()
        for number, local in zip(shard_numbers.tolist(), np.split(wanted, firsts[1:]), strict=True):
            shard = self._entry(number)
            local = local - self.starts[number]
            per_block = shard.samples
            if self.verify and shard.info is not None and shard.info.blocks:
                per_block = shard.info.block_samples
            blocks = local // per_block
            for run in np.split(local, np.flatnonzero(np.diff(blocks) > 1) + 1):
                low, high = int(run[0]), int(run[-1]) + 1
                for first, members in shard_blocks(shard, low, high, self.policy, self.verify):
                    into.add(members, shard.url, first, run)
        return into.held()

    def _entry(self, number: int) -> ShardEntry:
        """The shard's entry, its block table loaded (and checked) the first time."""
        entry = self._loaded.get(number)
        if entry is None:
            entry = shard = self.shards[number]
            info = shard.info
            if (
                self.verify
                and info is not None
                and info.block_table is not None
                and not info.blocks
            ):
                table = range_opener(block_table_path(shard.url), self.policy)
                entry = ShardEntry(shard.url, shard.samples, load_blocks(table, shard.url, info))
            self._loaded[number] = entry
        return entry


def shard_blocks(
    shard: ShardEntry, low: int, high: int, policy: RetryPolicy, verify: bool = True
) -> Iterator[tuple[int, list[SampleBlock]]]:
    """The blocks that hold the shard's samples [low, high), a list at a time with the offset
    of its first sample in the shard. A shard the manifest lists (`verify`) is read by byte
    range, a verified block at a time (`read_listed_blocks`, after its block table; a table
    loaded already is not read again); a shard named without a manifest has nothing to be
    checked against and streams from its start (`open_source` warned about it)."""
    if verify and shard.info is not None:
        yield from read_listed_blocks(shard.url, shard.info, low, high - low, policy)
        return
    size = shard.bytes
    if size is None and not storage.is_url(shard.url):
        size = os.path.getsize(shard.url)  # bounds what a tar header may claim
    with ResumingStream(shard.url, size, policy) as stream:
        first = 0
        for block in iter_tar_blocks(stream, shard.url, size=size):
            yield first, [block]
            first += block.count
            if first >= high:
                return
    raise ShardReadError(
        f"{shard.url}: {first} samples, the manifest says {shard.samples}; the "
        "shard was changed after the manifest was written: rebuild it"
    )
