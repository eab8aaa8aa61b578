"""Compressed inputs in bounded pieces: a decompression bomb cannot take the memory."""

from __future__ import annotations

import bz2
import gzip
import tracemalloc

import pytest

from pipelines.io.compressed import CHUNK_BYTES, InputReadError, decompressed_chunks
from pipelines.io.storage import READER

BOMB_BYTES = 48 << 20  # zeros: a few kB compressed


@pytest.mark.parametrize(("suffix", "compress"), [(".bz2", bz2.compress), (".gz", gzip.compress)])
def test_a_bomb_comes_out_in_bounded_pieces_with_bounded_memory(tmp_path, suffix, compress):
    path = tmp_path / f"zeros.xml{suffix}"
    path.write_bytes(compress(b"\0" * BOMB_BYTES))
    assert path.stat().st_size < 64 << 10
    tracemalloc.start()
    total = largest = 0
    for piece in decompressed_chunks(READER, str(path)):
        total += len(piece)
        largest = max(largest, len(piece))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total == BOMB_BYTES
    assert largest <= CHUNK_BYTES
    assert peak < 8 * CHUNK_BYTES, peak  # the whole would be 48 MiB


def test_concatenated_streams_and_members_still_read_whole(tmp_path):
    for suffix, compress in ((".bz2", bz2.compress), (".gz", gzip.compress)):
        path = tmp_path / f"two{suffix}"
        path.write_bytes(compress(b"first " * 300_000) + compress(b"second"))
        data = b"".join(decompressed_chunks(READER, str(path)))
        assert data == b"first " * 300_000 + b"second"


def test_a_cut_bomb_is_still_reported_as_truncated(tmp_path):
    data = bz2.compress(b"\0" * (8 << 20))
    path = tmp_path / "cut.bz2"
    path.write_bytes(data[:-10])
    with pytest.raises(InputReadError) as error:
        for _ in decompressed_chunks(READER, str(path)):
            pass
    assert error.value.reason == "truncated_input"
