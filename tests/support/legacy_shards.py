"""Shards in the 1.x layout (one `<key>.example.bin` tar member per sample), made from 2.x
shards: the same samples, manifest and block sha256s recomputed (inline, as 1.1 lists them),
`schema_version` 1.1.

For `python -m bench.loader`, which reads both layouts side by side, and for the test that
bertkit still reads 1.x shards (tests/test_shard_io.py). Not a command; bertkit itself only
writes the 2.1 layout.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

from pipelines.io.shards import iter_tar_samples, tar_archive, tar_member
from schemas.examples import EXAMPLE_MEMBER, SHARDS_MANIFEST_NAME
from schemas.shards import ShardBlock, ShardInfo, ShardsManifest


def legacy_tar(samples: list[tuple[str, bytes]], block_samples: int) -> tuple[bytes, list[int]]:
    """The 1.x tar bytes, and the first byte of every `block_samples`-th member."""
    data, starts = tar_archive([tar_member(f"{key}.{EXAMPLE_MEMBER}", d) for key, d in samples])
    return data, starts[::block_samples]


def legacy_shard(data: bytes, info: ShardInfo) -> tuple[bytes, ShardInfo]:
    """A 2.x shard's bytes and entry → the same samples in the 1.x layout, and its entry."""
    samples = list(iter_tar_samples(io.BytesIO(data), info.path))
    tar, starts = legacy_tar(samples, info.block_samples)
    ends = [*starts[1:], len(tar)]
    blocks = tuple(
        ShardBlock(start, hashlib.sha256(tar[start:end]).hexdigest())
        for start, end in zip(starts, ends, strict=True)
    )
    entry = dataclasses.replace(
        info,
        bytes=len(tar),
        sha256=hashlib.sha256(tar).hexdigest(),
        blocks=blocks,
        block_table=None,
    )
    return tar, entry


def write_legacy_copy(shards: Path, target: Path) -> Path:
    """Every shard of `shards` rewritten in the 1.x layout under `target`, with a manifest."""
    manifest = ShardsManifest.from_json((shards / SHARDS_MANIFEST_NAME).read_text())
    for output in manifest.outputs.values():
        for split in output.splits.values():
            entries = []
            for info in split.shards:
                tar, entry = legacy_shard((shards / info.path).read_bytes(), info)
                (target / info.path).parent.mkdir(parents=True, exist_ok=True)
                (target / info.path).write_bytes(tar)
                entries.append(entry)
            split.shards = entries
    manifest.schema_version, manifest.member = "1.1", EXAMPLE_MEMBER
    (target / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    return target
