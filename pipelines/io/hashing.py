"""Hashes bertkit relies on: stable hashes of values, and sha256 of the bytes in a stream.

Stable hashes decide corpus-level choices (held-out split, partner groups, the vocabulary's
sample, the trainer's shard order) from ids alone, so they are the same on every machine,
Python version and worker; Python's `hash()` is salted per process and cannot do this.
`HashingStream` counts and hashes every byte written through it: documents files get their
sha256 in the same pass that writes them (shards are verified block by block instead:
`pipelines.io.shards.read_verified_samples`).
"""

from __future__ import annotations

import hashlib
from typing import Any


def stable_hash(*parts: object, bits: int = 64) -> int:
    """A hash of the parts' text, the same on every machine and Python version."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=bits // 8).digest(), "little")


def keyed_fraction(key: str, value: str) -> float:
    """blake2b-64 of `value` keyed with `key`, big-endian, mapped to [0, 1).

    The vocabulary's sample coin (vocab.json records this recipe); a keyed hash rather than
    `unit_fraction` so that vocabularies trained before both lived here stay reproducible.
    """
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8, key=key.encode("utf-8"))
    return int.from_bytes(digest.digest(), "big") / 2**64


def stable_hash64(*parts: object) -> int:
    return stable_hash(*parts, bits=64)


def unit_fraction(*parts: object) -> float:
    """A stable hash of the parts mapped to [0, 1): for fraction-based selections."""
    return stable_hash64(*parts) / 2**64


class HashingStream:
    """A binary stream wrapper that hashes and counts the bytes written through it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.sha256 = hashlib.sha256()
        self.bytes = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.bytes += len(data)
        self._stream.write(data)
        return len(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
            self.closed = True

    def hexdigest(self) -> str:
        return self.sha256.hexdigest()
