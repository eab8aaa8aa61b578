"""Writing a shard where a Beam stage writes: every byte encoded by the shard codec
(`pipelines.io.shards.write`: the tar, the block table), stored atomically through Beam's
filesystems (a reader listing the directory never sees a partial shard), its block table
beside it."""

from __future__ import annotations

from pipelines.beam import files
from pipelines.io.shards.write import block_table_file, encode_shard
from schemas.shards import ShardInfo, block_table_path


def write_shard(directory: str, relative_path: str, samples: list[tuple[str, bytes]]) -> ShardInfo:
    """Write one shard and then its block table, each atomically, and describe them for the
    manifest (written after both, so it never names a table that is not there)."""
    data, info = encode_shard(relative_path, samples)
    table, entry = block_table_file(info)
    files.write_atomically(files.join(directory, relative_path), data)
    files.write_atomically(files.join(directory, block_table_path(relative_path)), table)
    return entry
