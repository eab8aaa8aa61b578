"""Writing a shard where a Beam stage writes: encoded by `pipelines.io.shards`, stored
atomically through Beam's filesystems (a reader listing the directory never sees a partial
shard)."""

from __future__ import annotations

from pipelines.beam import files
from pipelines.io.shards import encode_shard
from schemas.shards import ShardInfo


def write_shard(directory: str, relative_path: str, samples: list[tuple[str, bytes]]) -> ShardInfo:
    """Write one shard atomically and describe it for the manifest."""
    data, info = encode_shard(relative_path, samples)
    files.write_atomically(files.join(directory, relative_path), data)
    return info
