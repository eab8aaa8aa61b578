"""The epoch's order: which sample each position of a training epoch holds, and which
micro-batch each rank's loader worker makes of it; and evaluation's contiguous split. Pure
functions of their arguments: nothing here reads a byte (trainer/data.py does).

**The order** of training epoch e is a function of (seed, e) and the global batch G
(micro-batch m × processes × accumulation A), with --shuffle-buffer S and --bucket-window W,
never of the processes, the workers or the accumulation that make G up:

1. the shards in a seeded order (`epoch_shards`), concatenated: the epoch's *stream*;
2. the stream's last N mod G samples dropped (less than one global batch; other samples each
   epoch, since the shard order changes), leaving n = N // G global batches;
3. the stream cut into *windows* of L = max(1, S // G) global batches (with bucketing, a
   multiple of W, at least W); within a window, global batch l's slot j holds sample σ_j(l)
   of the window's *lane* j, lane j being the window's samples [j·L, (j+1)·L), and σ_j a
   permutation drawn from (seed, e, window, j) (`EpochOrder.sources`). S of 0 or 1: no σ,
   the stream's order (windows of `READ_SAMPLES` remain the unit of reading).

So every global batch of a window takes one sample from each of its G lanes (a stratified
draw over the whole window), and which global batch a sample lands in is uniform over the
window's L. With S under 2·G, L is 1: no sample changes global batch, only the shard order
shuffles; S of many global batches is what mixes them. Global batch g holds positions
[g·G, (g+1)·G); the micro-batch of accumulation step a on rank r is its slots
(a·world + r)·m + [0, m), u = a·world + r being the micro-batch's *micro index*.
Concatenated in (a, r) order, a step's micro-batches are the global batch's G positions in
order, whatever the world size. `DataPosition(epoch, global_batches)` names a place in the
order, the same on every rank: what a checkpoint records to resume from.

**Locality.** Slot j reads lane j, so rank r reads only the lanes of its micro indices: A
runs of m·L consecutive samples a window, 1/world of it; every block outside them is left
unread. The workers of a rank share those runs: each reads the blocks its micro-batches
touch, so a block is read by at most the rank's workers (`--num-workers`), and by two
ranks where a run starts or ends inside it. (A uniform permutation of the whole window
would have every worker of every process read every block.)

**Length bucketing** (--bucket-window W): global batches are grouped W at a time from the
epoch's start (group b: [b·W, (b+1)·W)); for each micro index u, the W·m samples the group
holds at slots u·m + [0, m) are sorted by length (stable: ties keep position order), cut
into W micro-batches, and the k-th shortest goes to global batch b·W + deal_b(k), with
deal_b a permutation drawn from (seed, e, b) shared by every u (`bucket`). So each
micro-batch is of similar lengths (little padding), and every micro-batch of one step is
the same quantile of its own micro index's group: the processes of a step get about equal
work. Bucketing reads only what the micro index reads, and so keeps the locality above; it
makes the order depend on m as well as G (the micro index cuts the slots).

Permutations are counter-based (`permutation`: the order of splitmix64 hashes of (key, i)),
defined by this file alone, not by a library's generator that a version could change.

**Evaluation** (every sample once, or the first `limit` of them, no shuffling) keeps a
contiguous split: rank r takes a range of the samples in stored order (`split_by_node`, the
ranks within one batch of each other), each worker a contiguous part of the rank's batches
(`split_by_worker`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipelines.io.hashing import stable_hash64
from trainer.splitmix import GOLDEN, mix

if TYPE_CHECKING:  # types only: nothing here reads a shard
    from trainer.source import ShardEntry

# The samples a worker reads at a time with --shuffle-buffer 0 or 1 (no shuffling): a byte
# range per run of blocks, not one per micro-batch. Otherwise a window is the unit of reading.
READ_SAMPLES = 10_000


def _stream(key: int, *parts: int) -> np.uint64:
    """A splitmix64 stream's state for `key` and the parts (window, lane, group), folded in
    one at a time."""
    state = mix(np.array([key], dtype=np.uint64))
    for part in parts:
        state = mix(state ^ np.uint64(part))
    return state[0]


def _draws(states: np.ndarray, size: int) -> np.ndarray:
    """(len(states), size) uint64: steps 1 … size of each splitmix64 stream."""
    steps = np.arange(1, size + 1, dtype=np.uint64) * GOLDEN
    return mix(states[:, None] + steps[None, :])


def permutation(key: int, size: int) -> np.ndarray:
    """A permutation of range(size) drawn from `key` alone (int64)."""
    return _ranked(_draws(np.array([_stream(key)]), size))[0]


def permutations(keys: np.ndarray, size: int) -> np.ndarray:
    """(len(keys), size): row i is `permutation(keys[i], size)`, drawn at once."""
    states = mix(np.asarray(keys, dtype=np.uint64).copy())
    return _ranked(_draws(states, size))


_INDEX_BITS = 16  # a row of up to 65,536 draws is ranked by one sort of packed values


def _ranked(draws: np.ndarray) -> np.ndarray:
    """Each row's stable argsort (int64), the same indices `np.argsort(kind="stable")` gives.
    A row of at most 2**16 draws sorts its values with their index in the low 16 bits (a
    value sort, several times quicker than an argsort), exact unless two draws agree on
    their upper 48 bits: such a row (one in about 2**33 at 256) is ranked by the argsort."""
    size = draws.shape[1]
    if size > 1 << _INDEX_BITS:
        return np.argsort(draws, axis=1, kind="stable")
    low = np.uint64((1 << _INDEX_BITS) - 1)
    packed = np.sort((draws & ~low) | np.arange(size, dtype=np.uint64), axis=1)
    ranks = (packed & low).astype(np.int64)
    upper = packed >> np.uint64(_INDEX_BITS)
    for row in np.flatnonzero((upper[:, 1:] == upper[:, :-1]).any(axis=1)).tolist():
        ranks[row] = np.argsort(draws[row], kind="stable")
    return ranks


def epoch_shards(shards: Iterable, seed: int, epoch: int, shuffle: bool) -> list:
    """The shard order of an epoch, a permutation drawn from (seed, epoch)."""
    order = list(shards)
    if shuffle:
        random.Random(stable_hash64(f"shards:{seed}:{epoch}")).shuffle(order)
    return order


@dataclass(frozen=True, slots=True)
class EpochOrder:
    """The order of one epoch's stream of `samples` (the shards concatenated in their epoch
    order): `sources(positions)` maps positions of the order to offsets in the stream."""

    samples: int  # N
    global_batch: int  # G
    window_batches: int  # L: global batches shuffled together
    shuffled: bool  # whether a window's lanes are permuted
    key: int  # drawn from (seed, epoch): the windows' permutations
    bucket_key: int  # drawn from (seed, epoch): the bucket groups' deals

    @classmethod
    def of(
        cls,
        samples: int,
        global_batch: int,
        shuffle_samples: int,
        shuffle: bool,
        seed: int,
        epoch: int,
        bucket_window: int = 0,
    ) -> EpochOrder:
        """With --bucket-window W, a window is a whole number of bucket groups (at least
        one): a group never spans two windows, so no window is read twice."""
        window = shuffle_samples if shuffle_samples > 1 else READ_SAMPLES
        key, bucket_key = (stable_hash64(f"{what}:{seed}:{epoch}") for what in ("order", "buckets"))
        window_batches = max(1, window // global_batch)
        if bucket_window:
            window_batches = max(bucket_window, window_batches - window_batches % bucket_window)
        return cls(
            samples, global_batch, window_batches, shuffle and shuffle_samples > 1, key, bucket_key
        )

    @property
    def batches(self) -> int:
        """Global batches in the epoch: the tail of less than one is dropped."""
        return self.samples // self.global_batch

    def window_of(self, batch: int) -> tuple[int, int]:
        """(first global batch, global batches) of the window holding global batch `batch`."""
        first = batch - batch % self.window_batches
        return first, min(self.window_batches, self.batches - first)

    def sources(self, positions: np.ndarray) -> np.ndarray:
        """The stream offset of the sample at each position (int64, same shape)."""
        positions = np.asarray(positions, dtype=np.int64)
        if not self.shuffled or self.window_batches == 1:
            return positions.copy()
        size = self.global_batch
        batch, slot = np.divmod(positions, size)
        window = batch // self.window_batches
        result = np.empty_like(positions)
        for number in np.unique(window):
            here = window == number
            first, count = self.window_of(int(number) * self.window_batches)
            lanes, row = np.unique(slot[here], return_inverse=True)
            states = mix(np.uint64(_stream(self.key, int(number))) ^ lanes.astype(np.uint64))
            sigma = np.argsort(_draws(states, count), axis=1, kind="stable")
            taken = sigma[row.reshape(-1), batch[here] - first]
            result[here] = first * size + slot[here] * count + taken
        return result


def shuffle_note(shuffle_samples: int, global_batch: int, resumed: bool = False) -> str | None:
    """What a run says when --shuffle-buffer S, though on, holds under two global batches G:
    L is then 1, so every global batch keeps the same samples from one epoch to the next (only
    the shards' order changes). None where S is off (0 or 1) or holds two or more. A resumed
    run keeps its order, S included: only a new run (from its weights) can take more."""
    if shuffle_samples <= 1 or shuffle_samples >= 2 * global_batch:
        return None
    fix = (
        f"a resume keeps the run's order, so only a new run (--init-checkpoint from this one's "
        f"checkpoints) can shuffle more, with --shuffle-buffer {8 * global_batch} or more"
        if resumed
        else f"pass --shuffle-buffer {8 * global_batch} (8 global batches) or more to shuffle "
        "samples across batches"
    )
    return (
        f"--shuffle-buffer {shuffle_samples} holds under 2 global batches of {global_batch}: "
        f"each global batch keeps the same samples every epoch, only the shards' order changes; "
        + fix
    )


def micro_positions(order: EpochOrder, batch: int, micro: int, micro_size: int) -> np.ndarray:
    """The positions of micro-batch `micro` (index u = a·world + r) of global batch `batch`."""
    start = batch * order.global_batch + micro * micro_size
    return np.arange(start, start + micro_size, dtype=np.int64)


def group_positions(
    order: EpochOrder, first: int, count: int, micro: int, micro_size: int
) -> np.ndarray:
    """(count, m): the positions global batches first … first + count - 1 hold at micro
    index `micro`'s slots, one row per global batch: a bucket group's samples."""
    batches = np.arange(first, first + count, dtype=np.int64)[:, None]
    return batches * order.global_batch + micro * micro_size + np.arange(micro_size)[None, :]


def bucket(lengths: np.ndarray, count: int, deal: np.ndarray) -> np.ndarray:
    """(count, m) indices into a bucket group's samples (`lengths` in position order, count·m
    of them): row i is global batch first + i's micro-batch, shortest first; the k-th
    shortest micro-batch goes to row deal[k]."""
    order = np.argsort(np.asarray(lengths), kind="stable").reshape(count, -1)
    rows = np.empty_like(order)
    rows[deal] = order
    return rows


def bucket_deal(order: EpochOrder, group: int, count: int) -> np.ndarray:
    """deal_b: which global batch of group `group` gets its k-th shortest micro-batches."""
    return permutation(int(_stream(order.bucket_key, group)), count)


@dataclass(slots=True)
class DataPosition:
    """Where a run is in its input: the epoch, and the global batches consumed in it (the
    same on every rank, for any world size)."""

    epoch: int = 0
    global_batches: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "global_batches": self.global_batches}

    @classmethod
    def from_dict(cls, raw: dict[str, int], accumulation: int = 1) -> DataPosition:
        """From `to_dict`'s form, or from a checkpoint written before positions were global:
        {"epoch", "batches"}, the micro-batches one rank consumed, `accumulation` a step."""
        if "global_batches" in raw:
            return cls(int(raw["epoch"]), int(raw["global_batches"]))
        return cls(int(raw["epoch"]), int(raw["batches"]) // accumulation)


@dataclass(frozen=True, slots=True)
class RankShare:
    """A rank's part of every global batch: its micro index for each accumulation step."""

    micro_size: int  # m
    world_size: int
    rank: int
    accumulation: int  # A

    def micro_index(self, step: int) -> int:
        return step * self.world_size + self.rank


def worker_units(
    order: EpochOrder, share: RankShare, unit: int, start: int, worker: int, workers: int
) -> Iterator[list[tuple[int, int]]]:
    """The (global batch, micro index) pairs this worker makes, from global batch `start` on,
    in the order it yields them, one list per unit of `unit` global batches (read at once).

    The rank's micro-batches are numbered i = g·A + a from the epoch's start; counted from
    the resume point, the k-th goes to worker k mod K (torch's DataLoader takes batches from
    its workers round-robin, from worker 0). Workers that go on from an earlier epoch pass
    their turn in this one's round robin as `worker` (`epoch_turn`)."""
    accumulation = share.accumulation
    first = start * accumulation
    items: list[tuple[int, int]] = []
    current = -1
    for index in range(first + worker, order.batches * accumulation, workers):
        batch, step = divmod(index, accumulation)
        if batch // unit != current and items:
            yield items
            items = []
        current = batch // unit
        items.append((batch, share.micro_index(step)))
    if items:
        yield items


def epoch_turn(worker: int, workers: int, before: int) -> int:
    """Worker `worker`'s turn in an epoch's round robin (`worker_units`' `worker`) when the
    same K workers handed out `before` micro-batches of the epochs before it: torch takes
    micro-batch i, counted over every epoch the workers made, from worker i mod K, so the
    epoch's k-th comes from worker (before + k) mod K, and worker w makes k ≡ w − before."""
    return (worker - before) % workers


# --------------------------------------------------------------------------- evaluation's plan


@dataclass(frozen=True, slots=True)
class Segment:
    """Samples [skip, skip + take) of one shard, in its stored order."""

    shard: ShardEntry
    skip: int
    take: int


def _resegment(segments: list[Segment], start: int, stop: int) -> list[Segment]:
    """Samples [start, stop) of a list of segments, as segments."""
    result = []
    offset = 0
    for segment in segments:
        lo, hi = max(start, offset), min(stop, offset + segment.take)
        if lo < hi:
            result.append(Segment(segment.shard, segment.skip + lo - offset, hi - lo))
        offset += segment.take
    return result


def rank_batches(samples: int, world_size: int, batch_size: int, drop_last: bool) -> list[int]:
    """Batches per rank: equal when dropping the tail, else within one of each other."""
    if drop_last:
        return [samples // (world_size * batch_size)] * world_size
    per_rank = [samples // world_size + (r < samples % world_size) for r in range(world_size)]
    return [math.ceil(n / batch_size) for n in per_rank]


def split_by_node(
    shards: list[ShardEntry],
    rank: int,
    world_size: int,
    batch_size: int,
    drop_last: bool,
    limit: int | None = None,
) -> tuple[list[Segment], int]:
    """This rank's contiguous range of the samples in stored order, and its batch count.

    With `drop_last` every rank gets exactly the same number of full batches; without it
    (evaluation) every sample is read once and the ranks differ by at most one batch.
    `limit` splits only the first `limit` samples (a partial evaluation): the ranks
    together read the same samples whatever their number.
    """
    total = sum(shard.samples for shard in shards)
    if limit is not None:
        total = min(total, limit)
    if drop_last:
        per_rank = (total // (world_size * batch_size)) * batch_size
        start, stop = rank * per_rank, (rank + 1) * per_rank
    else:
        base, extra = divmod(total, world_size)
        start = rank * base + min(rank, extra)
        stop = start + base + (rank < extra)
    batches = rank_batches(total, world_size, batch_size, drop_last)[rank]
    whole = [Segment(shard, 0, shard.samples) for shard in shards]
    return _resegment(whole, start, stop), batches


def worker_batches(batches: int, workers: int) -> list[int]:
    """How many of a rank's batches each worker makes: worker w makes batches i ≡ w (mod K)."""
    return [batches // workers + (w < batches % workers) for w in range(workers)]


def split_by_worker(
    segments: list[Segment], batches: int, worker: int, workers: int, batch_size: int
) -> tuple[list[Segment], int]:
    """This worker's contiguous part of the rank's samples, and its batch count."""
    counts = worker_batches(batches, workers)
    rank_samples = sum(segment.take for segment in segments)
    start = sum(counts[:worker]) * batch_size
    stop = min(start + counts[worker] * batch_size, rank_samples)
    return _resegment(segments, start, stop), counts[worker]
