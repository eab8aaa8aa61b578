"""Which documents of one bucket are duplicates of an earlier one: edges, found without a
global view of the corpus.

Every document has a priority, (directory, file, row): the position of its documents
directory in the `--documents` order, of its file in that directory's manifest, and of its
row in that file. A bucket holds the documents that share a key: the same exact key
(normalise.py), or the same LSH band (lsh.py). An edge says that a document duplicates one
of smaller priority; a document is removed when it has any edge, and its report row shows
the least of its edges (`Edge` orders them: an exact copy first, then the earliest).

- Exact buckets: every member but the earliest has an edge to the earliest, similarity 1.
- Band buckets are candidates only: a member gets an edge to the earliest of the bucket's
  `keep` earliest members that come before it and whose signature's estimated similarity is
  at least the threshold. A bucket of up to `keep` + 1 members is thus compared pair by
  pair; a larger one (a boilerplate band shared by many documents) compares every member
  with its `keep` earliest only, so memory and work stay bounded: a pair of duplicates
  missed there is almost always found in one of the other bands they share.

The members are read twice (the earliest first, then the edges), never held in memory
whole: a runner's grouped values can be iterated again.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from pipelines.dedup.minhash import similarity

# How many of a band bucket's earliest members each member is compared with.
KEEP_EARLIEST = 8

# Edge kinds, ranked: a document with both kinds of edge is reported as an exact copy.
EXACT_RANK = 0
NEAR_RANK = 1

Priority = tuple[int, int, int]  # (directory, file, row)


class Member(NamedTuple):
    """A document as a bucket sees it (plain values: Beam encodes them without pickling)."""

    directory: int
    file: int
    row: int
    id: str
    source: str
    signature: bytes = b""  # empty in exact buckets

    @property
    def priority(self) -> Priority:
        return (self.directory, self.file, self.row)


class Edge(NamedTuple):
    """That a document duplicates an earlier one; min() over a document's edges picks the
    one its report names (an exact copy first, then the earliest neighbour)."""

    rank: int
    directory: int
    file: int
    row: int
    id: str
    source: str
    similarity: float


def _edge(rank: int, earlier: Member, value: float) -> Edge:
    return Edge(rank, *earlier.priority, earlier.id, earlier.source, value)


def exact_edges(members: Iterable[Member]) -> Iterator[tuple[Priority, Edge]]:
    """Every member of an exact bucket but the earliest → an edge to the earliest."""
    first = min(members, key=lambda member: member.priority)
    for member in members:
        if member.priority != first.priority:
            yield member.priority, _edge(EXACT_RANK, first, 1.0)


def near_edges(
    members: Iterable[Member], threshold: float, keep: int = KEEP_EARLIEST
) -> Iterator[tuple[Priority, Edge]]:
    """Members of a band bucket with a verified earlier neighbour → an edge to the earliest
    such neighbour among the bucket's `keep` earliest members."""
    earliest = heapq.nsmallest(keep, members, key=lambda member: member.priority)
    if len(earliest) < 2:
        return
    for member in members:
        for earlier in earliest:
            if earlier.priority >= member.priority:
                break
            value = similarity(member.signature, earlier.signature)
            if value >= threshold:
                yield member.priority, _edge(NEAR_RANK, earlier, value)
                break
