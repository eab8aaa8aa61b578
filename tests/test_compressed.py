"""Compressed inputs in bounded pieces: a decompression bomb cannot take the memory, a
256 MiB line cannot either, and a fault is placed in the stream that holds it."""

from __future__ import annotations

import bz2
import gzip
import io
import random
import tracemalloc

import pytest
import zstandard

from pipelines.io.compressed import (
    CHUNK_BYTES,
    InputReadError,
    LongLine,
    compression_of,
    compression_suffix,
    decompressed_chunks,
    lines,
)
from pipelines.io.storage import READER

BOMB_BYTES = 48 << 20  # zeros: a few kB compressed


def zstd_compress(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)


COMPRESSORS = [(".bz2", bz2.compress), (".gz", gzip.compress), (".zst", zstd_compress)]


@pytest.mark.parametrize(("suffix", "compress"), COMPRESSORS)
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


def test_a_bz2_read_in_larger_pieces_gives_the_same_bytes_within_that_bound(tmp_path):
    """What the dump reader asks for (DUMP_BZ2_CHUNK_BYTES): pieces up to 8 MiB from the
    fast decoder, the same bytes as 1 MiB pieces; the bomb bound stays the bound asked for."""
    from pipelines.text.dumpxml import DUMP_BZ2_CHUNK_BYTES

    assert DUMP_BZ2_CHUNK_BYTES == 8 << 20
    lines = (b"<text>line %d of a page</text>\n" % i for i in range(500_000))
    data = b"".join(lines)[: 12 << 20]  # 12 MiB, in 14 bz2 blocks (random bytes: 3x slower)
    path = tmp_path / "data.xml.bz2"
    path.write_bytes(bz2.compress(data))
    small = list(decompressed_chunks(READER, str(path)))
    large = list(decompressed_chunks(READER, str(path), bz2_chunk_bytes=DUMP_BZ2_CHUNK_BYTES))
    assert b"".join(small) == b"".join(large) == data
    assert max(map(len, small)) == CHUNK_BYTES
    assert [len(piece) for piece in large] == [8 << 20, 4 << 20]


def test_concatenated_streams_and_members_still_read_whole(tmp_path):
    for suffix, compress in COMPRESSORS:
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


# --- lines: bounded by the caller's limit, whatever the input --------------------------------


@pytest.mark.parametrize(
    ("chunks", "max_bytes", "expected"),
    [
        ([b"ab", b"c\nde", b"\n\nf"], 3, [b"abc", b"de", b"", b"f"]),
        ([b"ab", b"c\nde", b"\n\nf"], 2, [LongLine(3, b"abc"), b"de", b"", b"f"]),
        ([b"abc\n", b"\n"], 2, [LongLine(3, b"abc"), b""]),
        ([b"x" * 50, b"x" * 50, b"y\nz"], 64, [LongLine(101, b"x" * 60), b"z"]),
        ([b"", b"end"], 3, [b"end"]),
        ([b"a\n"], 1, [b"a"]),  # a final newline makes no empty line
    ],
)
def test_lines_splits_across_chunks_and_flags_long_lines(chunks, max_bytes, expected):
    assert list(lines(iter(chunks), max_bytes)) == expected


@pytest.mark.parametrize(("suffix", "compress"), COMPRESSORS)
def test_a_line_of_mebibytes_is_measured_not_held(tmp_path, suffix, compress):
    # 16 MiB of "w" and no newline, as 16 streams (members) of 1 MiB: cheap to build, and
    # read back as one line.
    mebibyte = compress(b"w" * (1 << 20))
    path = tmp_path / f"book.txt{suffix}"
    path.write_bytes(compress(b"before\n") + mebibyte * 16 + compress(b"\nafter\n"))
    tracemalloc.start()
    found = list(lines(decompressed_chunks(READER, str(path)), 64 << 10))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert found == [b"before", LongLine(16 << 20, b"w" * 60), b"after"]
    assert peak < 6 * CHUNK_BYTES, peak  # the line alone is 16 MiB


# --- a fault between streams names the stream it is in ---------------------------------------


def test_a_corrupt_bz2_stream_is_named_by_its_start(tmp_path):
    streams = [bz2.compress(f"stream {n} ".encode() * 1000) for n in (1, 2, 3)]
    data = bytearray(b"".join(streams))
    second = len(streams[0])
    data[second + len(streams[1]) // 2] ^= 0xFF  # inside the second stream's block
    path = tmp_path / "three.xml.bz2"
    path.write_bytes(bytes(data))
    read = []
    with pytest.raises(InputReadError) as raised:
        for piece in decompressed_chunks(READER, str(path)):
            read.append(piece)
    assert b"".join(read) == b"stream 1 " * 1000  # everything before the fault
    error = raised.value
    assert (error.reason, error.offset) == ("corrupt_input", second)
    assert error.position == (
        f"compressed byte {second} (bz2 stream 2 starts there; the fault lies before byte "
        f"{len(data)})"
    )
    assert str(error).startswith(f"{path}: corrupt bz2 data (Invalid data stream) at ")


def test_a_corrupt_gzip_member_is_named_by_its_start(tmp_path):
    members = [gzip.compress(f"member {n} ".encode() * 1000, mtime=0) for n in (1, 2, 3)]
    data = bytearray(b"".join(members))
    second = len(members[0])
    data[second + len(members[1]) - 8] ^= 0xFF  # the second member's CRC-32
    path = tmp_path / "three.txt.gz"
    path.write_bytes(bytes(data))
    read = []
    with pytest.raises(InputReadError) as raised:
        for piece in decompressed_chunks(READER, str(path)):
            read.append(piece)
    assert b"".join(read) == b"member 1 " * 1000  # member 2's bytes failed their check
    error = raised.value
    assert (error.reason, error.offset) == ("corrupt_input", second)
    assert error.position == (
        f"compressed byte {second} (gzip stream 2 starts there; the fault lies before byte "
        f"{len(data)})"
    )
    assert "corrupt gzip data (Error -3 while decompressing data: incorrect data check)" in str(
        error
    )


def test_streams_after_the_first_chunk_are_placed_exactly(tmp_path):
    # The second stream starts past the first 1 MiB read: its offset still counts every byte.
    first = bz2.compress(random.Random(0).randbytes(1_100_000))  # incompressible
    assert len(first) > CHUNK_BYTES
    second = bytearray(bz2.compress(b"second " * 5000))
    second[len(second) // 2] ^= 0xFF
    path = tmp_path / "two.bz2"
    path.write_bytes(first + bytes(second))
    with pytest.raises(InputReadError) as raised:
        for _ in decompressed_chunks(READER, str(path)):
            pass
    assert raised.value.offset == len(first)
    assert raised.value.position.startswith(f"compressed byte {len(first)} (bz2 stream 2 ")


# --- zstd: frames walked header by header ------------------------------------------------------


def read_all(path) -> tuple[bytes, InputReadError | None]:
    """Everything yielded before a fault, and the fault."""
    read = []
    try:
        for piece in decompressed_chunks(READER, str(path)):
            read.append(piece)
    except InputReadError as error:
        return b"".join(read), error
    return b"".join(read), None


def skippable_frame(size: int) -> bytes:
    return (0x184D2A50).to_bytes(4, "little") + size.to_bytes(4, "little") + b"\x07" * size


def test_zstd_frames_of_every_kind_read_whole(tmp_path):
    # What writers produce: one-shot frames with and without a checksum or content size,
    # a streaming writer's flushed blocks, and skippable frames (metadata) between them.
    texts = [b"one-shot " * 1000, b"no checksum, no size " * 500, b"stream " * 40_000]
    streamed = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(streamed, closefd=False) as writer:
        for start in range(0, len(texts[2]), 7000):
            writer.write(texts[2][start : start + 7000])
            writer.flush()
    plain = zstandard.ZstdCompressor(write_checksum=False, write_content_size=False)
    data = (
        zstd_compress(texts[0])
        + skippable_frame(5)
        + plain.compress(texts[1])
        + skippable_frame(0)
        + streamed.getvalue()
    )
    path = tmp_path / "frames.jsonl.zst"
    path.write_bytes(data)
    assert read_all(path) == (b"".join(texts), None)


@pytest.mark.parametrize("before_chunk_end", [0, 1, 2, 3, 4, 5, 6, 9])
def test_zstd_headers_cut_by_a_read_boundary(tmp_path, before_chunk_end):
    # The next frame's magic and header start a few bytes before the first 1 MiB read ends.
    pad = CHUNK_BYTES - before_chunk_end - 8
    frames = [zstd_compress(f"frame {n} ".encode() * 50) for n in range(3)]
    path = tmp_path / "cut.zst"
    path.write_bytes(skippable_frame(pad) + b"".join(frames))
    assert read_all(path) == (b"".join(f"frame {n} ".encode() * 50 for n in range(3)), None)


def test_a_truncated_zstd_file_raises_after_yielding_what_it_holds(tmp_path):
    text = b"".join(b"line %d of the corpus\n" % n for n in range(200_000))
    data = zstd_compress(text)
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(data[: len(data) // 2])
    read, error = read_all(path)
    assert error is not None and error.reason == "truncated_input"
    assert error.offset == len(data) // 2
    assert str(error) == (
        f"{path}: the zstd data ends inside a frame (the file is truncated) at compressed "
        f"byte {len(data) // 2}"
    )
    assert read and text.startswith(read)  # every good byte before the cut came out
    path.write_bytes(data[:-1])  # only the checksum's last byte missing
    read, error = read_all(path)
    assert error is not None and error.reason == "truncated_input" and read == text


def test_a_corrupt_zstd_frame_is_named_by_its_start(tmp_path):
    frames = [zstd_compress(f"frame {n} ".encode() * 1000) for n in (1, 2, 3)]
    data = bytearray(b"".join(frames))
    second = len(frames[0])
    data[second + len(frames[1]) - 2] ^= 0xFF  # the second frame's checksum
    path = tmp_path / "three.zst"
    path.write_bytes(bytes(data))
    read, error = read_all(path)
    assert read.startswith(b"frame 1 " * 1000)
    assert error is not None and (error.reason, error.offset) == ("corrupt_input", second)
    assert error.position == (
        f"compressed byte {second} (zstd frame 2 starts there; the fault lies before byte "
        f"{len(data)})"
    )
    assert "corrupt zstd data (zstd decompressor error: Restored data doesn't match checksum)" in (
        str(error)
    )


def test_bytes_after_the_last_zstd_frame_are_no_frame(tmp_path):
    frame = zstd_compress(b"text " * 100)
    path = tmp_path / "tail.zst"
    path.write_bytes(frame + b"garbage!")
    read, error = read_all(path)
    assert read == b"text " * 100
    assert error is not None and (error.reason, error.offset) == ("corrupt_input", len(frame))
    assert error.error == "corrupt zstd data (no zstd frame starts here (magic bytes 67617262))"


@pytest.mark.parametrize("suffix", [".bz2", ".gz", ".zst", ".txt"])
def test_an_empty_file_reads_as_empty_whatever_its_codec(tmp_path, suffix):
    """One rule for every codec: 0 bytes hold no stream, so none is cut short; a file cut
    inside its first stream is still truncated."""
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(b"")
    assert list(decompressed_chunks(READER, str(path))) == []


@pytest.mark.parametrize(("suffix", "compress"), COMPRESSORS)
def test_a_file_cut_inside_its_first_stream_is_truncated(tmp_path, suffix, compress):
    path = tmp_path / f"cut{suffix}"
    path.write_bytes(compress(b"some text\n" * 100)[:8])
    with pytest.raises(InputReadError) as error:
        b"".join(decompressed_chunks(READER, str(path)))
    assert error.value.reason == "truncated_input"


@pytest.mark.parametrize(("suffix", "compress"), COMPRESSORS)
def test_the_suffix_names_the_format_in_any_case(tmp_path, suffix, compress):
    # Before, `ok.jsonl.GZ` was read as raw bytes: every line an invalid_utf8 reject.
    path = tmp_path / f"ok.jsonl{suffix.upper()}"
    path.write_bytes(compress(b'{"text": "a"}\n'))
    assert b"".join(decompressed_chunks(READER, str(path))) == b'{"text": "a"}\n'
    assert compression_suffix(str(path)) == suffix
    assert compression_suffix("a.jsonl") == ""


@pytest.mark.parametrize(("suffix", "compress"), COMPRESSORS)
def test_compressed_bytes_are_known_by_their_first_bytes(suffix, compress):
    kind = {".bz2": "bzip2", ".gz": "gzip", ".zst": "zstd"}[suffix]
    assert compression_of(compress(b"x")[:4]) == (kind, suffix)
    assert compression_of(b'{"te') is None
    assert compression_of(b"BZh!") is None  # "BZh" then no block size


def _zstd_window_frame(data: bytes, window_log: int) -> bytes:
    """A frame as `zstd --long=N` streams it: the window in its header is 2**N bytes."""
    params = zstandard.ZstdCompressionParameters.from_level(
        3, window_log=window_log, enable_ldm=True
    )
    compressor = zstandard.ZstdCompressor(compression_params=params).compressobj()
    return compressor.compress(data) + compressor.flush()


def test_a_zstd_window_over_the_bound_is_named_as_such_not_corrupt(tmp_path):
    # Before: "corrupt zstd data (zstd decompressor error: Frame requires too much memory
    # for decoding)". A window of 128 MiB (zstd's default limit) is read; 2 GiB is refused.
    path = tmp_path / "long.jsonl.zst"
    at_bound = _zstd_window_frame(b"first\n", 27)
    assert zstandard.get_frame_parameters(at_bound).window_size == 128 << 20
    path.write_bytes(at_bound + _zstd_window_frame(b"second\n", 31))
    pieces = []
    with pytest.raises(InputReadError) as raised:
        for piece in decompressed_chunks(READER, str(path)):
            pieces.append(piece)
    assert b"".join(pieces) == b"first\n"
    err = raised.value
    assert (err.reason, err.offset) == ("zstd_window_too_large", len(at_bound))
    assert str(err) == (
        f"{path}: zstd frame 2 needs a window of 2,048 MiB (as zstd --long=31 writes), over "
        "the 128 MiB this reader decodes with (zstd's own default limit): recompress it with "
        "a smaller window, e.g. zstd -d --long=31 -c FILE | zstd -19 -o NEW.zst at compressed "
        f"byte {len(at_bound)} (zstd frame 2 starts there)"
    )


@pytest.mark.parametrize("zeros", [1, 512, CHUNK_BYTES + 7])  # the last: over a chunk's end
def test_zeros_after_the_last_gzip_member_are_padding(tmp_path, zeros):
    # Tape and blocked writers pad a .gz with zeros; `gzip -t` accepts it. Before, the zeros
    # were a second member that failed: corrupt_input, exit 1.
    path = tmp_path / "padded.jsonl.gz"
    path.write_bytes(gzip.compress(b"one\n") + gzip.compress(b"two\n") + b"\0" * zeros)
    assert b"".join(decompressed_chunks(READER, str(path))) == b"one\ntwo\n"


def test_only_zeros_may_pad_a_gzip_file(tmp_path):
    path = tmp_path / "padded.jsonl.gz"
    member = gzip.compress(b"one\n")
    path.write_bytes(member + b"\0" * 5 + b"x")
    pieces = []
    with pytest.raises(InputReadError) as raised:
        for piece in decompressed_chunks(READER, str(path)):
            pieces.append(piece)
    assert (b"".join(pieces), raised.value.reason) == (b"one\n", "corrupt_input")
    assert str(raised.value) == (
        f"{path}: a byte other than zero in the zero padding after the last gzip stream (only "
        f"zeros may follow it) at compressed byte {len(member) + 5}"
    )
    path.write_bytes(b"\0" * 16)  # zeros and no member: not padding
    with pytest.raises(InputReadError) as raised:
        b"".join(decompressed_chunks(READER, str(path)))
    assert raised.value.error.startswith("corrupt gzip data (")
