"""The fast .bz2 decoder: the bytes Python's bz2 gives, and where it cannot vouch for a span
(bytes after the last stream, a fault), Python's decoder's own bytes, messages and offsets."""

from __future__ import annotations

import bz2
import io
import random

import pytest

from pipelines.io import bz2_indexed, compressed
from pipelines.io.bz2_indexed import Unverified, decompress_span
from pipelines.io.compressed import CHUNK_BYTES, InputReadError, decompressed_chunks
from pipelines.io.storage import READER

STREAMS = [bz2.compress(f"stream {n}\n".encode() * 20_000) for n in (1, 2, 3)]
TEXT = b"".join(f"stream {n}\n".encode() * 20_000 for n in (1, 2, 3))


def read(path, start=0, end=None) -> tuple[bytes, tuple | None]:
    """Everything yielded, and the fault (message, reason, offset, position) if one came."""
    out = []
    try:
        for piece in decompressed_chunks(READER, str(path), start, end):
            out.append(piece)
    except InputReadError as err:
        return b"".join(out), (str(err), err.reason, err.offset, err.position)
    return b"".join(out), None


def read_with_python_only(monkeypatch, path, start=0, end=None):
    def refused(*args):
        raise Unverified("refused")
        yield  # a generator, as the real one

    with monkeypatch.context() as patch:
        patch.setattr(compressed, "decompress_span", refused)
        return read(path, start, end)


def test_the_span_decodes_to_python_s_bytes_in_bounded_pieces():
    data = b"".join(STREAMS)
    pieces = list(decompress_span(io.BytesIO(data), 0, None, 1000))
    assert b"".join(pieces) == TEXT
    assert max(map(len, pieces)) <= 1000
    second = len(STREAMS[0])
    end = second + len(STREAMS[1])
    assert b"".join(decompress_span(io.BytesIO(data), second, end, CHUNK_BYTES)) == (
        b"stream 2\n" * 20_000
    )


@pytest.mark.parametrize(
    "after",
    [b"j", b"BZ", b"\0" * 10, b"junk" + bz2.compress(b"a later stream, passed over")],
    ids=["one byte", "a header's start", "zeros", "junk then a stream"],
)
def test_bytes_after_the_last_stream_are_not_vouched_for(after):
    data = b"".join(STREAMS) + after
    with pytest.raises(Unverified):
        for _ in decompress_span(io.BytesIO(data), 0, None, CHUNK_BYTES):
            pass


@pytest.mark.parametrize(
    "damage",
    ["cut", "flip", "junk", "junk then a stream", "a split cut short"],
)
def test_a_fault_reads_as_python_s_decoder_reads_it(tmp_path, monkeypatch, damage):
    data = bytearray(b"".join(STREAMS))
    second = len(STREAMS[0])
    start, end = 0, None
    if damage == "cut":
        data = data[: second + len(STREAMS[1]) // 2]
    elif damage == "flip":
        data[second + len(STREAMS[1]) // 2] ^= 0x10
    elif damage == "junk":
        data += b"\0\0\0"
    elif damage == "junk then a stream":
        data += b"x" + bz2.compress(b"after")
    else:
        start, end = second, len(data) - 3
    path = tmp_path / "damaged.xml.bz2"
    path.write_bytes(bytes(data))
    fast = read(path, start, end)
    reference = read_with_python_only(monkeypatch, path, start, end)
    assert fast[1] is not None
    assert fast == reference


def test_a_large_file_with_a_fault_past_the_first_pieces_keeps_every_message(tmp_path, monkeypatch):
    # Several 900 kB blocks: the fast decoder has yielded whole pieces before it stops.
    text = random.Random(0).randbytes(1 << 20).hex().encode()
    data = bytearray(bz2.compress(text) + bz2.compress(text))
    data[len(data) * 3 // 4] ^= 0x01
    path = tmp_path / "big.xml.bz2"
    path.write_bytes(bytes(data))
    fast_bytes, fast_error = read(path)
    reference_bytes, reference_error = read_with_python_only(monkeypatch, path)
    assert fast_error == reference_error
    assert fast_error is not None and fast_error[1] == "corrupt_input"
    # Both hand out a corrupt block's bytes before its CRC fails, alike; the reference
    # decoder drops the output of the call that failed, so the fast one may have handed out
    # more before the fault (never other bytes).
    shorter = min(len(fast_bytes), len(reference_bytes))
    assert shorter > CHUNK_BYTES
    assert fast_bytes[:shorter] == reference_bytes[:shorter]


def test_a_handle_that_cannot_seek_is_read_by_python_s_decoder(tmp_path, monkeypatch):
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(b"".join(STREAMS))

    class Stream(io.RawIOBase):
        def __init__(self, raw: bytes) -> None:
            self._raw = io.BytesIO(raw)

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            return self._raw.readinto(buffer)

    reader = READER._replace(open=lambda url: Stream(path.read_bytes()))

    def unexpected(*args):
        raise AssertionError("the fast decoder needs a handle that can seek")

    monkeypatch.setattr(compressed, "decompress_span", unexpected)
    assert b"".join(decompressed_chunks(reader, str(path))) == TEXT


def test_an_unfinished_reader_is_closed_at_exit():
    data = b"".join(STREAMS)
    pieces = decompress_span(io.BytesIO(data), 0, None, 1000)
    next(pieces)
    assert len(bz2_indexed._OPEN_DECODERS) == 1
    bz2_indexed._close_open_decoders()  # what atexit runs: no decoder is left for finalization
    pieces.close()
    assert len(bz2_indexed._OPEN_DECODERS) == 0
