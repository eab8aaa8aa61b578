"""Reading (possibly compressed) input files in bounded chunks, loudly on damage. Beam-free:
files are opened through the `Reader` the caller passes (a Beam stage passes Beam's, so its
filesystem flags apply; tools pass `pipelines.io.storage.READER`).

The format is the name's suffix, in any case (`.gz`, `.GZ`); a caller that reads a name
without one as text can ask `compression_of` whether its first bytes are compressed.

Why not Beam's `FileSystems.open(path)` with automatic decompression: for a truncated .gz it
returns the readable part and no error, which is silent data loss; and it cannot start at a
byte offset inside a multistream .bz2. Here `.bz2` (any number of concatenated streams),
`.gz` (any number of members) and `.zst` (any number of frames, skippable ones skipped) are
decompressed by hand, and a file that ends inside a stream or holds corrupt data raises
`InputReadError` with the compressed byte offset, after every byte before the fault has been
yielded. For corrupt data that offset is the start of the
stream (or member) that failed, and the message says which one it is and the byte before
which the fault lies: a multistream dump holds hundreds of thousands of streams, and the
decompressor cannot say more exactly where inside one it went wrong.

A `.bz2` file that can seek is decompressed by indexed_bzip2's decoder
(`pipelines.io.bz2_indexed`), which spends less CPU than Python's `bz2`; where that decoder
stops on a fault, or cannot vouch that the data ended where a stream ends, the bytes are
read again with Python's decoder, past what was already yielded, so faults are placed and
worded as above and the bytes before them are the same.

An empty file (0 bytes) reads as empty whatever its suffix, exactly as an empty
uncompressed file does: it holds no stream, so none is cut short in it (`gzip` and `bzip2`
themselves write a header even for no data, but an empty `.gz`, `.bz2` or `.zst` is still
nothing lost). What an empty input means is the stage's to say (an empty book is
`not_text`).
"""

from __future__ import annotations

import bz2
import itertools
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import zstandard

from pipelines.io.bz2_indexed import Unverified, decompress_span
from pipelines.io.storage import Reader

# 1 MiB reads keep memory flat and amortise Python overhead; one bz2 block is ≤ 900 kB.
CHUNK_BYTES = 1 << 20


class InputReadError(Exception):
    """An input file could not be read to its end. Everything before the fault was yielded."""

    def __init__(
        self, path: str, position: str, error: str, reason: str, offset: int | None = None
    ) -> None:
        super().__init__(f"{path}: {error} at {position}")
        self.path = path
        self.position = position
        self.error = error
        self.reason = reason  # a stable code: truncated_input, corrupt_input, bad_index, …
        self.offset = offset  # compressed byte the position names, when it names one


class Position:
    """Compressed byte offset reached so far, for error messages."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset


def decompressed_chunks(
    reader: Reader,
    path: str,
    start: int = 0,
    end: int | None = None,
    position: Position | None = None,
    *,
    bz2_chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[bytes]:
    """Bytes [start, end) of `path`, decompressed by suffix, in chunks of bounded size.

    `bz2_chunk_bytes`: the most a chunk holds when indexed_bzip2's decoder reads a .bz2
    (the reference decoder and the other formats keep CHUNK_BYTES)."""
    position = position if position is not None else Position(start)
    remaining = None if end is None else end - start
    with reader.open(path) as handle:  # the stored bytes: we decompress them ourselves
        if start:
            handle.seek(start)
        suffix = compression_suffix(path)
        if suffix == ".bz2":
            yield from _bunzip(handle, path, start, end, position, bz2_chunk_bytes)
            return
        raw_chunks = _raw_chunks(handle, remaining, position)
        if suffix == ".gz":
            yield from _gunzip_members(raw_chunks, position, path)
        elif suffix == ".zst":
            yield from _unzstd_frames(raw_chunks, position, path)
        else:
            yield from raw_chunks


COMPRESSION_SUFFIXES = (".bz2", ".gz", ".zst")
# The bytes each format's data starts with (RFC 1952; bzip2's "BZh" and block size; RFC 8878).
_MAGICS = (
    (b"\x1f\x8b", "gzip", ".gz"),
    (b"BZh", "bzip2", ".bz2"),
    (b"\x28\xb5\x2f\xfd", "zstd", ".zst"),
)


def compression_suffix(path: str) -> str:
    """ ".bz2", ".gz" or ".zst" as the name ends (in any case: `A.JSONL.GZ` is gzip), or ""."""
    name = path.lower()
    return next((suffix for suffix in COMPRESSION_SUFFIXES if name.endswith(suffix)), "")


def compression_of(head: bytes) -> tuple[str, str] | None:
    """(format, suffix) of compressed data that starts with `head` (its first 4 bytes), or
    None: what a file named as plain but holding gzip, bzip2 or zstd bytes shows."""
    for magic, kind, suffix in _MAGICS:
        if head.startswith(magic) and (kind != "bzip2" or head[3:4] in b"123456789"):
            return kind, suffix
    return None


@dataclass(frozen=True)
class LongLine:
    """A line longer than the caller's limit: measured while it streams past, never held."""

    length: int  # bytes, without the b"\\n"
    head: bytes  # its first bytes, for a message

    HEAD_BYTES = 60


def lines(chunks: Iterator[bytes], max_bytes: int) -> Iterator[bytes | LongLine]:
    """Split byte chunks into lines (without the b"\\n"); a line over `max_bytes` is a LongLine.

    Memory stays bounded by `max_bytes` plus one chunk whatever the input: the bytes of an
    over-long line are counted and dropped as they arrive (a 256 MiB line costs nothing),
    so the caller decides what a LongLine means (a reject, a bad index) and reads on.
    """
    pending: list[bytes] = []  # the start of a line that goes on in a later chunk
    pending_bytes = 0
    skipped: int | None = None  # bytes of an over-long line so far, while skipping it
    head = b""
    for chunk in chunks:
        *ended, rest = chunk.split(b"\n")
        for part in ended:  # each ends a line
            if skipped is None and not pending and len(part) <= max_bytes:
                yield part  # the common case: a whole line inside one chunk
                continue
            length = (pending_bytes if skipped is None else skipped) + len(part)
            if length <= max_bytes:
                yield b"".join([*pending, part])
            else:
                if skipped is None:
                    head = b"".join([*pending, part[: LongLine.HEAD_BYTES]])
                yield LongLine(length, head[: LongLine.HEAD_BYTES])
            pending, pending_bytes, skipped = [], 0, None
        if skipped is not None:
            skipped += len(rest)
        elif pending_bytes + len(rest) > max_bytes:
            head = b"".join([*pending, rest[: LongLine.HEAD_BYTES]])
            skipped = pending_bytes + len(rest)
            pending, pending_bytes = [], 0
        elif rest:
            pending.append(rest)
            pending_bytes += len(rest)
    if skipped is not None:
        yield LongLine(skipped, head[: LongLine.HEAD_BYTES])
    elif pending:
        yield b"".join(pending)


def _raw_chunks(handle: BinaryIO, remaining: int | None, position: Position) -> Iterator[bytes]:
    while remaining is None or remaining > 0:
        size = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
        chunk = handle.read(size)
        if not chunk:
            return
        if remaining is not None:
            remaining -= len(chunk)
        yield chunk
        position.offset += len(chunk)


def _bunzip(
    handle: BinaryIO,
    path: str,
    start: int,
    end: int | None,
    position: Position,
    chunk_bytes: int,
) -> Iterator[bytes]:
    """Bytes [start, end) of a .bz2 file decompressed, by the fast decoder where it can."""
    remaining = None if end is None else end - start
    yielded = 0
    if handle.seekable():
        head = handle.read(3 if remaining is None else min(3, remaining))
        if head == b"BZh":  # anything else: the reference decoder says what is wrong
            try:
                for out in decompress_span(handle, start, end, chunk_bytes, head):
                    yielded += len(out)
                    yield out
                return
            except Unverified:
                pass  # read it again below: the reference decoder places the fault
        handle.seek(start)
    # Python's decoder, past the `yielded` bytes the fast one already gave.
    raw_chunks = _raw_chunks(handle, remaining, position)
    for out in _bunzip_streams(raw_chunks, position, path, start):
        if yielded >= len(out):
            yielded -= len(out)
            continue
        yield out[yielded:] if yielded else out
        yielded = 0


def _bunzip_streams(
    raw_chunks: Iterator[bytes], position: Position, path: str, start: int
) -> Iterator[bytes]:
    """Decompress concatenated bz2 streams (multistream dumps hold hundreds of thousands)."""
    first = next(raw_chunks, b"")
    if first and not first.startswith(b"BZh"):
        raise InputReadError(
            path,
            f"byte {start}",
            "no bz2 stream starts here (is the index for this file?)",
            "bad_index" if start else "corrupt_input",
            start,
        )
    # An empty file holds no stream, so none ends early in it: it reads as empty, as an
    # empty .gz, .zst or plain file does (the module docstring).
    chunks = itertools.chain([first], raw_chunks) if first else raw_chunks
    yield from _decompress_concatenated(chunks, position, path, bz2.BZ2Decompressor, "bz2")


def _only_zeros(data: bytes, start: int, path: str, kind: str) -> None:
    """Nothing if `data` (file bytes from `start`) is all zeros: padding after the last stream."""
    stripped = data.lstrip(b"\0")
    if stripped:
        at = start + len(data) - len(stripped)
        raise InputReadError(
            path,
            f"compressed byte {at}",
            f"a byte other than zero in the zero padding after the last {kind} stream (only "
            "zeros may follow it)",
            "corrupt_input",
            at,
        )


def _gunzip_members(raw_chunks: Iterator[bytes], position: Position, path: str) -> Iterator[bytes]:
    def new_decompressor():
        return zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or zlib header

    yield from _decompress_concatenated(
        raw_chunks, position, path, new_decompressor, "gzip", zero_padding=True
    )


def _decompress_concatenated(
    raw_chunks: Iterator[bytes],
    position: Position,
    path: str,
    new_decompressor,
    kind: str,
    *,
    zero_padding: bool = False,
) -> Iterator[bytes]:
    """Decompress back-to-back streams (bz2) or members (gzip); raise on corrupt or cut data.

    `zero_padding`: zero bytes after a whole stream, to the file's end, are padding (tape and
    blocked writers pad a .gz so; `gzip -t` accepts it: no member starts with a zero byte),
    not a stream; anything but zeros after them is corrupt.

    No call produces more than CHUNK_BYTES: a few hundred compressed bytes can stand for
    gigabytes (a "decompression bomb"), and memory must stay bounded whatever the input.
    A corrupt stream is named by its number and the compressed byte where it starts (the
    bytes after an ended stream are the next one's, so each start is exact).
    """
    decompressor = new_decompressor()
    in_stream = padded = False
    stream_number, stream_start = 1, position.offset
    for chunk in raw_chunks:
        chunk_end = position.offset + len(chunk)  # position.offset: where this chunk starts
        data = chunk
        while True:
            if zero_padding and stream_number > 1 and not in_stream and data[:1] == b"\0":
                padded = True  # the rest of the file must be zeros
            if padded:
                _only_zeros(data, chunk_end - len(data), path, kind)
                break
            try:
                out = decompressor.decompress(data, CHUNK_BYTES)
            except (OSError, zlib.error) as err:  # bz2: "Invalid data stream"
                where = (
                    f"compressed byte {stream_start} ({kind} stream {stream_number} starts "
                    f"there; the fault lies before byte {chunk_end})"
                )
                raise InputReadError(
                    path, where, f"corrupt {kind} data ({err})", "corrupt_input", stream_start
                ) from err
            in_stream = True
            if out:
                yield out
            if decompressor.eof:
                data = decompressor.unused_data
                decompressor = new_decompressor()
                in_stream = False
                stream_number += 1
                stream_start = chunk_end - len(data)  # unused_data: this chunk's last bytes
                if not data:
                    break
                continue
            # Input held back by the output limit: zlib hands it back, bz2 keeps it inside.
            data = getattr(decompressor, "unconsumed_tail", b"")
            if not data and getattr(decompressor, "needs_input", True):
                break
    if in_stream:
        raise InputReadError(
            path,
            f"compressed byte {position.offset}",
            f"the {kind} data ends inside a stream (the file is truncated)",
            "truncated_input",
            position.offset,
        )


# --- zstd: frames walked block by block, so no call decompresses more than CHUNK_BYTES ------

_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MAGICS = range(0x184D2A50, 0x184D2A60)
# The most one block decompresses to (the format's Block_Maximum_Size): feeding at most this
# many whole blocks per call bounds each call's output by CHUNK_BYTES. zstandard's
# decompressobj has no output limit (200 compressed bytes of zeros gave 5.9 MB), so the
# frames are walked here, header by header, and fed to it in bounded spans.
_ZSTD_BLOCK_BYTES = 128 << 10
_BLOCKS_PER_CALL = CHUNK_BYTES // _ZSTD_BLOCK_BYTES
# The largest window (the history a frame's blocks refer back into, held while it is
# decoded) a frame may need: 128 MiB, zstd's own default limit (`zstd -d` refuses more
# unless given --long or --memory). `zstd --long=31` writes frames of a 2 GiB window; such a
# frame fails its file, saying so, rather than a worker taking gigabytes.
ZSTD_MAX_WINDOW_BYTES = 128 << 20


class _ZstdFault(Exception):
    """Bytes that are not zstd where the format says a header is."""


class _ZstdWalker:
    """Where the bytes seen so far stand in the frame format (RFC 8878): which header is
    being read, and how many bytes of a block's content or a skipped frame remain."""

    def __init__(self) -> None:
        self.header = bytearray()  # the bytes of the header being read
        self.state = "magic"  # magic, skippable, frame_header, block_header, body, checksum
        self.remaining = 0  # bytes left of the body, checksum or skipped frame
        self.checksum = False
        self.last_block = False
        self.window = 0  # bytes of the frame being read's window, once its header is read

    @property
    def between_frames(self) -> bool:
        return self.state == "magic" and not self.header

    def _frame_header_bytes(self) -> int:
        """The frame header's length, once its descriptor byte (the 5th) is known."""
        descriptor = self.header[4]
        if descriptor & 0x08:
            raise _ZstdFault("a reserved bit of the frame header is set")
        single_segment = bool(descriptor & 0x20)
        content_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
        self.checksum = bool(descriptor & 0x04)
        return 5 + (not single_segment) + (0, 1, 2, 4)[descriptor & 0x03] + content_size

    def step(self, data: bytes, index: int) -> tuple[int, str]:
        """Consume bytes of `data` from `index` up to the next event; return the new index
        and the event: "", "frame" (a frame starts at the returned index's first byte read),
        "skip_end", "block" (a whole block was passed), "frame_end"."""
        state = self.state
        if state in ("body", "checksum", "skippable_body"):
            taken = min(self.remaining, len(data) - index)
            self.remaining -= taken
            index += taken
            if self.remaining:
                return index, ""
            if state == "skippable_body":
                self.state = "magic"
                return index, "skip_end"
            if state == "checksum":
                self.state = "magic"
                return index, "frame_end"
            return index, self._block_passed()
        need = {"magic": 4, "skippable": 8, "block_header": 3}.get(state)
        if state == "frame_header":
            need = self._frame_header_bytes() if len(self.header) >= 5 else 5
        assert need is not None
        taken = min(need - len(self.header), len(data) - index)
        self.header += data[index : index + taken]
        index += taken
        if len(self.header) < need:
            return index, ""
        if state == "magic":
            magic = int.from_bytes(self.header[:4], "little")
            if magic in _SKIPPABLE_MAGICS:
                self.state = "skippable"
                return index, ""
            if magic != _ZSTD_MAGIC:
                raise _ZstdFault(f"no zstd frame starts here (magic bytes {self.header.hex()})")
            self.state = "frame_header"
            return index, "frame"
        if state == "skippable":
            self.remaining = int.from_bytes(self.header[4:8], "little")
            self.header.clear()
            self.state = "skippable_body" if self.remaining else "magic"
            return index, "" if self.remaining else "skip_end"
        if state == "frame_header":
            if need == 5:  # the descriptor is in: read the rest of the header
                return index, ""
            self.window = _window_bytes(bytes(self.header))
            self.header.clear()
            self.state = "block_header"
            return index, ""
        header = int.from_bytes(self.header, "little")  # a block header
        self.header.clear()
        self.last_block = bool(header & 1)
        kind = (header >> 1) & 3
        if kind == 3:
            raise _ZstdFault("a block header has the reserved block type")
        self.remaining = 1 if kind == 1 else header >> 3  # an RLE block holds one byte
        self.state = "body"
        if not self.remaining:
            return index, self._block_passed()
        return index, ""

    def _block_passed(self) -> str:
        if not self.last_block:
            self.state = "block_header"
        elif self.checksum:
            self.state, self.remaining = "checksum", 4
        else:
            self.state = "magic"
            return "frame_end"
        return "block"


def _window_bytes(header: bytes) -> int:
    """The window a frame needs, from its whole header (magic included; RFC 8878 3.1.1.1):
    the window descriptor's, or a single-segment frame's content size."""
    descriptor = header[4]
    if not descriptor & 0x20:  # the window descriptor follows
        exponent, mantissa = header[5] >> 3, header[5] & 0x07
        base = 1 << (10 + exponent)
        return base + (base >> 3) * mantissa
    size_bytes = (1, 2, 4, 8)[descriptor >> 6]
    size = int.from_bytes(header[len(header) - size_bytes :], "little")
    return size + 256 if size_bytes == 2 else size


def _unzstd_frames(raw_chunks: Iterator[bytes], position: Position, path: str) -> Iterator[bytes]:
    """Decompress concatenated zstd frames (`zstd -c` of several files, a writer's flushes);
    skippable frames hold no text and are passed over. A fault is placed as gzip's are: by
    the frame that holds it, numbered, with the compressed byte where that frame starts.
    """
    factory = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_BYTES)
    walker = _ZstdWalker()
    decompressor = None
    frame_number, frame_start, next_start = 0, position.offset, position.offset

    def fault(error: str, chunk_end: int) -> InputReadError:
        where = (
            f"compressed byte {frame_start} (zstd frame {frame_number} starts there; the "
            f"fault lies before byte {chunk_end})"
        )
        error = f"corrupt zstd data ({error})"
        return InputReadError(path, where, error, "corrupt_input", frame_start)

    for chunk in raw_chunks:
        chunk_start, chunk_end = position.offset, position.offset + len(chunk)
        index = fed = blocks = 0  # chunk[fed:index] is read but not yet decompressed
        while index < len(chunk):
            if walker.between_frames:
                next_start = chunk_start + index
            try:
                index, event = walker.step(chunk, index)
            except _ZstdFault as err:
                if walker.state == "magic":  # what should have been the next frame
                    frame_number, frame_start = frame_number + 1, next_start
                raise fault(str(err), chunk_end) from None
            if event == "frame":
                frame_number, frame_start = frame_number + 1, next_start
                decompressor = factory.decompressobj()
                fed = max(index - 4, 0)
                if index < 4:  # the magic began in the chunk before: its start is fed here
                    decompressor.decompress(_ZSTD_MAGIC.to_bytes(4, "little")[: 4 - index])
            elif event == "skip_end":
                fed = index
            if walker.state == "block_header" and walker.window > ZSTD_MAX_WINDOW_BYTES:
                raise _window_too_large(path, walker.window, frame_number, frame_start)
            elif event in ("block", "frame_end"):
                blocks += 1
            if blocks >= _BLOCKS_PER_CALL or event == "frame_end" or index == len(chunk):
                if decompressor is not None and index > fed:
                    try:
                        out = decompressor.decompress(chunk[fed:index])
                    except zstandard.ZstdError as err:
                        raise fault(str(err), chunk_end) from err
                    if out:
                        yield out
                fed, blocks = index, 0
                if event == "frame_end":
                    if decompressor is None or not decompressor.eof:
                        raise fault("the frame's blocks end before its data does", chunk_end)
                    decompressor = None
    if not walker.between_frames:
        raise InputReadError(
            path,
            f"compressed byte {position.offset}",
            "the zstd data ends inside a frame (the file is truncated)",
            "truncated_input",
            position.offset,
        )


def _window_too_large(path: str, window: int, number: int, start: int) -> InputReadError:
    log = (window - 1).bit_length()  # the --long that decodes it: 2**log bytes at least
    error = (
        f"zstd frame {number} needs a window of {window / (1 << 20):,.0f} MiB (as zstd "
        f"--long={log} writes), over the {ZSTD_MAX_WINDOW_BYTES >> 20} MiB this reader decodes "
        "with (zstd's own default limit): recompress it with a smaller window, e.g. "
        f"zstd -d --long={log} -c FILE | zstd -19 -o NEW.zst"
    )
    where = f"compressed byte {start} (zstd frame {number} starts there)"
    return InputReadError(path, where, error, "zstd_window_too_large", start)
