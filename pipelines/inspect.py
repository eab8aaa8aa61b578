"""Look inside bertkit artifacts: a documents directory, a shard, or a shards directory.

PATH_OR_URL is a local path or an s3://, gs:// or http(s):// URL: a shards directory or its
manifest.json, one seqN/SPLIT/shard-NNNNNN.tar, or a documents directory or its
_manifest.json. Nothing is listed: files are found through the manifest, so a plain HTTP
server works. With no flag it prints a short summary from the manifest.

    bertkit inspect out/shards                                   # what it is, counts, hashes
    bertkit inspect out/shards --stats --seq 128 --split train   # computed from every shard
    bertkit inspect out/shards/seq128/train/shard-000000.tar --show 3 --vocab out/vocab
    bertkit inspect s3://bucket/shards/manifest.json --json 100 > examples.jsonl
    bertkit inspect out/demo/documents/books --show 2 --schema

--show marks each masked position with the original token: `[MASK]→cat` (replaced by
[MASK]), `{dog→cat}` (replaced by a random token), `{cat}` (kept). Token strings come from
--vocab DIR or the vocabulary the manifest names, whose vocab.txt must have the sha256 the
manifest records; without one, ids are shown.

Shards read through a manifest are checked against it (samples, bytes, sha256) as they
stream, unless --no-verify. A damaged shard ends the command with exit code 1 and a message
naming it, after what was read before the damage has been printed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.io import storage
from pipelines.io.shards import ShardReadError, read_shard_samples
from schemas.documents import DOCUMENT_SCHEMA, DOCUMENT_SCHEMA_VERSION, DocumentColumn
from schemas.examples import (
    EXAMPLES_SCHEMA_VERSION,
    NOT_NEXT,
    PRETRAINING_EXAMPLE_SCHEMA,
    SHARDS_MANIFEST_NAME,
    SPLITS,
    ExampleDecodeError,
    PretrainingExample,
    seq_dir,
)
from schemas.manifest import DocumentsManifest, OutputFile
from schemas.shards import SequenceOutput, ShardInfo, ShardsManifest
from schemas.vocab import MASK_TOKEN, VOCAB_FILE

LENGTH_BUCKET = 16  # tokens per bar of the example-length histogram
_BAR_WIDTH = 30
_SHOW_SENTENCES = 3  # sentences printed per document by --show
_SHOW_SENTENCE_CHARS = 160
# A tar file ends with two zero blocks of 512 bytes (POSIX; pipelines/io/shards.py writes them).
_READ_BATCH_ROWS = 256  # documents per Arrow batch; row groups hold ≤ 1000 (documents_io)


class InspectError(Exception):
    """An artifact is not what its manifest says, or a flag does not fit the target."""


class VocabMismatchError(InspectError):
    """The vocabulary given or found is not the one the shards were made with."""


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class ShardRef:
    """One shard to read: where it is and, through a manifest, what it must hold."""

    url: str
    info: ShardInfo | None  # None: no manifest lists it, so nothing to verify against
    output: str | None = None  # "seq128"
    split: str | None = None  # "train", "heldout"

    @property
    def label(self) -> str:
        return f"{self.output}/{self.split}" if self.output and self.split else "shard"


@dataclass(frozen=True, slots=True)
class Target:
    """What `bertkit inspect` was pointed at, with its manifest read."""

    location: storage.Location
    manifest: ShardsManifest | DocumentsManifest | None
    shard: ShardRef | None = None  # a single shard target

    @property
    def kind(self) -> storage.TargetKind:
        return self.location.kind

    @property
    def url(self) -> str:
        return self.location.url

    @property
    def manifest_url(self) -> str | None:
        return self.location.manifest_url


def open_target(path_or_url: str) -> Target:
    """Locate a target and read its manifest (for a shard: the manifest that lists it)."""
    location = storage.locate(path_or_url)
    if location.kind == "documents":
        assert location.manifest_url is not None
        manifest = _parse_manifest(location.manifest_url, DocumentsManifest)
        return Target(location, manifest)
    if location.kind == "shards":
        assert location.manifest_url is not None
        return Target(location, _parse_manifest(location.manifest_url, ShardsManifest))
    return _single_shard_target(location)


def _parse_manifest(url: str, record: type[Any]) -> Any:
    text = storage.read_text(url)
    try:
        return record.from_json(text)
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise InspectError(
            f"{url}: not a {record.__name__} ({type(error).__name__}: {error}); it was written "
            "by another tool or another bertkit version, or it was cut short"
        ) from error


def _single_shard_target(location: storage.Location) -> Target:
    """A shard at DIR/seqN/SPLIT/shard-*.tar is checked against DIR/manifest.json if there."""
    split_dir = storage.parent(location.url)
    output_dir = storage.parent(split_dir)
    root = storage.parent(output_dir)
    relative = "/".join(storage.basename(p) for p in (output_dir, split_dir, location.url))
    manifest_url = storage.join(root, SHARDS_MANIFEST_NAME)
    if storage.basename(output_dir).startswith("seq") and storage.exists(manifest_url):
        manifest = _parse_manifest(manifest_url, ShardsManifest)
        for name, output in manifest.outputs.items():
            for split, shards in output.splits.items():
                for info in shards.shards:
                    if info.path == relative:
                        found = storage.Location("shard", location.url, manifest_url)
                        return Target(found, manifest, ShardRef(location.url, info, name, split))
    return Target(location, None, ShardRef(location.url, None))


def _ordered_outputs(manifest: ShardsManifest) -> list[tuple[str, SequenceOutput]]:
    return sorted(manifest.outputs.items(), key=lambda item: item[1].max_seq_length)


def _ordered_splits(output: SequenceOutput) -> list[str]:
    # train before heldout (the manifest's JSON has its keys sorted, heldout first)
    return sorted(output.splits, key=lambda s: (SPLITS.index(s) if s in SPLITS else 99, s))


def shard_refs(target: Target, seq: int | None = None, split: str | None = None) -> list[ShardRef]:
    """The shards to read, in order: outputs by sequence length, train before heldout."""
    if target.kind == "documents":
        raise InspectError(f"{target.url} is a documents directory, not shards")
    if target.shard is not None:
        if seq is not None or split is not None:
            raise InspectError(
                "--seq and --split choose shards of a manifest; give the shards directory, "
                "not one shard"
            )
        return [target.shard]
    manifest = target.manifest
    assert isinstance(manifest, ShardsManifest)
    outputs = _ordered_outputs(manifest)
    if seq is not None:
        outputs = [(name, out) for name, out in outputs if name == seq_dir(seq)]
        if not outputs:
            have = ", ".join(str(o.max_seq_length) for _, o in _ordered_outputs(manifest))
            raise InspectError(
                f"{target.manifest_url} has no {seq_dir(seq)} shards: --seq one of {have}"
            )
    refs = []
    for name, output in outputs:
        splits = _ordered_splits(output)
        if split is not None:
            if split not in output.splits:
                raise InspectError(
                    f"{target.manifest_url} has no {split} split under {name} "
                    f"(it has {', '.join(splits)})"
                )
            splits = [split]
        for split_name in splits:
            for info in output.splits[split_name].shards:
                refs.append(ShardRef(storage.join(target.url, info.path), info, name, split_name))
    return refs


def _max_seq_length(target: Target, seq: int | None) -> int | None:
    if not isinstance(target.manifest, ShardsManifest):
        return None
    if target.shard is not None and target.shard.output is not None:
        return target.manifest.outputs[target.shard.output].max_seq_length
    lengths = [o.max_seq_length for o in target.manifest.outputs.values()]
    return seq if seq is not None else max(lengths, default=None)


# --------------------------------------------------------------------------- reading


def read_examples(
    shard: ShardRef, verify: bool = True, limit: int | None = None
) -> Iterator[PretrainingExample]:
    """Decoded examples of one shard; ShardReadError names the shard on any damage.

    With `verify` and a manifest entry, the whole shard is read even when `limit` stops the
    decoding early, so its checksum is still checked: consume the iterator to its end.
    Without either, a shard read to its end must still end like a complete tar file.
    """
    expected = shard.info if verify else None
    decoded = 0
    with storage.open_binary(shard.url) as source:
        for key, data in read_shard_samples(source, shard.url, expected):
            if limit is not None and decoded >= limit:
                if expected is None:
                    return  # nothing to check the rest against
                continue  # read on: the checksum covers every byte
            try:
                example = PretrainingExample.decode(data, key)
            except ExampleDecodeError as error:
                raise ShardReadError(f"{shard.url}: {error}") from error
            decoded += 1
            yield example


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
) -> Iterator[tuple[OutputFile, pa.RecordBatch]]:
    """Arrow batches of every documents file the manifest lists, one row group at a time."""
    manifest = target.manifest
    if not isinstance(manifest, DocumentsManifest):
        raise InspectError(f"{target.url} is not a documents directory")
    for output_file in manifest.files:
        url = storage.join(target.url, output_file.name)
        with storage.open_seekable(url) as source:
            size = source.seek(0, io.SEEK_END)
            source.seek(0)
            if verify and size != output_file.bytes:
                raise InspectError(
                    f"{url}: {size:,} bytes, the manifest says {output_file.bytes:,}; the file "
                    "was changed or cut short after writing: rerun the stage"
                )
            try:
                parquet = pq.ParquetFile(source)
                for batch in parquet.iter_batches(batch_size=_READ_BATCH_ROWS, columns=columns):
                    yield output_file, batch
            except pa.ArrowException as error:
                raise InspectError(f"{url}: not a readable Parquet file: {error}") from error


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


# --------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True, slots=True)
class Vocab:
    """vocab.txt: line number = id, as Google's and HF's BERT vocabularies."""

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


def _vocab_file(directory: str) -> str:
    """DIR/vocab.txt; DIR may be a URL, or the vocab.txt itself."""
    if storage.basename(directory) == VOCAB_FILE:
        return directory
    return storage.join(directory, VOCAB_FILE)


def load_vocab(directory: str) -> Vocab:
    """Read DIR/vocab.txt and hash its bytes (the hash the manifests record)."""
    url = _vocab_file(directory)
    data = storage.read_bytes(url)
    lines = data.decode("utf-8").split("\n")  # not splitlines(): tokens may hold \x1c, \u2028
    if lines and lines[-1] == "":
        lines.pop()
    tokens = tuple(line.rstrip("\r") for line in lines)
    return Vocab(tokens, hashlib.sha256(data).hexdigest(), url)


def resolve_vocab(target: Target, vocab_dir: str | None) -> tuple[Vocab | None, str]:
    """The vocabulary to show tokens with, and a note on where it came from or why none.

    `vocab_dir` wins; else the manifest's vocab path, tried as given (relative to the working
    directory) and then relative to the manifest. A vocab.txt whose sha256 is not the
    manifest's raises VocabMismatchError: its token strings would be wrong.
    """
    recorded = target.manifest.vocab if isinstance(target.manifest, ShardsManifest) else {}
    expected = recorded.get("sha256")
    if vocab_dir is not None:
        candidates = [vocab_dir]
    elif recorded.get("path"):
        path = str(recorded["path"])
        candidates = [path]
        if not storage.is_remote(path) and not os.path.isabs(path):
            candidates.append(storage.join(storage.parent(target.manifest_url or ""), path))
    else:
        return None, "no vocabulary: token ids shown (pass --vocab DIR for tokens)"
    for candidate in candidates:
        if not storage.exists(_vocab_file(candidate)):
            if vocab_dir is not None:
                raise FileNotFoundError(f"--vocab {vocab_dir}: no {VOCAB_FILE} there")
            continue
        vocab = load_vocab(candidate)
        if expected and vocab.sha256 != expected:
            raise VocabMismatchError(
                f"{vocab.url}: sha256 {vocab.sha256[:16]}…, but {target.manifest_url} was made "
                f"with vocab sha256 {str(expected)[:16]}… ({recorded.get('path')}): its tokens "
                "would be shown wrong; pass the --vocab the shards were made with"
            )
        checked = "sha256 matches the manifest" if expected else "not checked: no manifest"
        return vocab, f"vocabulary {vocab.url} ({len(vocab.tokens):,} tokens, {checked})"
    return None, (
        f"no vocabulary: the manifest's {recorded.get('path')} has no {VOCAB_FILE}; token ids "
        "shown (pass --vocab DIR for tokens)"
    )


# --------------------------------------------------------------------------- statistics


def _histogram(counts: Counter[int], width: int, upper: int) -> list[tuple[int, int, int]]:
    """Buckets (first, last, count) of `width` values from 1 up to `upper`, empty ones too."""
    top = max([upper, *counts]) if counts else upper
    buckets = [0] * max(1, -(-top // width))
    for value, count in counts.items():
        buckets[max(value - 1, 0) // width] += count
    return [(i * width + 1, (i + 1) * width, count) for i, count in enumerate(buckets)]


def _power_of_two_histogram(counts: Counter[int]) -> list[tuple[int, int, int]]:
    """Buckets 1, 2–3, 4–7, …: sentences per document span four orders of magnitude."""
    buckets: Counter[int] = Counter()
    for value, count in counts.items():
        buckets[max(value, 1).bit_length() - 1] += count
    if not buckets:
        return []
    return [(1 << b, (2 << b) - 1, buckets[b]) for b in range(min(buckets), max(buckets) + 1)]


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(slots=True)
class ExampleStats:
    """Accumulates example statistics as examples stream past: memory does not grow."""

    mask_id: int | None
    max_length: int | None = None
    examples: int = 0
    tokens: int = 0
    not_next: int = 0
    lengths: Counter[int] = field(default_factory=Counter)
    predictions: Counter[int] = field(default_factory=Counter)
    masked_mask: int = 0
    masked_keep: int = 0
    masked_random: int = 0

    def add(self, example: PretrainingExample) -> None:
        n_tokens = len(example.input_ids)
        self.examples += 1
        self.tokens += n_tokens
        self.not_next += int(example.next_sentence_label == NOT_NEXT)
        self.lengths[n_tokens] += 1
        self.predictions[len(example.masked_lm_positions)] += 1
        inputs = example.input_ids[example.masked_lm_positions]
        is_mask = inputs == self.mask_id if self.mask_id is not None else np.zeros(0, bool)
        is_keep = inputs == example.masked_lm_ids
        if self.mask_id is not None:
            is_keep &= ~is_mask
            self.masked_mask += int(is_mask.sum())
        self.masked_keep += int(is_keep.sum())
        self.masked_random += len(inputs) - int(is_keep.sum()) - int(is_mask.sum())

    def result(self) -> dict[str, Any]:
        predicted = sum(n * c for n, c in self.predictions.items())
        known = self.mask_id is not None
        return {
            "examples": self.examples,
            "tokens": self.tokens,
            "not_next": self.not_next,
            "not_next_ratio": _ratio(self.not_next, self.examples),
            "length_min": min(self.lengths, default=None),
            "length_max": max(self.lengths, default=None),
            "length_histogram": _histogram(self.lengths, LENGTH_BUCKET, self.max_length or 0),
            "predictions": {
                "total": predicted,
                "mean": _ratio(predicted, self.examples),
                "min": min(self.predictions, default=None),
                "max": max(self.predictions, default=None),
                "per_token": _ratio(predicted, self.tokens),
            },
            # Without the vocabulary's [MASK] id, [MASK] and random replacements are one
            # count, "replaced"; with it, "replaced" is None.
            "masked": {
                "mask": self.masked_mask if known else None,
                "keep": self.masked_keep,
                "random": self.masked_random if known else None,
                "replaced": None if known else self.masked_random,
                "mask_ratio": _ratio(self.masked_mask, predicted) if known else None,
                "keep_ratio": _ratio(self.masked_keep, predicted),
                "random_ratio": _ratio(self.masked_random, predicted) if known else None,
            },
        }


def example_stats(
    examples: Iterable[PretrainingExample], mask_id: int | None, max_length: int | None = None
) -> dict[str, Any]:
    """Counts, length histogram, NotNext ratio, predictions and mask/keep/random ratios."""
    stats = ExampleStats(mask_id, max_length)
    for example in examples:
        stats.add(example)
    return stats.result()


@dataclass(slots=True)
class SplitTally:
    """What was read of one seqN/SPLIT, in the manifest's SplitShards terms."""

    shards: int = 0
    samples: int = 0
    not_next: int = 0
    tokens: int = 0
    predictions: int = 0

    def add(self, example: PretrainingExample) -> None:
        self.samples += 1
        self.not_next += int(example.next_sentence_label == NOT_NEXT)
        self.tokens += len(example.input_ids)
        self.predictions += len(example.masked_lm_positions)


@dataclass(slots=True)
class ShardsStats:
    """Statistics over chosen shards, per split and overall; `complete` False after an error."""

    examples: ExampleStats
    splits: dict[str, SplitTally] = field(default_factory=dict)
    complete: bool = False

    def result(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "shards": sum(t.shards for t in self.splits.values()),
            "splits": {label: _tally_dict(t) for label, t in self.splits.items()},
            **self.examples.result(),
        }


def _tally_dict(tally: SplitTally) -> dict[str, int]:
    return {
        "shards": tally.shards,
        "examples": tally.samples,
        "not_next": tally.not_next,
        "tokens": tally.tokens,
        "predictions": tally.predictions,
    }


def collect_shards_stats(
    target: Target,
    stats: ShardsStats,
    seq: int | None = None,
    split: str | None = None,
    verify: bool = True,
) -> ShardsStats:
    """Fill `stats` from every chosen shard; on a ShardReadError `stats` holds what was read."""
    for shard in shard_refs(target, seq, split):
        tally = stats.splits.setdefault(shard.label, SplitTally())
        tally.shards += 1
        for example in read_examples(shard, verify):
            tally.add(example)
            stats.examples.add(example)
    stats.complete = True
    return stats


def manifest_mismatches(target: Target, stats: dict[str, Any]) -> list[str]:
    """Splits whose counts read differ from the manifest's (only whole splits are read)."""
    if not isinstance(target.manifest, ShardsManifest) or target.shard is not None:
        return []
    problems = []
    for label, read in stats["splits"].items():
        name, _, split = label.partition("/")
        recorded = target.manifest.outputs[name].splits[split]
        expected = {
            "shards": len(recorded.shards),
            "examples": recorded.samples,
            "not_next": recorded.not_next,
            "tokens": recorded.tokens,
            "predictions": recorded.predictions,
        }
        differing = [f"{k} {read[k]} (manifest {v})" for k, v in expected.items() if read[k] != v]
        if differing:
            problems.append(f"{label}: " + ", ".join(differing))
    return problems


@dataclass(slots=True)
class DocumentStats:
    """Documents, sentences and text bytes, per file and overall, as batches stream past."""

    documents: int = 0
    sentences: int = 0
    text_bytes: int = 0
    sentences_per_document: Counter[int] = field(default_factory=Counter)
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    complete: bool = False

    def add(self, output_file: OutputFile, batch: pa.RecordBatch) -> None:
        column = batch.column(DocumentColumn.SENTENCES)
        per_document = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        sentence_bytes = pc.sum(pc.binary_length(pc.list_flatten(column))).as_py() or 0
        self.documents += batch.num_rows
        self.sentences += int(per_document.sum())
        self.text_bytes += sentence_bytes
        self.sentences_per_document.update(per_document.tolist())
        tally = self.files.setdefault(
            output_file.name, {"documents": 0, "sentences": 0, "text_bytes": 0}
        )
        tally["documents"] += batch.num_rows
        tally["sentences"] += int(per_document.sum())
        tally["text_bytes"] += sentence_bytes

    def result(self) -> dict[str, Any]:
        counts = self.sentences_per_document
        return {
            "complete": self.complete,
            "files": len(self.files),
            "documents": self.documents,
            "sentences": self.sentences,
            "text_bytes": self.text_bytes,
            "sentences_per_document": {
                "mean": _ratio(self.sentences, self.documents),
                "min": min(counts, default=None),
                "max": max(counts, default=None),
                "histogram": _power_of_two_histogram(counts),
            },
            "per_file": self.files,
        }


def collect_document_stats(
    target: Target, stats: DocumentStats, verify: bool = True
) -> DocumentStats:
    """Fill `stats` from every documents file, reading only the sentences column."""
    for output_file, batch in iter_document_batches(target, [DocumentColumn.SENTENCES], verify):
        stats.add(output_file, batch)
    stats.complete = True
    return stats


def document_mismatches(manifest: DocumentsManifest, stats: dict[str, Any]) -> list[str]:
    """Files whose documents, sentences or text bytes differ from the manifest's."""
    problems = []
    for output_file in manifest.files:
        read = stats["per_file"].get(output_file.name, {"documents": 0, "sentences": 0,
                                                          "text_bytes": 0})  # fmt: skip
        expected = {
            "documents": output_file.documents,
            "sentences": output_file.sentences,
            "text_bytes": output_file.text_bytes,
        }
        differing = [f"{k} {read[k]} (manifest {v})" for k, v in expected.items() if read[k] != v]
        if differing:
            problems.append(f"{output_file.name}: " + ", ".join(differing))
    return problems


# --------------------------------------------------------------------------- formatting


def _number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _histogram_lines(buckets: list[tuple[int, int, int]]) -> list[str]:
    peak = max((count for _, _, count in buckets), default=0)
    lines = []
    for first, last, count in buckets:
        span = str(first) if first == last else f"{first}–{last}"
        bar = "█" * round(_BAR_WIDTH * count / peak) if peak else ""
        lines.append(f"  {span:>11} {count:>9,}  {bar}".rstrip())
    return lines


def format_schema(schema: pa.Schema, manifest: Any | None) -> list[str]:
    """The Arrow schema with each field's doc, its record name and version, and the manifest's."""
    metadata = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    lines = [
        f"record {metadata.get('bertkit.record')}, schema version "
        f"{metadata.get('bertkit.schema_version')} (this bertkit)"
    ]
    if manifest is not None:
        lines.append(
            f"manifest: record {manifest.record}, schema version {manifest.schema_version}, "
            f"written by bertkit {manifest.bertkit_version}"
        )
    else:
        lines.append("manifest: none found, so the shard's version is unknown")
    width = max(len(f.name) for f in schema)
    type_width = max(len(str(f.type)) for f in schema)
    for f in schema:
        doc = (f.metadata or {}).get(b"doc", b"").decode()
        null = "nullable" if f.nullable else "not null"
        lines.append(f"  {f.name:<{width}}  {f.type!s:<{type_width}}  {null:<8}  {doc}".rstrip())
    return lines


def render_example(example: PretrainingExample, vocab: Vocab | None, label: str = "") -> str:
    """An example as text: segments A and B on their own lines, masked positions marked."""
    mask_id = vocab.id_of(MASK_TOKEN) if vocab is not None else None
    show = vocab.token if vocab is not None else str
    originals = dict(
        zip(example.masked_lm_positions.tolist(), example.masked_lm_ids.tolist(), strict=True)
    )
    words = []
    for position, token_id in enumerate(example.input_ids.tolist()):
        if position not in originals:
            words.append(show(token_id))
            continue
        original = originals[position]
        if token_id == original:
            words.append(f"{{{show(original)}}}")  # kept as is, still predicted
        elif token_id == mask_id:
            words.append(f"{show(token_id)}→{show(original)}")
        else:
            words.append(f"{{{show(token_id)}→{show(original)}}}")
    a_length = example.segment_a_length
    nsp = "NotNext" if example.next_sentence_label == NOT_NEXT else "IsNext"
    n_tokens = len(example.input_ids)
    head = (
        f"{label}#{example.key}  {nsp}  doc_a {example.doc_a}  doc_b {example.doc_b}  "
        f"dupe_pass {example.dupe_pass}  ({n_tokens} tokens: A {a_length}, "
        f"B {n_tokens - a_length}; {len(originals)} predicted)"
    )
    return "\n".join(
        [head, "  A  " + " ".join(words[:a_length]), "  B  " + " ".join(words[a_length:])]
    )


def format_example_stats(stats: dict[str, Any], mask_note: str = "") -> list[str]:
    lines = [f"examples {stats['examples']:,} in {_plural(stats['shards'], 'shard')}"]
    for label, tally in stats["splits"].items():
        lines.append(
            f"  {label:<16} {_plural(tally['examples'], 'example')} in "
            f"{_plural(tally['shards'], 'shard')}, NotNext {tally['not_next']:,}, "
            f"{tally['tokens']:,} tokens, {_plural(tally['predictions'], 'prediction')}"
        )
    lines.append(
        f"length (tokens per example): min {_number(stats['length_min'])}, "
        f"max {_number(stats['length_max'])}, mean "
        f"{_number(stats['tokens'] / stats['examples'] if stats['examples'] else None, 1)}"
    )
    lines += _histogram_lines(stats["length_histogram"])
    lines.append(
        f"next sentence: NotNext {stats['not_next']:,} of {stats['examples']:,} "
        f"({_number(stats['not_next_ratio'])}), IsNext {stats['examples'] - stats['not_next']:,}"
    )
    p = stats["predictions"]
    lines.append(
        f"predictions per example: mean {_number(p['mean'], 2)}, min {_number(p['min'])}, "
        f"max {_number(p['max'])}; {_number(p['per_token'])} of tokens "
        f"({p['total']:,} of {stats['tokens']:,})"
    )
    m = stats["masked"]
    if m["mask"] is not None:
        lines.append(
            f"masked positions {p['total']:,}: [MASK] {m['mask']:,} ({_number(m['mask_ratio'])}),"
            f" kept {m['keep']:,} ({_number(m['keep_ratio'])}), random {m['random']:,} "
            f"({_number(m['random_ratio'])})"
        )
    else:
        lines.append(
            f"masked positions {p['total']:,}: kept {m['keep']:,} ({_number(m['keep_ratio'])}), "
            f"replaced {m['replaced']:,} ([MASK] and random together: {mask_note})"
        )
    return lines


def format_document(row: dict[str, Any]) -> list[str]:
    sentences = row[DocumentColumn.SENTENCES]
    text_bytes = sum(len(s.encode("utf-8")) for s in sentences)
    extra = [row[DocumentColumn.URL] or "", ""]
    if row[DocumentColumn.REVISION] is not None:
        extra[1] = f"revision {row[DocumentColumn.REVISION]}"
    lines = [
        f"{row[DocumentColumn.ID]}  {row[DocumentColumn.TITLE]!r}  ({row[DocumentColumn.SOURCE]}, "
        f"{_plural(len(sentences), 'sentence')}, {text_bytes:,} bytes)  {' '.join(extra)}".rstrip()
    ]
    for number, sentence in enumerate(sentences[:_SHOW_SENTENCES], 1):
        if len(sentence) > _SHOW_SENTENCE_CHARS:
            sentence = sentence[: _SHOW_SENTENCE_CHARS - 1] + "…"
        lines.append(f"  {number:>3}  {sentence}")
    if len(sentences) > _SHOW_SENTENCES:
        lines.append(f"       … {len(sentences) - _SHOW_SENTENCES:,} more")
    return lines


def format_document_stats(stats: dict[str, Any], manifest: DocumentsManifest) -> list[str]:
    counts = manifest.counts
    spd = stats["sentences_per_document"]
    lines = [
        f"read:     {_plural(stats['documents'], 'document')}, "
        f"{_plural(stats['sentences'], 'sentence')}, {stats['text_bytes']:,} text bytes in "
        f"{_plural(stats['files'], 'file')}",
        f"manifest: {_plural(counts.get('documents', 0), 'document')}, "
        f"{_plural(counts.get('sentences', 0), 'sentence')}, {counts.get('text_bytes', 0):,} "
        f"text bytes in {_plural(len(manifest.files), 'file')} "
        f"({sum(f.bytes for f in manifest.files):,} bytes of Parquet)",
        f"sentences per document: mean {_number(spd['mean'], 1)}, min {_number(spd['min'])}, "
        f"max {_number(spd['max'])}",
    ]
    return lines + _histogram_lines(spd["histogram"])


def format_summary(target: Target) -> list[str]:
    if target.kind == "documents":
        return _documents_summary(target)
    if target.shard is not None:
        return _shard_summary(target)
    manifest = target.manifest
    assert isinstance(manifest, ShardsManifest)
    lines = [
        f"shards directory {target.url} ({SHARDS_MANIFEST_NAME})",
        *_version_lines(manifest, EXAMPLES_SCHEMA_VERSION),
        _vocab_line(manifest.vocab),
    ]
    total_samples = total_shards = total_bytes = 0
    for name, output in _ordered_outputs(manifest):
        lines.append(f"{name}: max {output.max_predictions_per_seq} predictions per sequence")
        for split in _ordered_splits(output):
            shards = output.splits[split]
            size = sum(s.bytes for s in shards.shards)
            lines.append(
                f"  {split:<8} {_plural(shards.samples, 'example')} in "
                f"{_plural(len(shards.shards), 'shard')} ({size:,} bytes), NotNext "
                f"{shards.not_next:,}, {shards.tokens:,} tokens, "
                f"{_plural(shards.predictions, 'prediction')}"
            )
            total_samples += shards.samples
            total_shards += len(shards.shards)
            total_bytes += size
    lines.append(
        f"total: {_plural(total_samples, 'example')} in {_plural(total_shards, 'shard')}, "
        f"{total_bytes:,} bytes"
    )
    lines.append(f"rejected: {manifest.rejected or 'none'}; dropped: {manifest.dropped or 'none'}")
    return lines


def _version_lines(manifest: Any, current: str) -> list[str]:
    line = (
        f"record {manifest.record}, schema version {manifest.schema_version}, "
        f"written by bertkit {manifest.bertkit_version}"
    )
    if manifest.schema_version != current:
        line += f" (this bertkit reads schema version {current})"
    return [line]


def _vocab_line(vocab: dict[str, Any]) -> str:
    details = ", ".join(f"{k} {vocab[k]}" for k in ("size", "cased") if k in vocab)
    return f"vocab: sha256 {vocab.get('sha256')}, path {vocab.get('path')}" + (
        f", {details}" if details else ""
    )


def _shard_summary(target: Target) -> list[str]:
    shard = target.shard
    assert shard is not None
    lines = [f"shard {shard.url}"]
    if shard.info is None:
        lines.append("no manifest lists it (looked for ../../../manifest.json): not verified")
    else:
        manifest = target.manifest
        assert isinstance(manifest, ShardsManifest)
        lines += [
            f"listed in {target.manifest_url} as {shard.info.path} ({shard.label}): "
            f"{_plural(shard.info.samples, 'sample')}, {shard.info.bytes:,} bytes, "
            f"sha256 {shard.info.sha256}",
            *_version_lines(manifest, EXAMPLES_SCHEMA_VERSION),
            _vocab_line(manifest.vocab),
        ]
    return lines


def _documents_summary(target: Target) -> list[str]:
    manifest = target.manifest
    assert isinstance(manifest, DocumentsManifest)
    counts = manifest.counts
    return [
        f"documents directory {target.url} (stage {manifest.stage})",
        *_version_lines(manifest, DOCUMENT_SCHEMA_VERSION),
        f"{_plural(counts.get('documents', 0), 'document')}, "
        f"{_plural(counts.get('sentences', 0), 'sentence')}, "
        f"{counts.get('text_bytes', 0):,} text bytes in {_plural(len(manifest.files), 'file')} "
        f"({sum(f.bytes for f in manifest.files):,} bytes of Parquet)",
        f"inputs: {len(manifest.inputs)}; failed: {len(manifest.failed_inputs)}; "
        f"rejected: {manifest.rejected or 'none'}; dropped: {manifest.dropped or 'none'}",
    ]


# --------------------------------------------------------------------------- command line


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bertkit inspect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="PATH_OR_URL", help="shards, a shard or documents")
    parser.add_argument("--schema", action="store_true", help="print the Arrow schema")
    parser.add_argument("--show", type=int, metavar="N", help="print N examples or documents")
    parser.add_argument("--json", type=int, metavar="N", help="print N as JSON lines, only that")
    parser.add_argument("--stats", action="store_true", help="statistics computed from the data")
    parser.add_argument("--vocab", metavar="DIR", help="vocabulary directory (for tokens)")
    parser.add_argument("--seq", type=int, metavar="LENGTH", help="only seqLENGTH shards")
    parser.add_argument("--split", choices=SPLITS, help="only this split's shards")
    parser.add_argument(
        "--no-verify",
        "--no_verify",
        dest="verify",
        action="store_false",
        help="do not check shards against the manifest's sample counts, sizes and sha256",
    )
    args = parser.parse_args(argv)
    for flag in ("show", "json"):
        if getattr(args, flag) is not None and getattr(args, flag) < 0:
            parser.error(f"--{flag} takes a count of 0 or more")
    if args.json is not None and (args.show is not None or args.stats or args.schema):
        parser.error("--json prints JSON lines only; run it on its own")
    return args


def run(argv: list[str] | None = None) -> int:
    """Run the command; return the exit code (1 on damaged, missing or mismatched data)."""
    args = parse_arguments(argv)
    try:
        target = open_target(args.target)
        if target.kind == "documents":
            if args.seq is not None or args.split or args.vocab:
                raise InspectError(
                    f"{args.target} is a documents directory: --seq, --split and --vocab "
                    "apply to shards"
                )
            return _run_documents(target, args)
        return _run_shards(target, args)
    except (InspectError, OSError) as error:  # ShardReadError, FileNotFoundError, StorageError
        if isinstance(error, BrokenPipeError):
            raise
        sys.stdout.flush()
        print(f"bertkit inspect: error: {error}", file=sys.stderr)
        return 1


def _run_shards(target: Target, args: argparse.Namespace) -> int:
    refs = shard_refs(target, args.seq, args.split)  # checks --seq/--split before any output
    if args.json is not None:
        for example in iter_examples(target, args.seq, args.split, args.verify, args.json):
            print(json.dumps(example.training_fields(), separators=(",", ":")))
        return 0
    sections = args.schema or args.show is not None or args.stats
    if not sections:
        _print_lines(format_summary(target))
        if target.shard is not None:
            count = sum(1 for _ in read_examples(target.shard, args.verify))
            checked = "matches the manifest" if target.shard.info and args.verify else "read"
            print(f"read: {_plural(count, 'sample')}, the tar is complete; {checked}")
        return 0
    if args.schema:
        _print_lines(format_schema(PRETRAINING_EXAMPLE_SCHEMA, target.manifest))
    vocab, note = (
        resolve_vocab(target, args.vocab) if args.show is not None or args.stats else (None, "")
    )
    if args.show is not None:
        print(note)
        remaining = args.show
        for shard in refs:
            if remaining <= 0:
                break
            for example in read_examples(shard, args.verify, remaining):
                print(render_example(example, vocab, f"{shard.label} "))
                remaining -= 1
    if args.stats:
        return _print_shards_stats(target, args, vocab, note)
    return 0


def _print_shards_stats(
    target: Target, args: argparse.Namespace, vocab: Vocab | None, note: str
) -> int:
    mask_id = vocab.id_of(MASK_TOKEN) if vocab is not None else None
    if vocab is not None and mask_id is None:
        note = f"{vocab.url} has no {MASK_TOKEN}"
    _print_lines(format_summary(target))
    stats = ShardsStats(ExampleStats(mask_id, _max_seq_length(target, args.seq)))
    result = _collect_and_print(
        stats,
        lambda: collect_shards_stats(target, stats, args.seq, args.split, args.verify),
        lambda result: format_example_stats(result, note),
    )
    if args.verify:
        _check_counts(manifest_mismatches(target, result), "the shards directory", "rebuild it")
        if target.manifest is not None:
            print("checked against the manifest: every shard's sha256 and every split's counts")
    return 0


def _collect_and_print(
    stats: ShardsStats | DocumentStats,
    collect: Callable[[], None],
    render: Callable[[dict[str, Any]], Iterable[str]],
) -> dict[str, Any]:
    """Run `collect` into `stats` and print the result, even when a file turns out damaged."""
    try:
        collect()
    finally:  # what was read is printed before the error propagates
        result = stats.result()
        if not stats.complete:
            print("statistics of what was read before the error:")
        _print_lines(render(result))
    return result


def _check_counts(problems: list[str], what: str, remedy: str) -> None:
    if problems:
        raise InspectError(
            "what was read differs from the manifest: " + "; ".join(problems) + f"; {what} "
            f"was changed after writing: {remedy}"
        )


def _run_documents(target: Target, args: argparse.Namespace) -> int:
    manifest = target.manifest
    assert isinstance(manifest, DocumentsManifest)
    if args.json is not None:
        names = DOCUMENT_SCHEMA.names
        for row in iter_documents(target, args.json):
            row = {name: row[name] for name in names}
            print(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        return 0
    if not (args.schema or args.show is not None or args.stats):
        _print_lines(format_summary(target))
        return 0
    if args.schema:
        _print_lines(format_schema(DOCUMENT_SCHEMA, manifest))
        if manifest.files:
            first = storage.join(target.url, manifest.files[0].name)
            with storage.open_seekable(first) as source:
                written = pq.ParquetFile(source).schema_arrow
            same = written.equals(DOCUMENT_SCHEMA, check_metadata=False)
            print(f"{manifest.files[0].name}: " + ("same schema" if same else f"\n{written}"))
    if args.show is not None:
        for row in iter_documents(target, args.show):
            _print_lines(format_document(row))
    if args.stats:
        stats = DocumentStats()
        result = _collect_and_print(
            stats,
            lambda: collect_document_stats(target, stats, args.verify),
            lambda result: format_document_stats(result, manifest),
        )
        if args.verify:
            _check_counts(document_mismatches(manifest, result), "the directory", "rerun the stage")
            print("checked against the manifest: every file's size and counts")
    return 0


def _print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)


def main(argv: list[str] | None = None) -> None:
    try:
        code = run(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # `bertkit inspect … --json 1000 | head`: the reader left; end quietly, as Python's
        # documentation recommends (stdout to devnull so the exit flush cannot fail again).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
