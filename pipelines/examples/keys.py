"""The keys that route documents and examples between the graph's steps.

Keys are typed tuples, never strings parsed back with `split("/")`: Beam groups by them,
and `name` formats one as the folder its spill files go to, only where a path is needed
(`KeyedSpillWriter`, the one place that hands keys to pipelines/beam/spill.py). Numbers are
zero-padded in names so that names sort as their keys do: a spill writer flushes and
breaks ties in name order, and keeps doing what it did when the keys were those strings.
"""

from __future__ import annotations

from typing import NamedTuple

from pipelines.beam.spill import SpillWriter


class PartitionKey(NamedTuple):
    """One pairing step: the documents of some partner groups of one split in one pass."""

    split: str
    dupe_pass: int
    partition: int

    @property
    def name(self) -> str:
        return f"{self.split}/p{self.dupe_pass:05d}/q{self.partition:05d}"


class BucketKey(NamedTuple):
    """One shuffle bucket of one output tree ("seq128/train")."""

    output: str
    bucket: int

    @property
    def name(self) -> str:
        return f"{self.output}/b{self.bucket:05d}"


class KeyedSpillWriter:
    """A SpillWriter for typed keys: each is named as its folder for spill.py, and handed
    back as a plain tuple, which Beam's deterministic coder can group by."""

    def __init__(self, directory: str, unit: str, budget_bytes: int) -> None:
        self._writer = SpillWriter(directory, unit, budget_bytes)
        self._keys: dict[str, tuple] = {}
        self._names: dict[tuple, str] = {}  # a key's name, formatted once (a call per record)

    def add(self, key: PartitionKey | BucketKey, record: bytes) -> None:
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = key.name
            self._keys[name] = tuple(key)
        self._writer.add(name, record)

    def close(self) -> list[tuple[tuple, str]]:
        """(key, spill file) for every file written, in the order written."""
        return [(self._keys[name], path) for name, path in self._writer.close()]
