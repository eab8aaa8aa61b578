"""The tar framing of a shard, written deterministically: POSIX ustar headers with mtime 0,
uid/gid 0, no user names and mode 0444, so the same members give the same bytes. The
headers are written here (`tarfile.addfile` builds a TarInfo per member, which costs more
than the rest); `tarfile` and `webdataset` read the result (tested). The reader's side of the
framing is `read.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

TAR_BLOCK = 512
ZERO_BLOCK = b"\0" * TAR_BLOCK
END_OF_ARCHIVE = ZERO_BLOCK * 2


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def ustar_header(name: str, size: int) -> bytes:
    """A POSIX ustar header for a regular file, with the fields fixed for determinism."""
    raw_name = name.encode("utf-8")
    if len(raw_name) > 100:
        raise ValueError(f"tar member name over 100 bytes: {name!r}")
    header = bytearray(TAR_BLOCK)
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


def tar_member(name: str, data: bytes) -> bytes:
    """One regular-file member: its header, its data, zeros to the next 512-byte block."""
    return ustar_header(name, len(data)) + data + b"\0" * (-len(data) % TAR_BLOCK)


def tar_archive(members: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """Encoded members → the tar file's bytes (end-of-archive blocks added) and the first
    byte of every member."""
    starts = [0]
    for member in members[:-1]:
        starts.append(starts[-1] + len(member))
    return b"".join([*members, END_OF_ARCHIVE]), starts
