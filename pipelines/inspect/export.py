"""`bertkit inspect SHARDS --parquet OUT`: the examples as one Parquet file, for pandas,
Polars, DuckDB or Spark.

    bertkit inspect out/demo/shards --parquet out/demo/examples.parquet --split heldout
    duckdb -c "SELECT next_sentence_label, count(*) FROM 'out/demo/examples.parquet' GROUP BY 1"

The rows are `PRETRAINING_EXAMPLE_SCHEMA` (schemas/examples.py), in the order `--json`
prints them (outputs by length, train before heldout, shard by shard); with a vocabulary
(--vocab, or the manifest's, checked by sha256) they are `PRETRAINING_EXAMPLE_TOKENS_SCHEMA`:
the ids' token strings beside them. `--limit N` writes the first N, `--split` and `--seq`
choose the shards. Shards are read as `--json` reads them (each block's sha256 checked
before its examples are used, unless --no-verify).

The file is written a row group at a time (at most `ROW_GROUP_ROWS` examples or
`ROW_GROUP_TOKENS` tokens held), zstd-compressed, under a temporary name renamed at the end
(local), or staged on local disk and uploaded whole (s3://, gs://): OUT is complete or not
there. An OUT that exists is replaced only when bertkit wrote it (its Arrow schema metadata
names the PretrainingExample record); anything else is refused before any shard is read, as
is an OUT that is no file name, lies inside what is read or cannot be written
(pipelines/inspect/output_place.py, shared with `--report`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.inspect.formatting import plural
from pipelines.inspect.output_place import check_output_place
from pipelines.inspect.reading import Vocab, read_examples, resolve_vocab
from pipelines.inspect.targets import InspectError, ShardRef, Target, shard_refs
from pipelines.io import objects, storage
from schemas.examples import (
    PRETRAINING_EXAMPLE_SCHEMA,
    PRETRAINING_EXAMPLE_TOKENS_SCHEMA,
    PretrainingExample,
    examples_table,
)

if TYPE_CHECKING:
    from pipelines.inspect.cli import InspectConfig

# A row group: ~2 MB of ids at 128 tokens (plus their strings with a vocabulary), so memory
# is a row group whatever the number of shards, and readers can skip by row group.
ROW_GROUP_ROWS = 8192
ROW_GROUP_TOKENS = 1 << 20
COMPRESSION = "zstd"
_RECORD_KEY = b"bertkit.record"
_RECORD = PRETRAINING_EXAMPLE_SCHEMA.metadata[_RECORD_KEY]


def write_parquet(target: Target, args: InspectConfig) -> int:
    """Write the chosen examples to args.parquet; print what was written. Exit code 0."""
    out = args.parquet
    assert out is not None
    check_output(out, target, args.vocab)
    refs = shard_refs(target, args.max_seq_length, args.split)  # flags checked before work
    vocab, note = resolve_vocab(target, args.vocab)
    print(storage.redact(note))
    with _staged(out) as path:
        rows, groups = write_examples(path, refs, vocab, args.verify, args.limit)
    columns = "ids and tokens" if vocab is not None else "ids"
    print(
        f"wrote {storage.redact(out)}: {plural(rows, 'example')} ({columns}) in "
        f"{plural(groups, 'row group')}, {COMPRESSION}"
    )
    return 0


def check_output(out: str, target: Target, vocab_dir: str | None) -> None:
    """Refuse, before any work, an OUT that cannot be written or that bertkit did not write."""
    where = storage.redact(out)
    if storage.is_remote(out):
        objects.split(out)  # StorageError unless s3:// or gs://
    check_output_place("parquet", out, target, vocab_dir)  # a directory, a FIFO, read-only, …
    if not storage.exists(out):  # NotAFileError for a FIFO or a device in its place
        return
    with storage.open_seekable(out) as source:
        try:
            metadata = pq.read_schema(source).metadata or {}
        except pa.ArrowException:  # not Parquet at all
            metadata = {}
    if metadata.get(_RECORD_KEY) != _RECORD:
        raise InspectError(
            f"--parquet {where} exists and bertkit did not write it (its Parquet schema has no "
            f"{_RECORD_KEY.decode()}: {_RECORD.decode()}): nothing was written; choose "
            "another file or move it"
        )


@contextlib.contextmanager
def _staged(out: str) -> Iterator[str]:
    """A local path to write; on success it becomes `out` whole: renamed over a local OUT
    (same directory, so the rename is atomic), uploaded to an s3:// or gs:// one (an object
    appears whole). On failure nothing is left behind."""
    if storage.is_remote(out):
        staging = tempfile.mkdtemp(prefix="bertkit-parquet-")
        try:
            path = os.path.join(staging, "examples.parquet")
            yield path
            objects.upload(Path(path), out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    temporary = f"{out}.tmp-{uuid.uuid4().hex}"
    try:
        yield temporary
        os.replace(temporary, out)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def write_examples(
    path: str,
    refs: list[ShardRef],
    vocab: Vocab | None,
    verify: bool = True,
    limit: int | None = None,
) -> tuple[int, int]:
    """Write the shards' examples (the first `limit`) to a local Parquet file at `path`, a
    row group at a time; return (examples, row groups)."""
    schema = PRETRAINING_EXAMPLE_SCHEMA if vocab is None else PRETRAINING_EXAMPLE_TOKENS_SCHEMA
    tokens = vocab.tokens if vocab is not None else None
    rows = groups = 0
    with pq.ParquetWriter(path, schema, compression=COMPRESSION) as writer:
        for batch in _batches(refs, vocab, verify, limit):
            writer.write_table(examples_table(batch, tokens), row_group_size=len(batch))
            rows += len(batch)
            groups += 1
    return rows, groups


def _batches(
    refs: list[ShardRef], vocab: Vocab | None, verify: bool, limit: int | None
) -> Iterator[list[PretrainingExample]]:
    """The examples in row groups of at most ROW_GROUP_ROWS examples or ROW_GROUP_TOKENS
    tokens; each id is checked against the vocabulary first, naming the shard and sample."""
    batch: list[PretrainingExample] = []
    tokens = 0
    remaining = limit
    for ref in refs:
        if remaining is not None and remaining <= 0:
            break
        for example in read_examples(ref, verify, remaining):
            if vocab is not None:
                _check_ids(example, vocab, ref)
            batch.append(example)
            tokens += len(example.input_ids)
            if remaining is not None:
                remaining -= 1
            if len(batch) >= ROW_GROUP_ROWS or tokens >= ROW_GROUP_TOKENS:
                yield batch
                batch, tokens = [], 0
    if batch:
        yield batch


def _check_ids(example: PretrainingExample, vocab: Vocab, ref: ShardRef) -> None:
    size = len(vocab.tokens)
    for ids in (example.input_ids, example.masked_lm_ids):
        if len(ids) and int(ids.max()) >= size:
            raise InspectError(
                f"{storage.redact(ref.url)}: sample {example.key} has token id {int(ids.max())}, "
                f"and {storage.redact(vocab.url)} has {size:,} tokens: pass the --vocab the "
                "shards were made with"
            )
