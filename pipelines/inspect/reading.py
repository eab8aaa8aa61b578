"""Reading what a target holds: examples from shards (checked against the manifest as they
stream) and documents one Parquet row group at a time, plus the vocabulary to show tokens
with."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.inspect.targets import (
    InspectError,
    ShardRef,
    Target,
    VocabMismatchError,
    open_target,
    shard_refs,
)
from pipelines.io import storage
from pipelines.io.parquet import iter_row_groups
from pipelines.io.recorded_paths import resolve_path
from pipelines.io.retry import RetryPolicy
from pipelines.io.shards import ShardReadError, iter_tar_samples
from pipelines.io.shards.source import read_listed_shard
from pipelines.io.vocabulary import read_vocab_txt, vocab_txt_url
from schemas.examples import (
    ExampleDecodeError,
    PretrainingExample,
)
from schemas.manifest import DocumentsManifest, OutputFile
from schemas.shards import DATASET_CARD_NAME, ShardsManifest
from schemas.vocab import VOCAB_FILE


def read_examples(
    shard: ShardRef, verify: bool = True, limit: int | None = None
) -> Iterator[PretrainingExample]:
    """Decoded examples of one shard; ShardReadError names the shard on any damage.

    With `verify` and a manifest entry, each block's sha256 (from the shard's block table,
    itself checked against the manifest) is checked before any of its examples is decoded,
    and only the blocks the first `limit` examples need are read.
    Without either, a shard read to its end must still end like a complete tar file.
    """
    if verify and shard.info is not None:
        samples = read_listed_shard(shard.url, shard.info, 0, limit, RetryPolicy())
        yield from _decode(samples, shard.url)
        return
    with storage.open_binary(shard.url) as source:
        # A local file's size bounds what a tar header may claim (iter_tar_samples).
        size = None if storage.is_remote(shard.url) else os.fstat(source.fileno()).st_size
        samples = iter_tar_samples(source, shard.url, size=size)
        yield from _decode(_said_if_not_tar(samples, shard.url), shard.url, limit)


def _said_if_not_tar(samples: Iterator[tuple[str, bytes]], url: str) -> Iterator[tuple[str, bytes]]:
    """`samples`, with a fault before the first of them said as "not a tar file" where the
    file does not start with a tar header (a zip, a text file named .tar), rather than as a
    shard cut short or a header's bad number, the reader's words for damage in a shard."""
    started = False
    try:
        for sample in samples:
            started = True
            yield sample
    except ShardReadError:
        if started:
            raise
        with storage.open_binary(url) as source:
            head = storage.read_exactly(source, tarfile.BLOCKSIZE)
        if _starts_a_tar(head):
            raise
        why = (
            f"{len(head):,} bytes, less than one tar header"
            if len(head) < tarfile.BLOCKSIZE
            else "its first 512 bytes are not a tar header"
        )
        raise ShardReadError(
            f"{url}: not a tar file ({why}), so not a bertkit shard: pass a shard, or rebuild "
            "it or restore it from the source"
        ) from None


def _starts_a_tar(head: bytes) -> bool:
    """Whether a file's first 512 bytes are a tar header, or the zeros ending an archive."""
    if len(head) == tarfile.BLOCKSIZE and not head.strip(b"\0"):
        return True
    try:
        tarfile.TarInfo.frombuf(head, "utf-8", "surrogateescape")
    except tarfile.HeaderError:  # short, empty, or its checksum wrong
        return False
    return True


def _decode(
    samples: Iterator[tuple[str, bytes]], url: str, limit: int | None = None
) -> Iterator[PretrainingExample]:
    for number, (key, data) in enumerate(samples):
        if limit is not None and number >= limit:
            return
        try:
            yield PretrainingExample.decode(data, key)
        except ExampleDecodeError as error:
            raise ShardReadError(f"{url}: {error}") from error


def iter_examples(
    target: Target | str,
    seq: int | None = None,
    split: str | None = None,
    verify: bool = True,
    limit: int | None = None,
) -> Iterator[PretrainingExample]:
    """Examples of a shard or of every chosen shard of a manifest, streamed shard by shard.

    `target` is an `open_target` result or a path or URL: `iter_examples("s3://b/shards",
    seq=128, split="train")`.
    """
    target = open_target(target) if isinstance(target, str) else target
    remaining = limit
    for shard in shard_refs(target, seq, split):
        if remaining is not None and remaining <= 0:
            return
        for example in read_examples(shard, verify, remaining):
            if remaining is not None:
                remaining -= 1
            yield example


def iter_document_batches(
    target: Target, columns: list[str] | None = None, verify: bool = True
) -> Iterator[tuple[OutputFile, pa.Table]]:
    """Every documents file the manifest lists, one row group (a table) at a time."""
    manifest = target.manifest
    if not isinstance(manifest, DocumentsManifest):
        raise InspectError(f"{target.url} is not a documents directory")
    for output_file in manifest.files:
        url = storage.join(target.url, output_file.name)
        with storage.open_seekable(url) as source:
            _check_size(source, url, output_file, verify)
            try:
                for table in iter_row_groups(source, columns):
                    yield output_file, table
            except pa.ArrowException as error:
                raise InspectError(f"{url}: not a readable Parquet file: {error}") from error


def written_schema(target: Target, output_file: OutputFile, verify: bool = True) -> pa.Schema:
    """A documents file's Arrow schema as written, the file checked as
    `iter_document_batches` checks it."""
    url = storage.join(target.url, output_file.name)
    with storage.open_seekable(url) as source:
        _check_size(source, url, output_file, verify)
        try:
            return pq.ParquetFile(source).schema_arrow
        except pa.ArrowException as error:
            raise InspectError(f"{url}: not a readable Parquet file: {error}") from error


def _check_size(source: BinaryIO, url: str, output_file: OutputFile, verify: bool) -> None:
    size = source.seek(0, io.SEEK_END)
    source.seek(0)
    if verify and size != output_file.bytes:
        raise InspectError(
            f"{url}: {size:,} bytes, the manifest says {output_file.bytes:,}; the file "
            "was changed or cut short after writing: rerun the stage"
        )


def iter_documents(target: Target | str, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """Documents as dicts of the Document columns, in manifest order."""
    target = open_target(target) if isinstance(target, str) else target
    seen = 0
    for _, batch in iter_document_batches(target):
        for row in batch.to_pylist():
            if limit is not None and seen >= limit:
                return
            seen += 1
            yield row


# vocabulary


@dataclass(frozen=True, slots=True)
class Vocab:
    """vocab.txt's tokens for display: line number = id, as Google's and HF's vocabularies."""

    tokens: tuple[str, ...]
    sha256: str
    url: str

    def token(self, token_id: int) -> str:
        return self.tokens[token_id] if 0 <= token_id < len(self.tokens) else f"<{token_id}?>"

    def id_of(self, token: str) -> int | None:
        try:
            return self.tokens.index(token)
        except ValueError:
            return None


def load_vocab(directory: str) -> Vocab:
    """DIR/vocab.txt (or the file itself) with the sha256 of its bytes, which manifests record."""
    url = vocab_txt_url(directory)
    tokens, sha256 = read_vocab_txt(url)
    return Vocab(tuple(tokens), sha256, url)


def _may_follow(path: str, manifest_url: str) -> bool:
    """Whether `inspect` follows a vocabulary path a manifest recorded: a local path (where
    the shards were made, often this machine), or a URL on the manifest's own storage (the
    same scheme and host or bucket). A URL elsewhere would let a manifest make `inspect`
    fetch what it chooses."""
    if not storage.is_remote(path):
        return True
    return path.split("/", 3)[:3] == manifest_url.split("/", 3)[:3]  # scheme://host-or-bucket


def resolve_vocab(target: Target, vocab_dir: str | None) -> tuple[Vocab | None, str]:
    """The vocabulary to show tokens with, and a note on where it came from or why none.

    `vocab_dir` wins; else the manifest's vocab path, relative to the manifest first and
    then, as an older manifest recorded it, to the working directory
    (pipelines/io/recorded_paths.py). A vocab.txt whose sha256 is not the manifest's raises
    VocabMismatchError: its token strings would be wrong.
    """
    recorded = target.manifest.vocab if isinstance(target.manifest, ShardsManifest) else {}
    expected = recorded.get("sha256")
    if vocab_dir is not None:
        directory = vocab_dir
        if not storage.exists(vocab_txt_url(directory)):
            raise FileNotFoundError(f"--vocab {vocab_dir}: no {VOCAB_FILE} there")
    elif recorded.get("path"):
        path = str(recorded["path"])
        if not _may_follow(path, target.manifest_url or ""):
            return None, (
                f"no vocabulary: the manifest's vocab path {storage.redact(path)} is a URL "
                "elsewhere than the manifest (another scheme, host or bucket), and a manifest "
                "does not choose what bertkit fetches: pass --vocab DIR for tokens"
            )
        directory = resolve_path(path, storage.parent(target.manifest_url or ""), VOCAB_FILE)
        if not storage.exists(vocab_txt_url(directory)):
            return None, (
                f"no vocabulary: the manifest's {path} ({storage.redact(directory)} from here) "
                f"has no {VOCAB_FILE}; token ids shown (pass --vocab DIR for tokens)"
            )
    else:
        return None, "no vocabulary: token ids shown (pass --vocab DIR for tokens)"
    vocab = load_vocab(directory)
    if expected and vocab.sha256 != expected:
        raise VocabMismatchError(
            f"{vocab.url}: sha256 {vocab.sha256[:16]}…, but {target.manifest_url} was made "
            f"with vocab sha256 {str(expected)[:16]}… ({recorded.get('path')}): its tokens "
            "would be shown wrong; pass the --vocab the shards were made with"
        )
    checked = "sha256 matches the manifest" if expected else "not checked: no manifest"
    return vocab, f"vocabulary {vocab.url} ({len(vocab.tokens):,} tokens, {checked})"


# the dataset card


def dataset_card_url(target: Target) -> str | None:
    """The dataset card (README.md) beside a shards directory's manifest, if there is one.
    A manifest URL with a query (presigned) is not followed: the card would need its own."""
    if target.kind != "shards" or not target.manifest_url or storage.query_of(target.manifest_url):
        return None
    url = storage.join(storage.parent(target.manifest_url), DATASET_CARD_NAME)
    return url if storage.exists(url) else None
