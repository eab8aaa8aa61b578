"""Reading shards: `read_verified_samples` is how the trainer and `inspect` read: the
block table first (its exact recorded bytes, its sha256 checked), then by byte range, block
by block, each block's samples released only after its sha256 matched the table, and never a
byte past what the manifest and table record (`read_verified_blocks` hands out the verified
blocks as they are, a SampleBlock each: its bytes and where its samples lie in them, which
is what the training loader holds). A remote block (or block table) whose sha256 does not
match is read once more before it fails: a response damaged in transit is served right the
next time, and logged; a mismatch seen twice is the stored object's. A listed shard that is
not on the storage is said so in one line. The plain stream reader, `iter_tar_samples`,
turns a truncated or corrupt tar into a `ShardReadError` that names the shard and the last
good sample; it reads 2.x shards (a member per block of samples) and 1.x shards (a member
per sample).
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
from collections.abc import Callable, Iterator
from typing import BinaryIO, NamedTuple

import numpy as np

from pipelines.io.shards.tar import TAR_BLOCK, ZERO_BLOCK
from pipelines.io.storage import NotAFileError, is_remote, read_exactly, redact
from schemas.checks import RecordError
from schemas.examples import (
    EXAMPLE_MEMBER,
    MAX_BLOCK_MEMBER_BYTES,
    SAMPLES_MEMBER,
    sample_bounds,
    sample_key,
)
from schemas.shards import ShardInfo, block_table_path

_LOG = logging.getLogger(__name__)

_READ_BYTES = 1 << 20
_FILE_TYPES = (b"0", b"\0")
_PAX_TYPES = (b"x", b"g")  # extended headers: their payload is metadata, not a sample
_DIRECTORY = b"5"


class ShardReadError(OSError):
    """A shard could not be read: wrong checksum, truncated or not a tar file."""


RangeOpener = Callable[[int, int], BinaryIO]  # (first byte, end byte) → a stream of them


class SampleBlock(NamedTuple):
    """A tar member's samples, kept as the member's bytes. A 2.x block: sample i is
    data[starts[i]:ends[i]], keyed first + i (`first`: the member's key, a number). A 1.x
    member is one sample, the whole of `data`, keyed `key` (starts and ends None)."""

    key: str
    first: int | None
    data: bytes
    starts: np.ndarray | None
    ends: np.ndarray | None

    @property
    def count(self) -> int:
        return 1 if self.starts is None else len(self.starts)

    def samples(self) -> list[tuple[str, bytes]]:
        """`(key, bytes)` of each of its samples, as `iter_tar_samples` yields them."""
        return _samples(self)


# SampleBlock(*fields) without the Python-level __new__ a NamedTuple has: the tar reader
# makes one a member, and a 1.x shard has a member a sample.
_block_of = functools.partial(tuple.__new__, SampleBlock)


def _samples(member: SampleBlock) -> list[tuple[str, bytes]]:
    key, first, data, starts, ends = member
    if starts is None or ends is None or first is None:
        return [(key, data)]
    keys = map(sample_key, range(first, first + len(starts)))
    samples = [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    return list(zip(keys, samples, strict=True))


def load_blocks(open_table: RangeOpener, name: str, info: ShardInfo) -> ShardInfo:
    """The entry with its blocks, read from its block table through `open_table(start, end)`
    (the table file's bytes): exactly the size the manifest records, never a byte more, and
    used only once its sha256 matched. An entry with its blocks inline is returned as it is."""
    table = info.block_table
    if table is None or info.blocks:
        return info
    where = f"{name}: its block table {block_table_path(name.rsplit('/', 1)[-1])}"

    def read() -> bytes:
        try:
            with open_table(0, table.bytes) as stream:
                return read_exactly(stream, table.bytes)
        except FileNotFoundError as error:
            raise ShardReadError(
                f"{where} is missing, so none of the shard's samples can be verified; restore "
                "it with the shard or rebuild the shards"
            ) from error
        except NotAFileError as error:  # a FIFO or a directory in its place: never waited on
            raise ShardReadError(f"{where}: {error}") from error
        except ShardReadError as error:  # ResumingStream: it ended before the recorded size
            raise ShardReadError(f"{name}: {error}") from error

    data = read()
    if len(data) != table.bytes:
        raise ShardReadError(
            f"{where} ends after {len(data):,} bytes, the manifest records {table.bytes:,}; "
            "rebuild the shards or restore it from the source"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != table.sha256 and is_remote(name):
        data, digest = _read_again(read, table.sha256, digest, where)
    if digest != table.sha256:
        raise ShardReadError(
            f"{where} does not match the manifest's sha256 ({digest[:16]}… against "
            f"{table.sha256[:16]}…); none of the shard's samples was used. It was changed or "
            "damaged after writing: rebuild the shards or restore it from the source"
        )
    try:
        return info.with_blocks(data, where)
    except RecordError as error:  # matched the manifest, so the writer wrote it wrong
        raise ShardReadError(f"{error}; rebuild the shards") from error


def read_verified_samples(
    open_range: RangeOpener,
    name: str,
    info: ShardInfo,
    skip: int = 0,
    take: int | None = None,
    open_table: RangeOpener | None = None,
) -> Iterator[tuple[str, bytes]]:
    """Samples [skip, skip + take) of a shard as `(key, bytes)`, none released before its
    block's bytes are verified (`read_verified_blocks`, which says how)."""
    stop = info.samples if take is None else min(info.samples, skip + take)
    for first, blocks in read_verified_blocks(open_range, name, info, skip, take, open_table):
        samples = [sample for block in blocks for sample in block.samples()]
        yield from samples[max(0, skip - first) : stop - first]


def read_verified_blocks(
    open_range: RangeOpener,
    name: str,
    info: ShardInfo,
    skip: int = 0,
    take: int | None = None,
    open_table: RangeOpener | None = None,
) -> Iterator[tuple[int, list[SampleBlock]]]:
    """The blocks that hold samples [skip, skip + take) of a shard, each only after its bytes
    are verified: (the number of its first sample in the shard, its members' SampleBlocks,
    one for a 2.x block, one a sample for a 1.x block). The caller takes the samples it asked
    for out of the first and last.

    Reads only the blocks that hold the samples, as one byte range from `open_range(start,
    end)`, one block at a time: a block's bytes must be exactly the size and sha256 its
    block table records, and hold exactly its samples, before any of them is handed out (a
    remote block that does not match is read once more, `_read_again`). The
    block table of a 2.1 entry is read first, through `open_table` (`load_blocks`), and only
    when there is something to read; a 1.1 or 2.0 entry lists its blocks inline. A shard
    listed without blocks (a 1.0 manifest) is one block: it is held in memory whole,
    `info.bytes` at most, before use. Errors name the shard, the samples and the byte range.
    """
    stop = info.samples if take is None else min(info.samples, skip + take)
    if stop <= skip:
        return
    if info.block_table is not None and not info.blocks:
        if open_table is None:
            raise ValueError(f"{name}: its blocks are in its block table; pass open_table")
        info = load_blocks(open_table, name, info)
    spans = [span for span in info.spans() if span.first < stop and span.stop > skip]
    if not spans:
        return
    with open_range(spans[0].start, spans[-1].end) as stream:
        for span in spans:
            where = f"samples {span.first}–{span.stop - 1} (bytes {span.start:,}–{span.end:,})"
            data = _read_span(stream, span.end - span.start, name)  # never a byte more
            if len(data) != span.end - span.start:
                raise ShardReadError(
                    f"{name}: ends inside {where}, after {span.start + len(data):,} bytes; the "
                    "shard is truncated: rebuild it or restore it from the source"
                )
            digest = hashlib.sha256(data).hexdigest()
            if digest != span.sha256 and is_remote(name):
                again = functools.partial(_read_range, open_range, span.start, span.end, name)
                data, digest = _read_again(again, span.sha256, digest, f"{name}: {where}")
            if digest != span.sha256:
                raise ShardReadError(
                    f"{name}: {where} do not match the manifest's sha256 ({digest[:16]}… "
                    f"against {span.sha256[:16]}…); none of them was used. The shard was "
                    "changed or damaged after writing: rebuild it or restore it from the source"
                )
            final = span.end == info.bytes  # the last block holds the end-of-archive bytes
            blocks = list(
                iter_tar_blocks(io.BytesIO(data), name, end_of_archive=final, size=len(data))
            )
            held = sum(1 if block.starts is None else len(block.starts) for block in blocks)
            if held != span.stop - span.first:
                raise ShardReadError(
                    f"{name}: {where} hold {held} samples, the manifest says "
                    f"{span.stop - span.first}; rebuild the shards"
                )
            yield span.first, blocks


def _read_span(stream: BinaryIO, size: int, name: str) -> bytes:
    """`size` bytes of a shard the manifest lists; its absence said as such, in one line."""
    try:
        return read_exactly(stream, size)
    except FileNotFoundError as error:
        raise ShardReadError(
            f"{name}: listed in the manifest but not on the storage: restore it or rebuild "
            "the shards"
        ) from error


def _read_range(open_range: RangeOpener, start: int, end: int, name: str) -> bytes:
    with open_range(start, end) as stream:
        return _read_span(stream, end - start, name)


def _read_again(
    read: Callable[[], bytes], sha256: str, digest: str, where: str
) -> tuple[bytes, str]:
    """Bytes of a remote file that did not match their sha256, read once more: a response
    damaged in transit (a proxy, a faulty link) is served right the next time, while an
    object changed or damaged on the storage fails again. (bytes, their sha256)."""
    data = read()
    again = hashlib.sha256(data).hexdigest()
    if again == sha256:
        _LOG.warning(
            "%s did not match the manifest's sha256 (%s…) as first read, and did when read "
            "again: a fault in transit, not in the stored object; nothing damaged was used",
            redact(where),
            digest[:16],
        )
    return data, again


def iter_tar_samples(
    stream: BinaryIO,
    name: str,
    chunk_bytes: int = _READ_BYTES,
    end_of_archive: bool = True,
    size: int | None = None,
) -> Iterator[tuple[str, bytes]]:
    """Stream `(key, example bytes)` out of a shard (`iter_tar_blocks`, which says how a
    shard is read and checked): a block's samples keyed first + i."""
    for member in _members(stream, name, chunk_bytes, end_of_archive, size):
        if member.starts is None:  # a 1.x member: one sample
            yield member.key, member.data
        else:
            yield from _samples(member)


def iter_tar_blocks(
    stream: BinaryIO,
    name: str,
    chunk_bytes: int = _READ_BYTES,
    end_of_archive: bool = True,
    size: int | None = None,
) -> Iterator[SampleBlock]:
    """Stream a shard's members as SampleBlocks; errors name the shard and position.

    A ustar reader of its own: the writer's headers are fixed-format, so a member is its
    name, its octal size and its payload, parsed from 1 MiB reads with no TarInfo per member
    (`python -m bench.loader` compares it with Python's tarfile). It requires the
    end-of-archive blocks, so a shard cut anywhere, even exactly at a member boundary
    (which tarfile accepts as a complete archive), is an error. pax headers are skipped;
    anything else that is not a regular `KEY.examples.bin` block (or a 1.x `KEY.example.bin`
    sample) is refused; a block's samples are keyed first key + i. With
    `end_of_archive=False` (a block from the middle of a shard) the stream may instead end
    exactly after a member.

    A member's size is checked before any of it is read: at most the largest block the format
    allows (`MAX_BLOCK_MEMBER_BYTES`), and, with `size` (the stream's bytes, when known), at
    most what is left of the stream; a block's sample count at most `BLOCK_SAMPLES`. A header
    or block that claims more is an error naming the shard, the member and its byte, so memory
    follows the bytes there are, never what a header claims.
    """
    return _members(stream, name, chunk_bytes, end_of_archive, size)


def _members(
    stream: BinaryIO,
    name: str,
    chunk_bytes: int,
    end_of_archive: bool,
    size: int | None,
) -> Iterator[SampleBlock]:
    """`iter_tar_blocks`, its generator."""
    buffer = b""
    offset = 0
    read = 0  # bytes taken from the stream, for the error messages
    last_key: str | None = None

    def truncated(where: str) -> ShardReadError:
        after = f"after sample {last_key}" if last_key else "before its first sample"
        return ShardReadError(
            f"{name}: ends after {read:,} bytes {where}, {after}; the shard is truncated: "
            "rebuild it or restore it from the source"
        )

    while True:
        if len(buffer) - offset < TAR_BLOCK:
            more = read_exactly(stream, TAR_BLOCK - (len(buffer) - offset), chunk_bytes)
            read += len(more)
            buffer = buffer[offset:] + more
            offset = 0
            if not buffer and not end_of_archive:
                return
            if len(buffer) < TAR_BLOCK:
                raise truncated("without the tar end-of-archive blocks")
        header = buffer[offset : offset + TAR_BLOCK]
        if header == ZERO_BLOCK:
            rest = buffer[offset + TAR_BLOCK :]
            if len(rest) < TAR_BLOCK:
                more = read_exactly(stream, TAR_BLOCK - len(rest), TAR_BLOCK)
                read += len(more)
                rest += more
            if rest[:TAR_BLOCK] != ZERO_BLOCK:
                raise truncated("after one end-of-archive block")
            return
        member, member_size, kind = _parse_header(header, name, last_key)
        _check_member_size(name, member, read - (len(buffer) - offset), member_size, size)
        end = offset + TAR_BLOCK + member_size
        if len(buffer) < end:
            more = read_exactly(stream, end - len(buffer), chunk_bytes)
            read += len(more)
            buffer = buffer[offset:] + more
            end -= offset
            offset = 0
            if len(buffer) < end:
                got = len(buffer) - TAR_BLOCK
                raise truncated(f"inside member {member!r} ({got} of {member_size} bytes)")
        data = buffer[offset + TAR_BLOCK : end]
        offset = end + (-member_size % TAR_BLOCK)
        if offset > len(buffer):  # the padding runs past this read: skip the rest of it
            more = read_exactly(stream, offset - len(buffer), chunk_bytes)
            read += len(more)
            buffer, offset = more[offset - len(buffer) :], 0
        if kind in _PAX_TYPES:
            _check_pax(name, member, data)
            continue
        if kind == _DIRECTORY:
            continue
        key, _, suffix = member.partition(".")
        if kind not in _FILE_TYPES or suffix not in (SAMPLES_MEMBER, EXAMPLE_MEMBER):
            raise ShardReadError(
                f"{name}: member {member!r} is not a bertkit block of samples "
                f"(expected a regular file KEY.{SAMPLES_MEMBER}, or KEY.{EXAMPLE_MEMBER})"
            )
        if suffix == EXAMPLE_MEMBER:  # a 1.x shard: one sample per member
            last_key = key
            yield _block_of((key, None, data, None, None))
            continue
        if not key.isdigit():
            raise ShardReadError(
                f"{name}: member {member!r} is not a bertkit block of samples (its key is not "
                "a sample number)"
            )
        try:
            starts, ends = sample_bounds(data)
            first = int(key)
        except ValueError as error:  # ExampleDecodeError
            raise ShardReadError(f"{name}: member {member!r}: {error}") from error
        if len(starts):
            last_key = sample_key(first + len(starts) - 1)
        yield _block_of((key, first, data, starts, ends))


# What a pax header may not say of the member after it: a tool that honours it (tarfile,
# webdataset) would read another member there. GNU's sparse records rename and resize too.
_PAX_RENAMES = (b"path", b"linkpath", b"size")
_PAX_SPARSE = b"GNU.sparse."


def _check_pax(name: str, member: str, data: bytes) -> None:
    """Refuse a pax extended header that renames or resizes a member: bertkit reads the
    ustar header's name and size, and the shard would mean one thing to it and another to
    tarfile. Any other record (mtime, uid, comments) is metadata, skipped."""
    for record in data.split(b"\n"):
        keyword = record.partition(b" ")[2].partition(b"=")[0]
        if keyword in _PAX_RENAMES or keyword.startswith(_PAX_SPARSE):
            raise ShardReadError(
                f"{name}: pax header {member!r} sets {keyword.decode('ascii')} for the member "
                "after it, which bertkit reads by its own header: not a bertkit shard (rebuild "
                "it with `bertkit examples`)"
            )


def _check_member_size(
    name: str, member: str, start: int, member_size: int, stream_size: int | None
) -> None:
    """Refuse a member whose header claims more bytes than a block can take, or than the
    stream has left after the header, before any of them is read."""
    left = None if stream_size is None else stream_size - start - TAR_BLOCK
    if member_size <= MAX_BLOCK_MEMBER_BYTES and (left is None or member_size <= left):
        return
    bound = (
        f"the {left:,} bytes left in it after the header"
        if left is not None and left < MAX_BLOCK_MEMBER_BYTES
        else f"the {MAX_BLOCK_MEMBER_BYTES:,} bytes of the largest block of samples"
    )
    raise ShardReadError(
        f"{name}: member {member!r} at byte {start:,} claims {member_size:,} bytes, more than "
        f"{bound}; the shard is corrupt or not a bertkit shard: rebuild it or restore it from "
        "the source"
    )


def _parse_header(header: bytes, name: str, last_key: str | None) -> tuple[str, int, bytes]:
    """(member name, payload size, type flag) of one ustar header block."""
    after = f"after sample {last_key}" if last_key else "at its first member"
    try:
        checksum = int(header[148:156].split(b"\0", 1)[0].strip() or b"0", 8)
        if header[257:262] != b"ustar" or sum(header[:148]) + sum(header[156:]) + 256 != checksum:
            raise ValueError("bad tar header checksum")
        member = header[:100].split(b"\0", 1)[0].decode("utf-8")
        size = int(header[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
    except ValueError as error:  # UnicodeDecodeError is a ValueError too
        raise ShardReadError(
            f"{name}: {error} {after}; the shard is corrupt or not a tar file: rebuild it or "
            "restore it from the source"
        ) from error
    return member, size, header[156:157]
