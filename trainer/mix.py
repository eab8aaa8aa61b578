"""A mix of shard sources at training time (`bertkit train --shards A B --mix 0.7,0.3`): which
source each slot of a global batch draws from, and which of that source's samples it takes.
Pure functions of their arguments, like trainer/order.py: nothing here reads a byte
(trainer/data.py's `mixed_train_stream` does).

**The mix's order** is a function of (seed, absolute global batch b) and the global batch G
only, never of the processes, the workers or the accumulation that make G up. K sources
(each a DataSource of N_k samples) with weights p_k (summing to 1):

1. *How many.* Global batch b takes n_k(b) = floor(p_k·G) + a_k(b) samples from source k,
   a_k(b) ∈ {0, 1}, Σ_k n_k(b) = G exactly. The r = G − Σ_k floor(p_k·G) extra slots go by
   systematic sampling of the fractional parts f_k = p_k·G − floor(p_k·G): the f_k laid end
   to end tile [0, r), and the r points u_b, u_b + 1, …, u_b + r − 1 pick the sources whose
   part they fall in, u_b = frac(θ + b·φ) a golden-ratio (Weyl) sequence from θ drawn from the
   seed (64-bit fixed point, exact integer arithmetic: the same on every machine). Source k
   gets an extra slot in a fraction f_k of the batches, spread evenly, so C_k(b), the samples
   drawn from k before batch b, stays within a few samples of p_k·G·b for any b (a Weyl
   sequence's discrepancy grows as log b), and is computed for any b directly (`drawn`): a
   resume starts at its batch without replaying the ones before.
2. *Which.* Source k's samples are consumed in its own order exactly as a one-source run at
   the same seed and G orders them (trainer/order.py: its epoch's shard order, its windows
   and lanes): batch b takes positions C_k(b) … C_k(b) + n_k(b) − 1 of source k's endless
   stream of epochs. Stream position c is position c mod U_k of source epoch c // U_k, U_k
   = (N_k // G)·G the samples a one-source epoch uses (its tail short of a global batch
   dropped, other samples each epoch since the shard order changes). So a source that runs
   out starts its next pass, in that pass's order, while the others go on.
3. *Where in the batch.* The G samples, source 0's n_0 in stream order, then source 1's, …,
   are dealt to the batch's slots by a permutation drawn from (seed, b): slot j holds
   sample π_b(j). So every micro-batch mixes the sources in about their proportions. The
   micro-batch of accumulation step a on rank r is slots (a·world + r)·m + [0, m) as with
   one source, so elastic resume (another world size, the same G) works unchanged.

**The mix's epoch.** A mix has no natural epoch (its sources run out at different times):
its nominal epoch is floor(Σ_k N_k / G) global batches, and DataPosition(epoch,
global_batches) names absolute global batch epoch·n + global_batches, n that number. The
checkpoint's position state stays a DataPosition; `drawn_per_source` turns it into the
samples drawn from each source, and `batch_per_source` into one global batch's counts.

**Reading** (trainer/data.py, `mixed_train_stream`): a worker takes its micro-batches a unit
of global batches at a time (`MixCursor.micro_batches`: the counts, C_k and the deals of the
unit's batches at once), and their samples from whole windows of each source's order
(`SourceWindows`: a window's stream range read once, every block of it, sha256 checked, held
in its blocks while the mix draws on it, trainer/samples.py). A source's positions are drawn
in order, so a unit's samples of a source lie in one range of its stream, one window or two,
and a window is let go once the mix has drawn past it. A mix holds a window of every source
at once: as blocks' bytes, not an object a sample, since the memory held (and its many small
objects) slows every stage of the loader. With one source a rank reads only its lanes of a window
(1/world of the blocks); in a mix the deal of step 3 spreads every micro-batch over the whole
window, so each rank reads every block of each window it draws on. The windows in progress
when a run stops are read and partly unused (one a source), and so are those a resumed run
starts in; in training, each worker (or the loader, without workers) keeps its reading from
one epoch into the next, so an epoch boundary reads nothing twice.
--bucket-window is refused with a mix (a bucket group would have to span the sources'
windows, read twice over).

**Sample keys.** RawSample.index is a key within its source; a mixed batch carries each
row's source number beside it (collate's SAMPLE_SOURCE field), BERTKIT_RECORD_KEYS records
it ("sources" beside "keys"), and dynamic masking draws from (seed, the source's own epoch,
the key with the source folded in), so two sources never draw the same masks for equal keys.
One-source batches, records and masks are as they were.

The API the trainer builds on:

    mix = MixedSource((source_a, source_b), ("domain", "wiki"), (0.7, 0.3))
    with PretrainingLoader(mix, LoaderConfig(...)) as loader:      # trainer/data.py
        for batch in loader.batches(position): ...                  # batch[SAMPLE_SOURCE]
    drawn_per_source(mix, seed, global_batch, loader.position)      # {"domain": …, "wiki": …}
    batch_per_source(mix, seed, global_batch, position)             # one global batch's counts
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from pipelines.io.hashing import stable_hash64
from trainer.order import EpochOrder, permutations
from trainer.samples import HeldSamples
from trainer.source import DataConfigError
from trainer.splitmix import GOLDEN, mix, mix_int

if TYPE_CHECKING:  # types only: nothing here reads a shard
    from trainer.order import DataPosition
    from trainer.source import DataSource

_ONE = 2**64  # the fixed point of u_b and the parts: 1.0
_CHUNK = 1 << 20  # global batches counted at a time by `drawn` (8 MiB per source)
# The key folded into a mixed sample's key for its masks: source k's keys become
# key ^ (k + 1) << 48 (a split holds fewer than 2**48 samples), never a one-source key.
SOURCE_KEY_SHIFT = 48


class MixError(DataConfigError):
    """A mix that cannot be drawn (weights, names, sizes): the message says what to change."""


@dataclass(frozen=True, slots=True)
class MixedSource:
    """K ≥ 2 sources read together, source k named names[k] drawing a share weights[k] of
    every global batch (weights positive, summing to 1). The sources must agree on
    vocabulary, sequence length and recipe (the caller checks: trainer/setup.py)."""

    sources: tuple[DataSource, ...]
    names: tuple[str, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        count = len(self.sources)
        if count < 2:
            raise MixError(f"a mix needs at least 2 sources, got {count}; pass one source alone")
        if len(self.names) != count or len(self.weights) != count:
            raise MixError(
                f"{count} sources, {len(self.names)} names and {len(self.weights)} weights: "
                "give one name and one weight per source"
            )
        if len(set(self.names)) != count:
            raise MixError(f"source names {list(self.names)} repeat one: name each once")
        if any(not weight > 0 for weight in self.weights):
            raise MixError(f"mix weights {list(self.weights)}: every weight must be above 0")
        if abs(sum(self.weights) - 1) > 1e-6:
            raise MixError(
                f"mix weights {list(self.weights)} sum to {sum(self.weights):g}: they must sum to 1"
            )

    @property
    def shares(self) -> tuple[Fraction, ...]:
        """The weights as exact fractions summing to 1 (0.7 is 7/10, not its binary float)."""
        exact = [Fraction(repr(float(weight))) for weight in self.weights]
        total = sum(exact)
        return tuple(share / total for share in exact)

    @property
    def samples(self) -> int:
        return sum(source.samples for source in self.sources)

    @property
    def split(self) -> str:
        return self.sources[0].split

    @property
    def max_seq_length(self) -> int | None:
        return self.sources[0].max_seq_length


@dataclass(frozen=True, slots=True)
class MixOrder:
    """The mix's order for a global batch G and a seed (the module docstring, steps 1 and 3)."""

    global_batch: int  # G
    base: np.ndarray  # (K,) int64: floor(p_k·G)
    starts: np.ndarray  # (K,) uint64: where source k's fractional part starts, mod 1
    lengths: np.ndarray  # (K,) uint64: f_k in fixed point
    offset: int  # θ in fixed point
    slot_key: int  # the slot permutations' key
    batches_per_epoch: int  # the nominal epoch: floor(Σ N_k / G)
    usable: np.ndarray  # (K,) int64: U_k, the samples of one source epoch

    @property
    def batches(self) -> int:
        """Global batches in a nominal epoch (`worker_units` walks them as an epoch's)."""
        return self.batches_per_epoch

    @classmethod
    def of(cls, source: MixedSource, global_batch: int, seed: int) -> MixOrder:
        scaled = [share * global_batch for share in source.shares]
        base = [int(value) for value in scaled]  # floor: the values are non-negative
        ends = np.cumsum([0, *(value - whole for value, whole in zip(scaled, base, strict=True))])
        fixed = [int(end * _ONE) for end in ends]  # floor of exact fractions
        return cls(
            global_batch,
            np.array(base, dtype=np.int64),
            np.array([start % _ONE for start in fixed[:-1]], dtype=np.uint64),
            np.array([b - a for a, b in itertools.pairwise(fixed)], dtype=np.uint64),
            stable_hash64(f"mix-offset:{seed}"),
            stable_hash64(f"mix-slots:{seed}"),
            source.samples // global_batch,
            np.array([s.samples // global_batch * global_batch for s in source.sources]),
        )

    def counts(self, first: int, count: int) -> np.ndarray:
        """(count, K) int64: n_k(b) for global batches first … first + count − 1."""
        batches = np.arange(first, first + count, dtype=np.uint64)
        points = batches * GOLDEN + np.uint64(self.offset)  # u_b, wrapping modulo 2**64
        extra = (points[:, None] - self.starts[None, :]) < self.lengths[None, :]
        return self.base[None, :] + extra.astype(np.int64)

    def drawn(self, batch: int) -> np.ndarray:
        """(K,) int64: C_k(batch), the samples drawn from each source before `batch`."""
        total = np.zeros_like(self.base)
        for first in range(0, batch, _CHUNK):
            total += self.counts(first, min(_CHUNK, batch - first)).sum(axis=0)
        return total

    def slots(self, first: int, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(R, G) source numbers and (R, G) ranks of global batches first … first + R − 1
        (`counts`: their (R, K) n_k): slot j of batch b holds the ranks[b, j]-th of the
        batch's samples from source sources[b, j]. The batch's samples, source 0's n_0 in
        stream order, then source 1's, …, are dealt by a permutation drawn from (seed, b)."""
        batches = np.arange(first, first + len(counts), dtype=np.uint64)
        dealt = permutations(mix(batches ^ np.uint64(mix_int(self.slot_key))), self.global_batch)
        ends = np.cumsum(counts, axis=1)
        # Item i of a batch is source k's when ends[k-1] <= i < ends[k]: counted on the dealt
        # items directly, one comparison a source boundary (the last end is G).
        sources = np.zeros(dealt.shape, dtype=np.int64)
        for boundary in range(counts.shape[1] - 1):
            sources += dealt >= ends[:, boundary, None]
        return sources, dealt - np.take_along_axis(ends - counts, sources, axis=1)

    def slot_sources(self, batch: int, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`slots` of the one global batch `batch` ((K,) `counts`): (G,) and (G,)."""
        sources, ranks = self.slots(batch, counts[None, :])
        return sources[0], ranks[0]


def _absolute(order: MixOrder, position: DataPosition) -> int:
    return position.epoch * order.batches_per_epoch + position.global_batches


def drawn_per_source(
    source: MixedSource, seed: int, global_batch: int, position: DataPosition
) -> dict[str, int]:
    """The samples drawn from each source before `position` (what metrics.jsonl records)."""
    order = MixOrder.of(source, global_batch, seed)
    drawn = order.drawn(_absolute(order, position))
    return dict(zip(source.names, drawn.tolist(), strict=True))


def batch_per_source(
    source: MixedSource, seed: int, global_batch: int, position: DataPosition
) -> dict[str, int]:
    """The samples the global batch at `position` takes from each source."""
    order = MixOrder.of(source, global_batch, seed)
    counts = order.counts(_absolute(order, position), 1)[0]
    return dict(zip(source.names, counts.tolist(), strict=True))


def check_mix(source: MixedSource, global_batch: int, bucket_window: int, drop_last: bool) -> None:
    """Refuse a mix the loader cannot draw, before any work."""
    if not drop_last:
        raise MixError(
            "a mix is read for training only: evaluate each of its sources with its own loader"
        )
    if bucket_window:
        raise MixError(
            f"--bucket-window {bucket_window} with a mix: a length-bucket group would span the "
            "windows of several sources; leave --bucket-window at 0 with --mix"
        )
    for name, part in zip(source.names, source.sources, strict=True):
        if part.samples < global_batch:
            where = part.manifest_url or part.shards[0].url
            raise MixError(
                f"{where}: source {name!r} has {part.samples} {part.split} samples, less than "
                f"one global batch of {global_batch}: its order (one source's) needs a whole "
                "one; use a smaller batch or more data"
            )


class MixCursor:
    """A worker's walk through the mix's global batches, forward: C_k(b) kept up to date
    (computed directly at the first batch or after a jump back, then added to)."""

    def __init__(self, order: MixOrder) -> None:
        self.order = order
        self.batch = -1  # none yet
        self.drawn = np.zeros_like(order.base)

    def move(self, batch: int) -> np.ndarray:
        """C_k(batch), (K,): from where the cursor is if `batch` lies ahead, else afresh."""
        if batch < self.batch or self.batch < 0 or batch - self.batch > _CHUNK:
            self.batch, self.drawn = batch, self.order.drawn(batch)
        elif batch > self.batch:
            self.drawn = self.drawn + self.order.counts(self.batch, batch - self.batch).sum(0)
            self.batch = batch
        return self.drawn

    def micro_batches(
        self, batches: list[int], micros: list[int], size: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Micro-batch micros[i] (index a·world + r) of global batch batches[i] for each i
        (`batches` ascending): (n·m,) source numbers and (n·m,) positions in their sources'
        streams, micro-batch after micro-batch; and C_k(batches[0]), (K,)."""
        low, high = batches[0], batches[-1] + 1
        floor = self.move(low)
        counts = self.order.counts(low, high - low)
        drawn = floor + np.cumsum(counts, axis=0) - counts  # (R, K): C_k(b) of each batch
        self.batch, self.drawn = high, floor + counts.sum(axis=0)
        sources, ranks = self.order.slots(low, counts)
        rows = (np.array(batches) - low)[:, None]
        columns = np.array(micros)[:, None] * size + np.arange(size)[None, :]
        chosen = sources[rows, columns]
        positions = np.take_along_axis(drawn[rows[:, 0]], chosen, axis=1) + ranks[rows, columns]
        return chosen.ravel(), positions.ravel(), floor


# read(sorted stream offsets) → the samples there, in order, held in their blocks: a reader
# of one source epoch's stream (its shards in that epoch's order), opened by
# open_reader(source number, epoch)
WindowRead = Callable[[np.ndarray], HeldSamples]
OpenReader = Callable[[int, int], WindowRead]


class SourceWindows:
    """Samples of each source by their position in its endless stream of epochs, read a
    whole window of the source's order at a time through a reader of its epoch's stream
    (`open_reader`: trainer/data.py's StreamReader), held in its blocks while the mix still
    draws on it, let go once the mix has drawn past its end."""

    def __init__(
        self,
        source: MixedSource,
        order: MixOrder,
        shuffle_buffer: int,
        shuffle: bool,
        seed: int,
        open_reader: OpenReader,
    ) -> None:
        self.source, self.order, self.open_reader = source, order, open_reader
        self._readers: dict[tuple[int, int], WindowRead] = {}
        self.shuffle_buffer, self.shuffle, self.seed = shuffle_buffer, shuffle, seed
        self._orders: dict[tuple[int, int], EpochOrder] = {}
        self._held: dict[tuple[int, int, int], _Window] = {}
        # L_k: a source's window in global batches, the same in each of its epochs.
        self._window_batches = np.array(
            [self.epoch_order(number, 0).window_batches for number in range(len(source.sources))]
        )

    def epoch_order(self, number: int, epoch: int) -> EpochOrder:
        """Source `number`'s order in its epoch `epoch`: a one-source run's (trainer/order.py)."""
        order = self._orders.get((number, epoch))
        if order is None:
            order = self._orders[number, epoch] = EpochOrder.of(
                self.source.sources[number].samples,
                self.order.global_batch,
                self.shuffle_buffer,
                self.shuffle,
                self.seed,
                epoch,
            )
        return order

    def take(
        self, sources: np.ndarray, positions: np.ndarray, floor: np.ndarray
    ) -> tuple[HeldSamples, np.ndarray]:
        """The samples at `positions` of sources `sources`, in that order, held in their
        blocks, and each one's source epoch; `floor` (K,) the first position any later call
        can ask for (C_k of the batch), below which held windows are let go."""
        self._let_go(floor)
        # A source's positions are drawn in order, so those asked here lie in one range of
        # its stream, one window or two: each window's part taken at once, then the parts
        # put in the asked order.
        parts: list[HeldSamples] = []
        slots: list[np.ndarray] = []
        for number in np.unique(sources).tolist():
            mine = np.flatnonzero(sources == number)
            asked = positions[mine]
            low, high = int(asked.min()), int(asked.max()) + 1
            for window in self._windows(number, low, high):
                inside = mine
                if window.start > low or window.end < high:
                    within = (asked >= window.start) & (asked < window.end)
                    inside, places = mine[within], asked[within] - window.start
                else:
                    places = asked - window.start
                parts.append(window.held.select(window.index[places]))
                slots.append(inside)
        joined = HeldSamples.join(parts)
        if len(slots) > 1:  # joined holds the asked samples part after part: reorder them
            asked_order = np.empty(len(positions), dtype=np.int64)
            asked_order[np.concatenate(slots)] = np.arange(len(positions))
            joined = joined.select(asked_order)
        return joined, positions // self.order.usable[sources]

    def _windows(self, number: int, low: int, high: int) -> list[_Window]:
        """The windows of source `number` that hold its positions [low, high), in order."""
        size, usable = self.order.global_batch, int(self.order.usable[number])
        window_samples = int(self._window_batches[number]) * size
        found = []
        while low < high:
            epoch, place = divmod(low, usable)
            first = place - place % window_samples  # the window's first place
            window = self._window(number, epoch, first // size)
            found.append(window)
            low = window.end
        return found

    def _window(self, number: int, epoch: int, first: int) -> _Window:
        """The window of source `number`'s epoch `epoch` that starts at its global batch
        `first`: its samples read at once in stream order, held in their blocks, with the
        window's order (which of them each of its places holds)."""
        held = self._held.get((number, epoch, first))
        if held is None:
            order = self.epoch_order(number, epoch)
            size = self.order.global_batch
            count = min(order.window_batches, order.batches - first)
            span = np.arange(first * size, (first + count) * size, dtype=np.int64)
            read = self._readers.get((number, epoch))
            if read is None:
                read = self._readers[number, epoch] = self.open_reader(number, epoch)
            start = epoch * int(self.order.usable[number]) + first * size
            held = self._held[number, epoch, first] = _Window(
                read(span), order.sources(span) - span[0], start, start + len(span)
            )
        return held

    def _let_go(self, floor: np.ndarray) -> None:
        """Drop the windows (and orders) wholly before `floor` in their source's stream."""
        for key, window in list(self._held.items()):
            if window.end <= floor[key[0]]:
                del self._held[key]
        for held in (self._orders, self._readers):
            for number, epoch in list(held):
                if (epoch + 1) * int(self.order.usable[number]) <= floor[number]:
                    del held[number, epoch]


@dataclass(frozen=True, slots=True)
class _Window:
    """A held window of a source: its samples in stream order, held in their blocks; its
    order (place i of the window holds held sample index[i]); its stream positions
    [start, end)."""

    held: HeldSamples
    index: np.ndarray
    start: int
    end: int
