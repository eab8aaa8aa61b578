"""The shard codec: WebDataset shards, plain tar files of `<first key>.examples.bin`
members, each a block of up to 512 samples (the layouts: schemas/examples.py for a sample and
a block, schemas/shards.py for the manifest and the block table; 1.x shards, one
`<key>.example.bin` member per sample, are still read).

    tar.py      the tar framing, written deterministically (the same samples, the same bytes)
    write.py    samples → a shard's bytes, its manifest entry and its block table
                (`encode_shard`, `block_table_file`), what `pipelines.beam.shards` stores
    read.py     the readers and their checks: `read_verified_samples` and
                `read_verified_blocks` (every block's sha256 checked before its samples
                are used), `iter_tar_samples`, `iter_tar_blocks`, `ShardReadError`
    source.py   a shards directory, its manifest.json or shard URLs → the shard list of one
                sequence length's split (`open_source`), what the trainer and `inspect` open
    presence.py before any read: each shard and block table a manifest lists is on the
                storage with its recorded size (`check_present`, which `open_source` runs)

The writer (through `pipelines.beam.shards`) is atomic: it writes `NAME.tmp-<uuid>` and
renames it, so a reader listing the directory never sees a partial shard.
"""

from pipelines.io.shards.read import (
    RangeOpener,
    SampleBlock,
    ShardReadError,
    iter_tar_blocks,
    iter_tar_samples,
    load_blocks,
    read_verified_blocks,
    read_verified_samples,
)
from pipelines.io.shards.tar import tar_archive, tar_member, ustar_header
from pipelines.io.shards.write import block_table_file, encode_shard, tar_bytes

__all__ = [
    "RangeOpener",
    "SampleBlock",
    "ShardReadError",
    "block_table_file",
    "encode_shard",
    "iter_tar_blocks",
    "iter_tar_samples",
    "load_blocks",
    "read_verified_blocks",
    "read_verified_samples",
    "tar_archive",
    "tar_bytes",
    "tar_member",
    "ustar_header",
]
