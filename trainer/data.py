"""Streaming input: WebDataset shards from a disk or a URL → collated BERT batches.

The stages of training, each a small function, in the order a sample goes through them:

    open_source(spec)        the shard list (pipelines/io/shards/source.py, shared with
                             `inspect`): a manifest (a shards directory, its
                             manifest.json, local or a URL) or a brace pattern of shards
    epoch_shards             shard order, shuffled per epoch from (seed, epoch)
    EpochOrder               the epoch's global order: which sample each position holds,
                             shuffled in windows of --shuffle-buffer samples
                             (trainer/order.py, where the design is told in full)
    worker_units             the micro-batches this rank's worker makes, and their
                             positions in the order (the round-robin below)
    StreamReader             read the samples those positions hold: only the blocks that
                             hold them, by byte range, each block's sha256 (from the
                             shard's block table, itself checked) matched before any of its
                             samples goes on (own ustar reader, transient errors retried);
                             held in their blocks' bytes (HeldSamples, trainer/samples.py),
                             a micro-batch's samples made just before it is decoded
    decode_samples           check each sample's header (trainer/samples.py)
    bucket                   (--bucket-window W) sort each group of W global batches'
                             samples of one micro index by length (trainer/order.py)
    collate                  check every field, pad to a multiple of 8 → the tensors of
                             schemas/batch.py (trainer/collate.py); under torch.compile
                             on to the fixed shapes (pad_to), before the batch is pinned

**Elastic.** The order is a function of (seed, epoch), the global batch G (micro-batch ×
processes × accumulation), --shuffle-buffer and --bucket-window, not of how G is made up:
global batch g is positions [g·G, (g+1)·G) of it, and the
micro-batch of accumulation step a on rank r is slots (a·world + r)·m + [0, m) of that. So a
run stopped on 2 processes and resumed on 1 or 4 with the same G (and the same micro-batch
when bucketing) sees the global batches it would have seen without the stop. Every rank gets
the same number of micro-batches: n·A, n = N // G the global batches of an epoch's N
samples (the last N mod G of the epoch's shard order are dropped), so DDP never waits on a
rank that ran out (webdataset #188 #225).

**Workers.** A rank's micro-batch i (counted from where the reading starts or resumes)
comes from worker i mod K, which makes only those; torch's DataLoader takes batches from its
workers round-robin from worker 0, in exactly that order. `batches()` keeps its workers from
one epoch into the next, each going on with its micro-batches of the next epoch (its turn
in the epoch's round robin shifted by the micro-batches before it: `epoch_turn`), so nothing
restarts at a boundary; `epoch()` (evaluation, one epoch) starts its workers and ends them.
A worker reads a window (L global batches, whole bucket groups when bucketing) at a time,
before it makes the window's first micro-batch, and holds at most the window's samples its
micro-batches need (with bucketing, those of the groups they come from). Any worker can make
any micro-batch: nothing about the workers is in the order or the checkpoint.

**Resume.** `DataPosition(epoch, global_batches)` is all the state, the same on every rank
and for any world size. A resume starts at global batch `global_batches` directly (the
positions are computed, the blocks they need read): nothing is replayed. A bucketed resume
reads the group it resumes in whole, to sort it.

**What it costs.** A block is read by each of the rank's workers whose micro-batches draw
on it, and by two ranks where the runs of two micro indices meet inside it
(trainer/order.py, Locality): up to --num-workers times the bytes and sha256 work of one
reader per rank, where a worker of a contiguous split read only its own bytes. The rank's
share of the blocks is still 1/world of them (plus the shared ones at run boundaries).

**Evaluation** (`drop_last=False`) reads every sample once, in the shards' stored order, or
its first `limit` samples (--eval-batches × micro-batch): rank r takes a contiguous range of
them (`split_by_node`, the ranks within one batch of each other), each worker a contiguous
part of the rank's batches (`split_by_worker`). The samples read are the same for any
number of ranks.

**Recording** (a debugging aid, off by default): with the environment variable
BERTKIT_RECORD_KEYS=DIR, each rank appends a JSON line per training micro-batch it hands out
to DIR/keys-rank-NNNNN.jsonl: {"epoch", "global_batch", "step" (a), "rank", "world_size",
"keys"}, the sample keys (RawSample.index) in the batch's order (tests/test_elastic.py); a
mix's lines have "sources" beside them (trainer/record_keys.py).

**A mix** of sources (`MixedSource`, trainer/mix.py, where its order is told): the same
stages per source, each source in its own one-source order; `mixed_train_stream` takes each
micro-batch's (source, position) pairs from the mix's order and their samples from whole
windows of the sources' orders, read once per worker.

    python -m trainer.data out/demo/shards --batch-size 32   # print a few batches' shapes
"""

from __future__ import annotations

import argparse
import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from pipelines.io.retry import RetryPolicy
from trainer.collate import FixedShape, SampleLimits, collate, pad_batch
from trainer.masking import DynamicMasking
from trainer.mix import MixCursor, MixedSource, MixOrder, SourceWindows, check_mix
from trainer.order import (  # noqa: F401 (worker_batches: evaluation's plan, re-exported)
    READ_SAMPLES,
    DataPosition,
    EpochOrder,
    RankShare,
    Segment,
    bucket,
    bucket_deal,
    epoch_shards,
    epoch_turn,
    group_positions,
    micro_positions,
    rank_batches,
    split_by_node,
    split_by_worker,
    worker_batches,
    worker_units,
)
from trainer.record_keys import RECORD_KEYS_ENV, KeyRecord  # noqa: F401 (re-exported)
from trainer.samples import (  # noqa: F401 (RawSample, Decoded, StreamReader: re-exported)
    Decoded,
    HeldSamples,
    RawSample,
    Sample,
    StreamReader,
    batch_samples,
    decode_samples,
    shard_blocks,
)

# The shard list, the first stage, is opened by pipelines/io/shards/source.py (shared with
# `inspect`) and checked by trainer/source.py; re-exported here so the loader's callers find
# every stage through this module.
from trainer.source import (  # noqa: F401
    DataConfigError,
    DataSource,
    ShardEntry,
    check_source,
    open_source,
    source_of,
)
from trainer.workers import WorkerPool

_LOG = logging.getLogger(__name__)

# --------------------------------------------------------------------------- reading


def read_samples(
    segments: Iterable[Segment],
    policy: RetryPolicy,
    verify: bool = True,
    make: Callable = RawSample,
) -> Iterator[Sample]:
    """Stream the segments' samples one by one, each only after the sha256 of its block
    matched (`shard_blocks`, which says how a shard is read)."""
    for segment in segments:
        url, stop = segment.shard.url, segment.skip + segment.take
        for first, blocks in shard_blocks(segment.shard, segment.skip, stop, policy, verify):
            for block in blocks:
                wanted = block.samples()[max(0, segment.skip - first) : stop - first]
                for key, data in wanted:
                    yield make(int(key), data, url)
                first += block.count


# --------------------------------------------------------------------------- the streams


@dataclass(frozen=True, slots=True)
class LoaderConfig:
    batch_size: int  # the micro-batch: sequences per rank per forward pass
    rank: int = 0
    world_size: int = 1
    num_workers: int = 0
    seed: int = 12345
    shuffle: bool = True
    shuffle_buffer: int = 10_000  # samples shuffled together (whole global batches); 0/1 off
    bucket_window: int = 0  # global batches sorted by length together; 0 = no bucketing
    pad_to: FixedShape | None = None  # torch.compile's shapes, padded to in the worker
    drop_last: bool = True  # training; False: evaluation (every sample once, stored order)
    verify: bool = True
    pin_memory: bool = False
    prefetch_factor: int = 4
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    masking: DynamicMasking | None = None  # masks drawn afresh per epoch; None: the stored ones
    accumulation: int = 1  # micro-batches per optimizer step on each rank
    # Evaluation only: read the first `limit` samples of the stored order (the ranks share
    # them), so a partial evaluation holds the same samples on any number of ranks.
    limit: int | None = None

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size * self.accumulation


def _micro_batches(
    order: EpochOrder,
    micro_size: int,
    items: list[tuple[int, int]],
    window: int,
    reader: StreamReader,
) -> tuple[HeldSamples, list[np.ndarray]]:
    """The samples of the micro-batches `items` ((global batch, micro index) pairs), read
    at once and held in their blocks, and each micro-batch's places among them; with
    bucketing (`window` global batches a group) from whole groups, sorted. The caller makes
    a micro-batch's samples (`HeldSamples.pick`) just before it decodes them."""
    m = micro_size
    if not window:
        chunks = [micro_positions(order, batch, micro, m) for batch, micro in items]
    else:
        groups = sorted({(batch // window, micro) for batch, micro in items})
        spans = [
            (group * window, min(window, order.batches - group * window)) for group, _ in groups
        ]
        chunks = [
            group_positions(order, first, count, micro, m).ravel()
            for (_, micro), (first, count) in zip(groups, spans, strict=True)
        ]
    wanted, inverse = np.unique(order.sources(np.concatenate(chunks)), return_inverse=True)
    held = reader.read(wanted)
    inverse = inverse.reshape(-1)
    if not window:
        return held, [inverse[i * m : (i + 1) * m] for i in range(len(items))]
    rows: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
    offset = 0
    for (group, micro), (first, count) in zip(groups, spans, strict=True):
        places = inverse[offset : offset + count * m]
        lengths = [header.n_tokens for _, header in decode_samples(held.pick(places))]
        chosen = bucket(np.array(lengths), count, bucket_deal(order, group, count))
        rows[group, micro] = (first, places[chosen])
        offset += count * m
    result = []
    for batch, micro in items:
        first, places = rows[batch // window, micro]
        result.append(places[batch - first])
    return held, result


def train_stream(
    source: DataSource, config: LoaderConfig, epoch: int, start: int, worker: int, workers: int
) -> Iterator[dict[str, torch.Tensor]]:
    """One worker's micro-batches of one training epoch from global batch `start` on."""
    shards = epoch_shards(source.shards, config.seed, epoch, config.shuffle)
    order = EpochOrder.of(
        source.samples,
        config.global_batch,
        config.shuffle_buffer,
        config.shuffle,
        config.seed,
        epoch,
        config.bucket_window,
    )
    share = RankShare(config.batch_size, config.world_size, config.rank, config.accumulation)
    window = config.bucket_window
    reader = StreamReader(shards, config.retry, config.verify)
    limits = SampleLimits.of(source)
    for items in worker_units(order, share, order.window_batches, start, worker, workers):
        held, places = _micro_batches(order, config.batch_size, items, window, reader)
        for at in places:
            group = list(decode_samples(held.pick(at)))
            batch = collate(group, limits, config.masking, config.seed, epoch)
            yield batch if config.pad_to is None else pad_batch(batch, config.pad_to)


MixReading = tuple[MixCursor, SourceWindows]


def mix_reading(source: MixedSource, config: LoaderConfig) -> MixReading:
    """A reader of a mix's samples: where it is in the mix's order, and the windows of the
    sources' orders it holds, each source epoch read by a StreamReader of its shards."""

    def open_reader(number: int, epoch: int) -> Callable[[np.ndarray], HeldSamples]:
        shards = epoch_shards(source.sources[number].shards, config.seed, epoch, config.shuffle)
        return StreamReader(shards, config.retry, config.verify).read

    order = MixOrder.of(source, config.global_batch, config.seed)
    sources = SourceWindows(
        source, order, config.shuffle_buffer, config.shuffle, config.seed, open_reader
    )
    return MixCursor(order), sources


def mixed_train_stream(
    source: MixedSource,
    config: LoaderConfig,
    epoch: int,
    start: int,
    worker: int,
    workers: int,
    reading: MixReading | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """One worker's micro-batches of a mix's nominal epoch from global batch `start` on: each
    micro-batch's (source, position) pairs from the mix's order, its samples from whole
    windows of the sources' own orders (trainer/mix.py). `reading`: the one of the epoch
    before, in this process (its windows go on into this epoch; a new one reads them again)."""
    cursor, windows = reading or mix_reading(source, config)
    order = cursor.order
    share = RankShare(config.batch_size, config.world_size, config.rank, config.accumulation)
    first = epoch * order.batches_per_epoch  # the nominal epoch's first absolute batch
    limits = SampleLimits.of(source.sources[0])  # the sources agree (trainer/setup.py)
    unit = max(1, READ_SAMPLES // config.global_batch)
    m = config.batch_size
    for items in worker_units(order, share, unit, start, worker, workers):
        batches, micros = [first + batch for batch, _ in items], [micro for _, micro in items]
        numbers, positions, floor = cursor.micro_batches(batches, micros, m)
        held, source_epochs = windows.take(numbers, positions, floor)
        for at in range(0, len(held), m):
            group = list(decode_samples(held.pick(slice(at, at + m))))
            mixed = (numbers[at : at + m], source_epochs[at : at + m])
            made = collate(group, limits, config.masking, config.seed, epoch, mixed)
            yield made if config.pad_to is None else pad_batch(made, config.pad_to)


def eval_stream(
    source: DataSource, config: LoaderConfig, epoch: int, worker: int, workers: int
) -> Iterator[dict[str, torch.Tensor]]:
    """One worker's batches of an evaluation pass: its contiguous part, in stored order."""
    shards = epoch_shards(source.shards, config.seed, epoch, config.shuffle)
    rank_segments, batches = split_by_node(
        shards, config.rank, config.world_size, config.batch_size, False, config.limit
    )
    segments, mine = split_by_worker(rank_segments, batches, worker, workers, config.batch_size)
    decoded = decode_samples(read_samples(segments, config.retry, config.verify))
    limits = SampleLimits.of(source)
    for group in batch_samples(decoded, config.batch_size, mine):
        batch = collate(group, limits, config.masking, config.seed, epoch)
        yield batch if config.pad_to is None else pad_batch(batch, config.pad_to)


class _EpochDataset(IterableDataset):
    """The DataLoader's view of the input: each worker process runs its stream of one epoch
    from `position`, or (`endless`, training) of every epoch from there on."""

    def __init__(
        self,
        source: DataSource | MixedSource,
        config: LoaderConfig,
        position: DataPosition,
        reading: MixReading | None = None,
        endless: bool = False,
    ) -> None:
        self.source, self.config, self.position = source, config, position
        self.reading, self.endless = reading, endless  # reading: a mix's, kept across epochs

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        workers = info.num_workers if info is not None else 1
        worker = info.id if info is not None else 0
        epoch, start = self.position.epoch, self.position.global_batches
        if not self.config.drop_last:
            yield from eval_stream(self.source, self.config, epoch, worker, workers)
            return
        stream: Callable[..., Iterator[dict[str, torch.Tensor]]] = train_stream
        if isinstance(self.source, MixedSource):  # one reading for all this worker's epochs
            reading = self.reading or mix_reading(self.source, self.config)
            stream = functools.partial(mixed_train_stream, reading=reading)
        accumulation = self.config.accumulation
        per_epoch = self.source.samples // self.config.global_batch * accumulation
        before = 0  # the rank's micro-batches the workers made in the epochs before this one
        while True:
            turn = epoch_turn(worker, workers, before)
            yield from stream(self.source, self.config, epoch, start, turn, workers)
            if not self.endless:
                return
            before += per_epoch - start * accumulation
            epoch, start = epoch + 1, 0


# --------------------------------------------------------------------------- the loader


class PretrainingLoader:
    """Micro-batches for one rank, epoch after epoch, with the position to resume from.

    source = open_source("s3://bucket/shards")
    config = LoaderConfig(256, rank, world_size, accumulation=accumulation)
    with PretrainingLoader(source, config) as loader:
        for batch in loader.batches(DataPosition()):   # infinite; loader.position after each
            ...

    `source` may be a MixedSource (trainer/mix.py, training only): its batches come from
    its sources in its proportions, each micro-batch with SAMPLE_SOURCE, and an epoch is
    the mix's nominal one (floor(Σ N_k / G) global batches).

    `position` counts whole global batches: after a micro-batch that does not end its step,
    it still names the step's start (the trainer reads it between steps). The worker
    processes (trainer/workers.py) of `batches()` go on from epoch to epoch, `epoch()`'s end
    with it; all end with `close()`, their generator closed or dropped, or at exit.
    """

    def __init__(self, source: DataSource | MixedSource, config: LoaderConfig) -> None:
        if config.batch_size < 1:
            raise DataConfigError("--batch-size must be at least 1")
        if config.accumulation < 1:
            raise DataConfigError("accumulation must be at least 1 micro-batch a step")
        if config.bucket_window < 0:
            raise DataConfigError("--bucket-window must be 0 (off) or a number of global batches")
        self.source, self.config = source, config
        if isinstance(source, MixedSource):  # each of its sources makes a global batch
            check_mix(source, config.global_batch, config.bucket_window, config.drop_last)
        if config.drop_last:
            self.global_batches_per_epoch = source.samples // config.global_batch
            self.batches_per_epoch = self.global_batches_per_epoch * config.accumulation
        else:
            samples = source.samples if config.limit is None else min(source.samples, config.limit)
            self.batches_per_epoch = rank_batches(
                samples, config.world_size, config.batch_size, drop_last=False
            )[config.rank]
            self.global_batches_per_epoch = self.batches_per_epoch
        # An evaluation rank may have nothing to read (fewer held-out samples than ranks):
        # it adds zeros to the totals. Training needs a global batch.
        if self.batches_per_epoch == 0 and config.drop_last:
            raise DataConfigError(
                f"{source.manifest_url or source.shards[0].url}: {source.samples} {source.split} "
                f"samples make no global batch of {config.global_batch} ({config.batch_size} × "
                f"{config.world_size} ranks × {config.accumulation}); use a smaller batch or "
                "more data"
            )
        self.position = DataPosition()
        self._reading: MixReading | None = None  # a mix's, without workers: across epochs
        self._pools: list[WorkerPool] = []  # one per open generator that reads with workers
        self._record = KeyRecord.from_environment(config)

    def epoch(self, position: DataPosition) -> Iterator[dict[str, torch.Tensor]]:
        """The rest of one epoch from `position`; `self.position` follows each batch. With
        workers, they end when the epoch does, or when this generator is closed or dropped."""
        start = position.global_batches
        self.position = DataPosition(position.epoch, start)
        if start >= self.global_batches_per_epoch:
            return
        if start and not self.config.drop_last:
            raise DataConfigError("an evaluation pass reads from its start: position 0")
        yield from self._read(self.position, endless=False)

    def batches(self, position: DataPosition) -> Iterator[dict[str, torch.Tensor]]:
        """Epoch after epoch without end, starting at `position`: the same worker processes
        go on from one epoch into the next."""
        while not self.config.drop_last:  # evaluation's passes: each reads from its start
            yield from self.epoch(position)
            position = self.position = DataPosition(self.position.epoch + 1, 0)
        if position.global_batches >= self.global_batches_per_epoch:  # stopped at its end
            position = DataPosition(position.epoch + 1, 0)
        self.position = position
        yield from self._read(position, endless=True)

    def _read(self, position: DataPosition, endless: bool) -> Iterator[dict[str, torch.Tensor]]:
        """The micro-batches from `position` to its epoch's end (`endless`: and on, epoch
        after epoch), `self.position` following each."""
        reading = None
        if isinstance(self.source, MixedSource) and self.config.num_workers == 0:
            if self._reading is None:
                self._reading = mix_reading(self.source, self.config)
            reading = self._reading
        dataset = _EpochDataset(self.source, self.config, position, reading, endless)
        accumulation = self.config.accumulation if self.config.drop_last else 1
        per_epoch = self.global_batches_per_epoch * accumulation
        epoch, index = position.epoch, position.global_batches * accumulation
        pool = None
        if self.config.num_workers == 0:
            batches: Iterator[dict[str, torch.Tensor]] = iter(dataset)
        else:
            config = self.config
            batches = pool = WorkerPool(
                dataset, config.num_workers, config.seed, config.pin_memory, config.prefetch_factor
            )
            self._pools.append(pool)
        try:
            for batch in batches:
                if index == per_epoch:  # the next epoch's first, from the same workers
                    epoch, index = epoch + 1, 0
                self.position = DataPosition(epoch, (index + 1) // accumulation)
                if self._record is not None:
                    self._record.write(epoch, index, batch)
                index += 1
                yield batch
        finally:
            if pool is not None:
                pool.close()
                if pool in self._pools:  # not if close() ended it first
                    self._pools.remove(pool)

    def close(self) -> None:
        """End the worker processes of every generator still reading, if any, and let go of
        a mix's windows (idempotent)."""
        self._reading = None
        while self._pools:
            self._pools.pop().close()
        if self._record is not None:
            self._record.close()

    def __enter__(self) -> PretrainingLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("shards", help="shards directory, manifest.json or shard URL pattern")
    parser.add_argument("--split", default="train")
    parser.add_argument("--max-seq-length", type=int)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--batches", type=int, default=3, help="how many to print")
    args = parser.parse_args(argv)
    source = open_source(args.shards, args.split, args.max_seq_length)
    loader = PretrainingLoader(source, LoaderConfig(args.batch_size, num_workers=args.num_workers))
    print(
        f"{len(source.shards)} shards, {source.samples:,} samples, "
        f"{loader.batches_per_epoch:,} batches per epoch"
    )
    for number, batch in enumerate(loader.epoch(DataPosition())):
        print({name: tuple(tensor.shape) for name, tensor in batch.items()})
        if number + 1 == args.batches:
            break


if __name__ == "__main__":
    _main()
