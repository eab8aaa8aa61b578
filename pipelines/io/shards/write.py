"""Encoding a shard: `(key, sample bytes)` pairs → the tar bytes (one
`<first key>.examples.bin` member per block of `BLOCK_SAMPLES` samples, packed by
schemas/examples.py's `pack_samples`), the shard's manifest entry with every block's first
byte and sha256, and its block table file (schemas/shards.py). Storing the bytes is the
caller's: `pipelines.beam.shards` writes them atomically where a Beam stage writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pipelines.io.shards.tar import tar_archive, tar_member
from schemas.examples import SAMPLES_MEMBER, pack_samples
from schemas.shards import BLOCK_SAMPLES, ShardBlock, ShardInfo, encode_block_table


def tar_bytes(samples: Sequence[tuple[str, bytes]]) -> bytes:
    """`(key, example bytes)` pairs → the bytes of a tar file, a member per block of samples."""
    return _tar(samples, BLOCK_SAMPLES)[0]


def _tar(samples: Sequence[tuple[str, bytes]], block_samples: int) -> tuple[bytes, list[int]]:
    """The tar bytes (one `<first key>.examples.bin` member per `block_samples` samples),
    and the first byte of every member."""
    starts = range(0, len(samples), block_samples)
    blocks = [samples[first : first + block_samples] for first in starts]
    return tar_archive(
        [
            tar_member(f"{block[0][0]}.{SAMPLES_MEMBER}", pack_samples([s for _, s in block]))
            for block in blocks
        ]
    )


def encode_shard(
    relative_path: str, samples: Sequence[tuple[str, bytes]], block_samples: int = BLOCK_SAMPLES
) -> tuple[bytes, ShardInfo]:
    """A shard's tar bytes and its entry, with the block checksums inline (writing it, and
    its block table: `encode_block_table`, is the caller's: `pipelines.beam.shards`)."""
    data, starts = _tar(samples, block_samples)
    view = memoryview(data)
    ends = [*starts[1:], len(data)]
    info = ShardInfo(
        path=relative_path,
        samples=len(samples),
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        first_key=samples[0][0] if samples else "",
        block_samples=block_samples,
        blocks=tuple(
            ShardBlock(start, hashlib.sha256(view[start:end]).hexdigest())
            for start, end in zip(starts, ends, strict=True)
        ),
    )
    return data, info


def block_table_file(info: ShardInfo) -> tuple[bytes, ShardInfo]:
    """An entry with its blocks inline → its block table file's bytes, and the entry a 2.1
    manifest lists (the file's size and sha256 instead of the blocks)."""
    table = encode_block_table(info)
    return table, info.with_table_file(table)
