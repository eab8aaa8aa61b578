"""Shuffling through storage: the example stage's heavy data never passes through Beam.

Two regroupings of the whole corpus are needed (documents into random partner groups, then
examples into a global shuffle), and a Beam GroupByKey over the corpus would hold it all in
the local runner's memory. Instead, like the map side of a sort-based shuffle, each unit of
work appends records to per-key buffers and writes a buffer out as a "spill file" when the
unit's memory budget is reached; the reducer for a key reads that key's files. Beam only
moves `(key, path)` pairs and counts, so every step's memory is bounded by its budget or by
one key's data, whatever the corpus size, on any runner.

Files are named by (key, unit, part), and a unit flushes the same buffers at the same points
on every run, so the files (and everything made from them) are deterministic, and a retried
bundle overwrites its own files with the same bytes. Records are packed binary, never pickle.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pipelines.beam import files

_ID_DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<u4")}
_DOC_HEADER = struct.Struct("<IHIIB")  # record bytes, id bytes, sentences, tokens, id width
_EXAMPLE_HEADER = struct.Struct("<QI")  # sort key, example bytes


class SpillWriter:
    """Buffers records per key and writes the largest buffer out when over budget."""

    def __init__(self, directory: str, unit: str, budget_bytes: int) -> None:
        self._directory = directory
        self._unit = unit
        self._budget = budget_bytes
        self._buffers: dict[str, list[bytes]] = {}
        self._sizes: dict[str, int] = {}
        self._parts: dict[str, int] = {}
        self._total = 0
        self.written: list[tuple[str, str]] = []  # (key, path), in the order written

    def add(self, key: str, record: bytes) -> None:
        self._buffers.setdefault(key, []).append(record)
        self._sizes[key] = self._sizes.get(key, 0) + len(record)
        self._total += len(record)
        if self._total > self._budget:
            # Ties go to the smallest key, so the choice depends on the data alone.
            largest = max(self._sizes, key=lambda k: (self._sizes[k], k))
            self._flush(largest)

    def close(self) -> list[tuple[str, str]]:
        for key in sorted(self._buffers):
            self._flush(key)
        return self.written

    def _flush(self, key: str) -> None:
        records = self._buffers.pop(key)
        self._total -= self._sizes.pop(key)
        part = self._parts.get(key, 0)
        self._parts[key] = part + 1
        path = files.join(self._directory, key, f"{self._unit}-{part:05d}.bin")
        files.write_file(path, b"".join(records))
        self.written.append((key, path))


@dataclass(slots=True)
class TokenizedDocument:
    id: str
    tokens: np.ndarray  # all token ids, sentence after sentence
    sentence_lengths: np.ndarray  # tokens per sentence, each ≥ 1


def pack_document(document: TokenizedDocument, id_width: int) -> bytes:
    raw_id = document.id.encode("utf-8")
    body = b"".join(
        (
            raw_id,
            np.asarray(document.sentence_lengths, dtype="<u4").tobytes(),
            np.asarray(document.tokens, dtype=_ID_DTYPES[id_width]).tobytes(),
        )
    )
    header = _DOC_HEADER.pack(
        _DOC_HEADER.size + len(body),
        len(raw_id),
        len(document.sentence_lengths),
        len(document.tokens),
        id_width,
    )
    return header + body


def unpack_documents(data: bytes, name: str) -> Iterator[TokenizedDocument]:
    offset = 0
    while offset < len(data):
        if offset + _DOC_HEADER.size > len(data):
            raise ValueError(f"{name}: truncated spill record at byte {offset}")
        size, id_bytes, n_sentences, n_tokens, width = _DOC_HEADER.unpack_from(data, offset)
        position = offset + _DOC_HEADER.size
        doc_id = data[position : position + id_bytes].decode("utf-8")
        position += id_bytes
        lengths = np.frombuffer(data, dtype="<u4", count=n_sentences, offset=position)
        position += 4 * n_sentences
        tokens = np.frombuffer(data, dtype=_ID_DTYPES[width], count=n_tokens, offset=position)
        if position + n_tokens * width != offset + size:
            raise ValueError(f"{name}: corrupt spill record for {doc_id} at byte {offset}")
        yield TokenizedDocument(doc_id, tokens, lengths)
        offset += size


def pack_example(sort_key: int, example: bytes) -> bytes:
    return _EXAMPLE_HEADER.pack(sort_key, len(example)) + example


def unpack_examples(data: bytes, name: str) -> Iterator[tuple[int, bytes]]:
    offset = 0
    view = memoryview(data)
    while offset < len(data):
        sort_key, size = _EXAMPLE_HEADER.unpack_from(data, offset)
        start = offset + _EXAMPLE_HEADER.size
        if start + size > len(data):
            raise ValueError(f"{name}: truncated example record at byte {offset}")
        yield sort_key, bytes(view[start : start + size])
        offset = start + size
