"""Turning targets, examples, documents and statistics into the lines `bertkit inspect` prints."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipelines.inspect.reading import Vocab
from pipelines.inspect.targets import Target
from pipelines.io import storage
from pipelines.io.recorded_paths import resolve_path
from pipelines.io.shards.source import ordered_outputs, ordered_splits
from schemas.documents import DOCUMENT_SCHEMA_VERSION, DocumentColumn
from schemas.examples import (
    EXAMPLES_SCHEMA_VERSION,
    NOT_NEXT,
    SHARDS_MANIFEST_NAME,
    PretrainingExample,
)
from schemas.manifest import DocumentsManifest
from schemas.shards import FULL_SENTENCES, NO_MASKS, PAIRS, STATIC, ShardsManifest
from schemas.vocab import MASK_TOKEN, VOCAB_FILE

_BAR_WIDTH = 30
_SHOW_SENTENCES = 3  # sentences printed per document by --show
_SHOW_SENTENCE_CHARS = 160


def located(recorded: str, directory: str, marker: str) -> str | None:
    """Where an artifact that a record in `directory` names as `recorded` is now: beside the
    record first, then as recorded (pipelines/io/recorded_paths.py); None where `marker`, a
    file it holds, is in neither place. A URL is given back as recorded, not fetched."""
    if storage.is_url(recorded):
        return recorded
    path = resolve_path(recorded, directory, marker)
    return path if storage.exists(storage.join(path, marker)) else None


def shown_path(recorded: str, directory: str, marker: str) -> str:
    """`located`, for display: credentials redacted, "(not there now)" where it is not."""
    if not recorded:
        return "(not recorded)"
    found = located(recorded, directory, marker)
    return storage.redact(found if found is not None else f"{recorded} (not there now)")


def _number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def plural(count: int, word: str) -> str:
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
    """An example as text: segments A and B on their own lines (a full-sentence sequence,
    one segment, on one), masked positions marked."""
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
    n_tokens = len(example.input_ids)
    if a_length == n_tokens:  # one segment: a full-sentence sequence, no next-sentence label
        head = (
            f"{label}#{example.key}  full sentences  doc_a {example.doc_a}  doc_b "
            f"{example.doc_b}  dupe_pass {example.dupe_pass}  ({n_tokens} tokens; "
            f"{len(originals)} predicted)"
        )
        return "\n".join([head, "     " + " ".join(words)])
    nsp = "NotNext" if example.next_sentence_label == NOT_NEXT else "IsNext"
    head = (
        f"{label}#{example.key}  {nsp}  doc_a {example.doc_a}  doc_b {example.doc_b}  "
        f"dupe_pass {example.dupe_pass}  ({n_tokens} tokens: A {a_length}, "
        f"B {n_tokens - a_length}; {len(originals)} predicted)"
    )
    return "\n".join(
        [head, "  A  " + " ".join(words[:a_length]), "  B  " + " ".join(words[a_length:])]
    )


def format_example_stats(stats: dict[str, Any], mask_note: str = "") -> list[str]:
    lines = [f"examples {stats['examples']:,} in {plural(stats['shards'], 'shard')}"]
    for label, tally in stats["splits"].items():
        lines.append(
            f"  {label:<16} {plural(tally['examples'], 'example')} in "
            f"{plural(tally['shards'], 'shard')}, NotNext {tally['not_next']:,}, "
            f"{tally['tokens']:,} tokens, {plural(tally['predictions'], 'prediction')}"
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
        f"{plural(len(sentences), 'sentence')}, {text_bytes:,} bytes)  {' '.join(extra)}".rstrip()
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
        f"read:     {plural(stats['documents'], 'document')}, "
        f"{plural(stats['sentences'], 'sentence')}, {stats['text_bytes']:,} text bytes in "
        f"{plural(stats['files'], 'file')}",
        f"manifest: {plural(counts.get('documents', 0), 'document')}, "
        f"{plural(counts.get('sentences', 0), 'sentence')}, {counts.get('text_bytes', 0):,} "
        f"text bytes in {plural(len(manifest.files), 'file')} "
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
        _vocab_line(manifest.vocab, target.manifest_url),
        _kind_line(manifest),
    ]
    total_samples = total_shards = total_bytes = 0
    for name, output in ordered_outputs(manifest):
        if manifest.masking == STATIC:
            lines.append(f"{name}: max {output.max_predictions_per_seq} predictions per sequence")
        else:
            lines.append(f"{name}: no stored predictions")
        for split in ordered_splits(output):
            shards = output.splits[split]
            size = sum(s.bytes for s in shards.shards)
            lines.append(
                f"  {split:<8} {plural(shards.samples, 'example')} in "
                f"{plural(len(shards.shards), 'shard')} ({size:,} bytes), NotNext "
                f"{shards.not_next:,}, {shards.tokens:,} tokens, "
                f"{plural(shards.predictions, 'prediction')}"
            )
            total_samples += shards.samples
            total_shards += len(shards.shards)
            total_bytes += size
    lines.append(
        f"total: {plural(total_samples, 'example')} in {plural(total_shards, 'shard')}, "
        f"{total_bytes:,} bytes"
    )
    lines.append(f"rejected: {manifest.rejected or 'none'}; dropped: {manifest.dropped or 'none'}")
    return lines


_KIND_NOTES = {
    PAIRS: "sentence pairs with a next-sentence label",
    FULL_SENTENCES: "text packed across documents, no next-sentence label",
    STATIC: "masks stored",
    NO_MASKS: "no masks, train with --masking dynamic",
}


def _kind_line(manifest: ShardsManifest) -> str:
    """What the samples are (the manifest's `sequences` and `masking`)."""
    return (
        f"sequences {manifest.sequences} ({_KIND_NOTES.get(manifest.sequences, '?')}), "
        f"masking {manifest.masking} ({_KIND_NOTES.get(manifest.masking, '?')})"
    )


def _version_lines(manifest: Any, current: str) -> list[str]:
    line = (
        f"record {manifest.record}, schema version {manifest.schema_version}, "
        f"written by bertkit {manifest.bertkit_version}"
    )
    if manifest.schema_version != current:
        line += f" (this bertkit reads schema version {current})"
    return [line]


def _vocab_line(vocab: dict[str, Any], manifest_url: str | None) -> str:
    """The manifest's vocabulary, its path where it is now (the manifest records it relative
    to itself: `../vocab`)."""
    details = ", ".join(f"{k} {vocab[k]}" for k in ("size", "cased") if k in vocab)
    path = shown_path(str(vocab.get("path") or ""), storage.parent(manifest_url or ""), VOCAB_FILE)
    origin = vocab.get("origin")
    # Only a released BERT's vocabulary has an origin: a bertkit one's vocab.json says it.
    if isinstance(origin, dict) and origin.get("kind") == "released":
        details += f", a released BERT's (casing from {origin.get('cased_from')})"
    return f"vocab: sha256 {vocab.get('sha256')}, path {path}" + (f", {details}" if details else "")


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
            f"{plural(shard.info.samples, 'sample')}, {shard.info.bytes:,} bytes, "
            f"sha256 {shard.info.sha256}",
            *_version_lines(manifest, EXAMPLES_SCHEMA_VERSION),
            _vocab_line(manifest.vocab, target.manifest_url),
        ]
    return lines


def _documents_summary(target: Target) -> list[str]:
    manifest = target.manifest
    assert isinstance(manifest, DocumentsManifest)
    counts = manifest.counts
    return [
        f"documents directory {target.url} (stage {manifest.stage})",
        *_version_lines(manifest, DOCUMENT_SCHEMA_VERSION),
        f"{plural(counts.get('documents', 0), 'document')}, "
        f"{plural(counts.get('sentences', 0), 'sentence')}, "
        f"{counts.get('text_bytes', 0):,} text bytes in {plural(len(manifest.files), 'file')} "
        f"({sum(f.bytes for f in manifest.files):,} bytes of Parquet)",
        f"inputs: {len(manifest.inputs)}; failed: {len(manifest.failed_inputs)}; "
        f"rejected: {manifest.rejected or 'none'}; dropped: {manifest.dropped or 'none'}",
    ]
