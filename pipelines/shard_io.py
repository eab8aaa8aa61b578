"""Writing and reading WebDataset shards: plain tar files of `<key>.example.bin` members.

The writer is deterministic (mtime 0, uid/gid 0, no user names, mode 0444), so the same
samples give the same tar bytes, and atomic: it writes `NAME.tmp-<uuid>` and renames it, so
a reader listing the directory never sees a partial shard. It writes the ustar headers itself
(~15× faster than `tarfile.addfile`, which builds a TarInfo per member); `tarfile` and
`webdataset` read the result (tested).

The reader streams a shard from any Beam filesystem or URL smart_open opens, checks the sha256
the manifest records when it has one, and turns a truncated or corrupt tar into a
`ShardReadError` that names the shard and the last good sample.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from apache_beam.io.filesystems import FileSystems

from pipelines.filesystem import write_atomically
from schemas.examples import EXAMPLE_MEMBER
from schemas.shards import ShardInfo

_BLOCK = 512
_END_OF_ARCHIVE = b"\0" * (2 * _BLOCK)


class ShardReadError(OSError):
    """A shard could not be read: wrong checksum, truncated or not a tar file."""


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def ustar_header(name: str, size: int) -> bytes:
    """A POSIX ustar header for a regular file, with the fields fixed for determinism."""
    raw_name = name.encode("utf-8")
    if len(raw_name) > 100:
        raise ValueError(f"tar member name over 100 bytes: {name!r}")
    header = bytearray(_BLOCK)
    header[0 : len(raw_name)] = raw_name
    header[100:108] = _octal(0o444, 8)  # mode
    header[108:116] = _octal(0, 8)  # uid
    header[116:124] = _octal(0, 8)  # gid
    header[124:136] = _octal(size, 12)
    header[136:148] = _octal(0, 12)  # mtime
    header[148:156] = b" " * 8  # checksum placeholder
    header[156:157] = b"0"  # regular file
    header[257:265] = b"ustar\x0000"
    checksum = sum(header)
    header[148:156] = b"%06o\0 " % checksum
    return bytes(header)


def tar_bytes(samples: Iterable[tuple[str, bytes]]) -> bytes:
    """`(key, example bytes)` pairs → the bytes of a tar file, one member per sample."""
    parts: list[bytes] = []
    for key, data in samples:
        parts.append(ustar_header(f"{key}.{EXAMPLE_MEMBER}", len(data)))
        parts.append(data)
        padding = -len(data) % _BLOCK
        if padding:
            parts.append(b"\0" * padding)
    parts.append(_END_OF_ARCHIVE)
    return b"".join(parts)


def write_shard(directory: str, relative_path: str, samples: list[tuple[str, bytes]]) -> ShardInfo:
    """Write one shard atomically and describe it for the manifest."""
    data = tar_bytes(samples)
    write_atomically(FileSystems.join(directory, relative_path), data)
    return ShardInfo(
        path=relative_path,
        samples=len(samples),
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        first_key=samples[0][0] if samples else "",
    )


def iter_tar_samples(stream: BinaryIO, name: str) -> Iterator[tuple[str, bytes]]:
    """Stream `(key, example bytes)` out of a shard; errors name the shard and position."""
    last_key = None
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                key, _, suffix = member.name.partition(".")
                if suffix != EXAMPLE_MEMBER:
                    raise ShardReadError(
                        f"{name}: member {member.name!r} is not a bertkit sample "
                        f"(expected KEY.{EXAMPLE_MEMBER})"
                    )
                payload = archive.extractfile(member)
                data = payload.read() if payload else b""
                if len(data) != member.size:
                    raise ShardReadError(
                        f"{name}: truncated inside sample {key} "
                        f"({len(data)} of {member.size} bytes)"
                    )
                last_key = key
                yield key, data
    except (tarfile.TarError, EOFError) as error:
        after = f"after sample {last_key}" if last_key else "before its first sample"
        raise ShardReadError(
            f"{name}: not a complete tar file ({error}), {after}; the shard is truncated or "
            "corrupt: rebuild it or restore it from the source"
        ) from error


class _HashingReader:
    """Passes reads through, hashing every byte and keeping the last two tar blocks."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.sha256 = hashlib.sha256()
        self.bytes = 0
        self.tail = b""

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.sha256.update(data)
        self.bytes += len(data)
        self.tail = (self.tail + data)[-len(_END_OF_ARCHIVE) :]
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def read_shard_samples(
    stream: BinaryIO, name: str, expected: ShardInfo | None = None
) -> Iterator[tuple[str, bytes]]:
    """Samples of one shard; with `expected`, a wrong size or sha256 raises at the end.

    The checks run as the shard streams, so a reader that must not train on a bad shard
    should consume the whole shard before using its samples (inspect does). Without
    `expected`, a shard must still end with the end-of-archive blocks the writer puts
    there: Python's tarfile takes a shard cut at a member boundary, or inside a member's
    header, for a complete archive that ends there.
    """
    reader = _HashingReader(stream)
    count = 0
    key = None
    for key, data in iter_tar_samples(reader, name):  # type: ignore[arg-type]
        count += 1
        yield key, data
    reader.drain()
    if expected is not None:
        _check_against(expected, reader, count, name)
    if reader.bytes % _BLOCK or reader.tail != _END_OF_ARCHIVE:
        after = f"after sample {key}" if key else "before its first sample"
        raise ShardReadError(
            f"{name}: ends after {reader.bytes:,} bytes without the tar end-of-archive blocks, "
            f"{after}; the shard is truncated: rebuild it or restore it from the source"
        )


def _check_against(expected: ShardInfo, reader: _HashingReader, count: int, name: str) -> None:
    digest = reader.sha256.hexdigest()
    if digest != expected.sha256 or reader.bytes != expected.bytes or count != expected.samples:
        raise ShardReadError(
            f"{name}: does not match the manifest: {count} samples, {reader.bytes} bytes, "
            f"sha256 {digest[:16]}… against {expected.samples} samples, {expected.bytes} bytes, "
            f"sha256 {expected.sha256[:16]}…; the shard was changed or damaged after writing"
        )
