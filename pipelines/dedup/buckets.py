"""Buckets and edges through spill files: the corpus-wide regrouping never passes through Beam.

Finding duplicates regroups every document by each of its keys (an exact key, one key per
LSH band, each with the document's signature): far more data than the documents' text for
short documents, and a Beam GroupByKey over it would hold it all in the local runner's
memory. As in the examples stage (pipelines/beam/spill.py), each unit of work writes its
keyed members to spill files, one folder per partition of the keys (`partition_of`); the
step for a partition reads its files, sorts the records so that a bucket's members lie
together, and finds that bucket's edges (candidates.py) one bucket at a time. The edges go
to spill files too, one folder per documents file they remove rows from, which that file's
rewrite reads. Beam moves only `(partition or file, path)` pairs, so a step holds at most
one partition's records (`partitions` sizes them to `PARTITION_BYTES`), one unit's
buffers, or one file's removed rows, however many documents there are.

Records are packed binary, never pickle. Which edges a bucket yields, and the least edge of
each removed row, do not depend on the order in which records are read, so the output is
the same whatever the runner's order (and a retried bundle rewrites its files with the same
bytes: a unit's records arrive in file order, a partition's in sorted order).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import struct
from collections.abc import Iterable, Iterator

from pipelines.beam import files
from pipelines.beam.spill import SpillWriter
from pipelines.dedup.candidates import Edge, Member, exact_edges, near_edges
from pipelines.dedup.minhash import SIGNATURE_DTYPE

WORK_DIR = "_work"  # below --output; removed when the manifest is written
BUCKETS = "buckets"  # WORK_DIR/buckets/p<partition>/<unit>-<part>.bin
EDGES = "edges"  # WORK_DIR/edges/<directory>-<file>/p<partition>-<part>.bin

# Spill records a partition holds at most, on average: its step holds them all at once
# (as bytes, sorted), so this bounds that step's memory.
PARTITION_BYTES = 32 << 20
# What a step buffers before it writes a spill file.
SPILL_BUDGET_BYTES = 16 << 20
# A member record's size besides its key and signature, for sizing the partitions: its
# header, and an id and a source of a usual length.
_MEMBER_OVERHEAD = 64

# kind (0 exact, 1 band), key bytes, directory, file, row, id bytes, source bytes, signature
_MEMBER = struct.Struct(">BBIIIIII")
# removed row; the edge: rank, directory, file, row, similarity, id bytes, source bytes
_EDGE = struct.Struct("<IBIIIdII")
_EXACT_KIND, _BAND_KIND = 0, 1


def partitions(documents: int, bands: int, num_perm: int) -> int:
    """How many partitions the keys of `documents` documents are spread over, so that one
    holds about PARTITION_BYTES of records."""
    per_document = (bands + 1) * _MEMBER_OVERHEAD + bands * num_perm * SIGNATURE_DTYPE.itemsize
    return max(1, math.ceil(documents * per_document / PARTITION_BYTES))


def partition_of(key: bytes, count: int) -> int:
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % count


def pack_member(exact: bool, key: bytes, member: Member) -> bytes:
    """A bucket's member, its key first: sorted records lie grouped by bucket."""
    raw_id, raw_source = member.id.encode("utf-8"), member.source.encode("utf-8")
    header = _MEMBER.pack(
        _EXACT_KIND if exact else _BAND_KIND,
        len(key),
        member.directory,
        member.file,
        member.row,
        len(raw_id),
        len(raw_source),
        len(member.signature),
    )
    # The kind and key come before the rest of the header, so that records sort by bucket.
    return header[:2] + key + header[2:] + raw_id + raw_source + member.signature


def _bucket_of(record: bytes) -> bytes:
    return record[: 2 + record[1]]


def _unpack_member(record: bytes) -> Member:
    start = 2 + record[1]
    _, _, directory, file, row, id_bytes, source_bytes, signature_bytes = _MEMBER.unpack(
        record[:2] + record[start : start + _MEMBER.size - 2]
    )
    position = start + _MEMBER.size - 2
    raw_id = record[position : position + id_bytes]
    position += id_bytes
    source = record[position : position + source_bytes].decode("utf-8")
    position += source_bytes
    signature = record[position : position + signature_bytes]
    if position + signature_bytes != len(record):
        raise ValueError(f"a corrupt bucket record for row {row} of file {file}")
    return Member(directory, file, row, raw_id.decode("utf-8"), source, signature)


def _split_records(data: bytes, name: str) -> Iterator[bytes]:
    """A spill file's records; each is stored after its length (4 bytes)."""
    offset = 0
    while offset < len(data):
        if offset + 4 > len(data):
            raise ValueError(f"{name}: truncated spill record at byte {offset}")
        (size,) = struct.unpack_from("<I", data, offset)
        if offset + 4 + size > len(data):
            raise ValueError(f"{name}: truncated spill record at byte {offset}")
        yield data[offset + 4 : offset + 4 + size]
        offset += 4 + size


def _framed(record: bytes) -> bytes:
    return struct.pack("<I", len(record)) + record


class BucketWriter:
    """One unit's members → spill files per partition; `close` lists (partition, path)."""

    def __init__(self, work_dir: str, unit_name: str, count: int) -> None:
        self._count = count
        self._writer = SpillWriter(files.join(work_dir, BUCKETS), unit_name, SPILL_BUDGET_BYTES)

    def add(self, exact: bool, key: bytes, member: Member) -> None:
        partition = partition_of(key, self._count)
        self._writer.add(f"p{partition:05d}", _framed(pack_member(exact, key, member)))

    def close(self) -> list[tuple[int, str]]:
        return [(int(key[1:]), path) for key, path in self._writer.close()]


class _Members:
    """A bucket's records as Members, decoded anew on each pass (candidates.py reads twice)."""

    def __init__(self, records: list[bytes]) -> None:
        self._records = records

    def __iter__(self) -> Iterator[Member]:
        return (_unpack_member(record) for record in self._records)


def partition_edges(
    paths: Iterable[str], partition: int, threshold: float
) -> Iterator[tuple[tuple[int, int], int, Edge]]:
    """A partition's spill files → ((directory, file), row, edge) for every edge its
    buckets give, bucket by bucket in key order."""
    records: list[bytes] = []
    for path in sorted(paths):
        records.extend(_split_records(files.read_file(path), path))
    records.sort()
    for bucket, grouped in itertools.groupby(records, key=_bucket_of):
        members = _Members(list(grouped))
        found = exact_edges(members) if bucket[0] == _EXACT_KIND else near_edges(members, threshold)
        for (directory, file, row), edge in found:
            yield (directory, file), row, edge


def write_edges(
    work_dir: str, partition: int, edges: Iterable[tuple[tuple[int, int], int, Edge]]
) -> list[tuple[tuple[int, int], str]]:
    """Edges → spill files per documents file; returns ((directory, file), path) each."""
    writer = SpillWriter(files.join(work_dir, EDGES), f"p{partition:05d}", SPILL_BUDGET_BYTES)
    for (directory, file), row, edge in edges:
        writer.add(f"{directory:03d}-{file:05d}", _framed(pack_edge(row, edge)))
    return [((int(key[:3]), int(key[4:])), path) for key, path in writer.close()]


def pack_edge(row: int, edge: Edge) -> bytes:
    raw_id, raw_source = edge.id.encode("utf-8"), edge.source.encode("utf-8")
    header = _EDGE.pack(
        row,
        edge.rank,
        edge.directory,
        edge.file,
        edge.row,
        edge.similarity,
        len(raw_id),
        len(raw_source),
    )
    return header + raw_id + raw_source


def _unpack_edge(record: bytes) -> tuple[int, Edge]:
    row, rank, directory, file, earlier_row, value, id_bytes, source_bytes = _EDGE.unpack_from(
        record
    )
    position = _EDGE.size
    raw_id = record[position : position + id_bytes]
    source = record[position + id_bytes : position + id_bytes + source_bytes]
    if position + id_bytes + source_bytes != len(record):
        raise ValueError(f"a corrupt edge record for row {row}")
    edge = Edge(
        rank, directory, file, earlier_row, raw_id.decode("utf-8"), source.decode("utf-8"), value
    )
    return row, edge


def removed_rows(paths: Iterable[str]) -> dict[int, Edge]:
    """A documents file's edge spill files → each removed row's least edge (the one its
    report names: an exact copy first, then the earliest)."""
    removed: dict[int, Edge] = {}
    for path in sorted(paths):
        for record in _split_records(files.read_file(path), path):
            row, edge = _unpack_edge(record)
            known = removed.get(row)
            if known is None or edge < known:
                removed[row] = edge
    return removed


def remove_work_dir(output_dir: str) -> None:
    """Delete the spill files (and `_work` itself, on a local disk)."""
    work = files.join(output_dir, WORK_DIR)
    files.delete(files.match(files.join(work, "**")))
    if files.exists(work):
        files.delete([work])
