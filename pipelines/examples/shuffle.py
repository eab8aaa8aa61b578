"""The two regroupings of the corpus through spill files, in one or two levels.

Each regrouping is an all-to-all: every mapper (a documents file, then a pairing step) can
send records to every key (a pairing step, then a shuffle bucket), and writes a spill file
per key it reaches, so one level writes at least mappers × keys files. Both counts grow with
the corpus (each unit of work is sized in MB), so the files grow with its square: at full
English Wikipedia (~400 documents files × ~3,200 pairing steps, then ~3,200 × ~4,600 buckets
at 128 tokens, more with budget flushes) `plan_routes` counts ~63 M objects of ~10 kB, whose
PUT and GET requests would cost more time and money on object storage than the work itself.

Two levels bound that. Keys are dealt, in order, into route groups of consecutive keys. A
mapper writes one spill file per route group it reaches (each record prefixed by its key's
index), and regroup steps read those files and write one spill file per key (`RegroupFn`).
Of a group's first-level files, each regroup step takes those of a share of the mappers
(`chunks` per group, the share chosen by a hash of the mapper's unit name), so that a step
reads about one to two buffers' worth of records however large the group: the group size
sets how many files are written, the chunks keep the steps many and small.

The files of one regrouping are then mappers × groups (first level) plus, per key, about
(keys per group × MB per key ÷ regroup budget) (second level): larger groups mean fewer
first-level files and more second-level ones. `plan_routing` takes the group size whose
count is lowest (the planner's count, `spill_files`), at least two groups, and the second
level only where it cuts the files by at least `_TWO_LEVEL_GAIN`, and only past
`_TWO_LEVEL_MIN_FILES`: the data passes through storage once more, and small runs keep one
level. At full English Wikipedia it counts ~0.16 M files of a few MB.

A reducer reads its key's files whichever level wrote them and orders records by their
content (documents by id, examples by place and bytes), so the shards are byte-identical
either way, whatever the route groups and chunks (tests/test_examples_shuffle.py).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.spill import SpillWriter
from pipelines.examples.keys import BucketKey, KeyedSpillWriter, PartitionKey
from pipelines.io.hashing import stable_hash64
from pipelines.io.storage import read_exactly

_ROUTED = struct.Struct("<II")  # key index, record bytes
# Two levels only where they write at least 4x fewer files, and one level would write at
# least 10,000 (~$0.05 of object-storage PUTs): below that a second pass costs more than it saves.
_TWO_LEVEL_GAIN = 4
_TWO_LEVEL_MIN_FILES = 10_000
ROUTES_DIR = "_routes"  # under a regrouping's spill folder: the first level's files


@dataclass(frozen=True)
class Routing:
    """How one regrouping reaches its keys: directly (`group_size` 0) or through route
    groups of `group_size` consecutive keys, each regrouped by `chunks` steps that buffer
    `budget_bytes` (its mappers too: they write few, larger files)."""

    keys: tuple[PartitionKey | BucketKey, ...]  # every key of the regrouping, in a fixed order
    group_size: int = 0
    budget_bytes: int = 0
    chunks: int = 1  # regroup steps per route group, each taking a share of the mappers

    @property
    def two_level(self) -> bool:
        return self.group_size > 0

    @property
    def groups(self) -> int:
        return math.ceil(len(self.keys) / self.group_size) if self.group_size else 0

    @property
    def steps(self) -> int:
        """Regroup steps: the key of the GroupByKey before them, `step_of`, is below this."""
        return self.groups * self.chunks

    def step_of(self, group: int, unit: str) -> int:
        """The regroup step that reads what mapper `unit` wrote for route group `group`."""
        chunk = stable_hash64("regroup-chunk", unit) % self.chunks if self.chunks > 1 else 0
        return group * self.chunks + chunk

    def index_of(self) -> dict[tuple, int]:
        return {key: index for index, key in enumerate(self.keys)}


@dataclass(frozen=True)
class SpillSizes:
    """What the layout tells of a regrouping before it runs, to count its files."""

    mappers: int  # units of work that write spill files
    mapper_bytes: float  # records one of them writes
    key_bytes: float  # records one key receives
    spill_budget_bytes: int  # a one-level mapper's buffer (--spill-budget-mb)
    regroup_budget_bytes: int  # a second-level step's buffer (--regroup-budget-mb)


def plan_routing(
    keys: Sequence[PartitionKey | BucketKey], sizes: SpillSizes, levels: str = "auto"
) -> Routing:
    """One level or two for a regrouping of `keys`; `levels` "1" or "2" forces the choice
    (`--shuffle-levels`)."""
    keys = tuple(keys)
    if levels == "1" or (levels != "2" and len(keys) < 4):
        return Routing(keys)
    two = two_level_routing(keys, sizes)
    if levels == "2":
        return two
    one_level_files = spill_files(Routing(keys), sizes)
    if one_level_files >= max(_TWO_LEVEL_MIN_FILES, _TWO_LEVEL_GAIN * spill_files(two, sizes)):
        return two
    return Routing(keys)


def two_level_routing(keys: Sequence[PartitionKey | BucketKey], sizes: SpillSizes) -> Routing:
    """The route groups that write the fewest files by `spill_files`' count, at least two of
    them where there are two keys (ties: the larger groups, fewer steps), each regrouped in
    chunks of one to two budgets of records."""
    keys = tuple(keys)
    budget = sizes.regroup_budget_bytes
    best: tuple[int, Routing] | None = None
    for size in range(1, max(1, math.ceil(len(keys) / 2)) + 1):
        # A chunk reads at least a budget of records (fewer would only add files), and no
        # more chunks than mappers.
        chunks = int(min(max(1, size * sizes.key_bytes // max(1, budget)), max(1, sizes.mappers)))
        routing = Routing(keys, size, budget, chunks)
        count = spill_files(routing, sizes)
        if best is None or count <= best[0]:
            best = (count, routing)
    assert best is not None
    return best[1]


def spill_files(routing: Routing, sizes: SpillSizes) -> int:
    """About how many spill files a regrouping writes (`level_files`, both levels)."""
    return sum(level_files(routing, sizes))


def level_files(routing: Routing, sizes: SpillSizes) -> tuple[int, int]:
    """About how many spill files each level of a regrouping writes: (mappers' files, regroup
    steps' files), the second 0 on one level. A writer writes the fullest buffer whenever its
    budget is full: with n evenly filled buffers, a file per budget ÷ n bytes, and at least
    one per buffer."""

    def written(data: float, buffers: int, budget: int) -> int:
        return max(buffers, math.ceil(data * buffers / max(1, budget)))

    if not routing.two_level:
        keys = len(routing.keys)
        return sizes.mappers * written(sizes.mapper_bytes, keys, sizes.spill_budget_bytes), 0
    size, budget = routing.group_size, routing.budget_bytes
    first = sizes.mappers * written(sizes.mapper_bytes, routing.groups, budget)
    step_bytes = size * sizes.key_bytes / routing.chunks
    return first, routing.steps * written(step_bytes, size, budget)


class RoutedSpillWriter:
    """A mapper's spill writer: per key on one level, per route group on two."""

    def __init__(self, directory: str, unit: str, budget_bytes: int, routing: Routing) -> None:
        self._routing = routing
        self._unit = unit
        if routing.two_level:
            self._index = routing.index_of()
            self._writer = SpillWriter(
                files.join(directory, ROUTES_DIR), unit, routing.budget_bytes
            )
        else:
            self._keyed = KeyedSpillWriter(directory, unit, budget_bytes)
            self.add = self._keyed.add  # type: ignore[method-assign]  # one call per record

    def add(self, key: PartitionKey | BucketKey, record: bytes) -> None:
        index = self._index[tuple(key)]
        group = index // self._routing.group_size
        self._writer.add(_route_name(group), _ROUTED.pack(index, len(record)) + record)

    def close(self) -> list[tuple[object, str]]:
        """(key, spill file) on one level; on two, (regroup step, spill file): the step of
        the file's route group that takes this mapper's files (`Routing.step_of`)."""
        if not self._routing.two_level:
            return self._keyed.close()
        step_of = self._routing.step_of
        return [(step_of(int(name[1:]), self._unit), path) for name, path in self._writer.close()]


def _route_name(group: int) -> str:
    return f"r{group:05d}"  # zero-padded: names sort as groups do (SpillWriter's tie-break)


def iter_routed(stream: BinaryIO, name: str) -> Iterator[tuple[int, bytes]]:
    """The (key index, record) pairs of a first-level spill file, read as they come: a
    regroup step holds one record of its input at a time, whatever the file's size."""
    offset = 0
    while header := read_exactly(stream, _ROUTED.size):
        index, size = _ROUTED.unpack(header) if len(header) == _ROUTED.size else (0, -1)
        record = read_exactly(stream, size) if size >= 0 else b""
        if size < 0 or len(record) < size:
            raise ValueError(f"{name}: truncated routed record at byte {offset}")
        yield index, record
        offset += _ROUTED.size + size


class RegroupFn(beam.DoFn):
    """(regroup step, first-level files) → (key, spill file) for each key of the step's
    route group that its files hold."""

    def __init__(self, directory: str, routing: Routing) -> None:
        self._directory = directory
        self._routing = routing

    def process(self, element: tuple[int, list[str]]) -> Iterator[tuple[tuple, str]]:
        step, paths = element
        group, chunk = divmod(step, self._routing.chunks)
        keys = self._routing.keys
        first = group * self._routing.group_size
        last = min(first + self._routing.group_size, len(keys))
        unit = (
            _route_name(group) if self._routing.chunks == 1 else f"{_route_name(group)}c{chunk:05d}"
        )
        writer = KeyedSpillWriter(self._directory, unit, self._routing.budget_bytes)
        for path in sorted(paths):
            with files.open_raw(path) as stream:
                for index, record in iter_routed(stream, path):
                    if not first <= index < last:
                        raise ValueError(
                            f"{path}: a record for key {index} in route group {group}, which "
                            f"holds keys {first}–{last - 1}"
                        )
                    writer.add(keys[index], record)
        yield from writer.close()


class GroupSpills(beam.PTransform):
    """(key or regroup step, spill file) → (key, [spill files]): a GroupByKey on one level;
    on two, a GroupByKey per regroup step, the regroup steps, then one per key."""

    def __init__(self, directory: str, routing: Routing) -> None:
        super().__init__()
        self._directory = directory
        self._routing = routing

    def expand(self, spills):
        if not self._routing.two_level:
            return spills | "GroupByKey" >> beam.GroupByKey()
        return (
            spills
            | "GroupRoutes" >> beam.GroupByKey()
            | "Regroup" >> beam.ParDo(RegroupFn(self._directory, self._routing))
            | "GroupByKey" >> beam.GroupByKey()
        )
