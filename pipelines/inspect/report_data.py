"""What the data report shows, read from the artifacts: plain statistics and Google's
expected figures for the same settings, with no plotting (tests check them exactly).

Everything is read once and streamed: documents one row group at a time (only the `source`
and `sentences` columns), shards example by example. Tokens per sentence come from a bounded,
deterministic sample of sentences (every k-th, k from the manifest's sentence count), so the
report's time does not grow with the corpus beyond one pass over the files.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.inspect.reading import iter_document_batches, read_examples
from pipelines.inspect.targets import InspectError, Target, open_target, shard_refs
from pipelines.io import storage
from pipelines.io.recorded_paths import resolve_path
from pipelines.io.released_vocab import CasingNotSaidError
from pipelines.io.vocabulary import VocabError, Vocabulary, load_vocab
from schemas.checks import MAX_RECORD_BYTES
from schemas.documents import DocumentColumn
from schemas.duplicates import DUPLICATE_SCHEMA, DUPLICATES_DIR, KINDS, DuplicateColumn
from schemas.examples import NOT_NEXT, PretrainingExample
from schemas.manifest import MANIFEST_NAME, DocumentsManifest
from schemas.shards import ShardsManifest

SENTENCE_SAMPLE = 20_000  # sentences tokenised for tokens per sentence, at most
MASK_PROB, KEEP_PROB, RANDOM_PROB = 0.8, 0.1, 0.1  # Google's 80/10/10
NOT_NEXT_PROB = 0.5  # Google's coin for a random next sentence


# --------------------------------------------------------------------------- documents


@dataclass(slots=True)
class DuplicatesSummary:
    """What `bertkit dedup` removed from one documents directory."""

    dropped: dict[str, int]  # kind → count, from the manifest's `dropped`
    rows: Counter[str] = field(default_factory=Counter)  # kind → rows read in _duplicates/
    by_source: Counter[str] = field(default_factory=Counter)
    by_input: Counter[tuple[str, str]] = field(default_factory=Counter)  # (input, kind) → rows
    threshold: float | None = None  # the dedup run's --threshold
    similarities: list[float] = field(default_factory=list)  # near duplicates only
    files: int = 0
    note: str = ""


@dataclass(slots=True)
class DocumentsSection:
    """One documents directory: documents and text per source, sentences per document."""

    url: str
    stage: str
    documents: int = 0
    sentences: int = 0
    text_bytes: int = 0
    file_bytes: int = 0
    per_source: Counter[str] = field(default_factory=Counter)  # documents
    bytes_per_source: Counter[str] = field(default_factory=Counter)  # text bytes
    sentences_per_document: Counter[int] = field(default_factory=Counter)
    sampled: list[str] = field(default_factory=list)  # every `stride`-th sentence
    stride: int = 1
    duplicates: DuplicatesSummary | None = None


def sample_stride(total_sentences: int, limit: int = SENTENCE_SAMPLE) -> int:
    """Every k-th sentence keeps at most `limit` of `total_sentences`."""
    return max(1, -(-total_sentences // limit))


def read_documents(target: Target, verify: bool, stride: int) -> DocumentsSection:
    """Counts per source and sentences per document of every file; every `stride`-th
    sentence (in file order) kept for tokenising."""
    manifest = target.manifest
    assert isinstance(manifest, DocumentsManifest)
    section = DocumentsSection(target.url, manifest.stage, stride=stride)
    section.file_bytes = sum(f.bytes for f in manifest.files)
    position = 0
    columns = [DocumentColumn.SOURCE, DocumentColumn.SENTENCES]
    for _, batch in iter_document_batches(target, columns, verify):
        sentences = batch.column(DocumentColumn.SENTENCES)
        per_document = pc.list_value_length(sentences).to_numpy(zero_copy_only=False)
        flat = pc.list_flatten(sentences)
        lengths = pc.binary_length(flat).to_numpy(zero_copy_only=False)
        running = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        ends = np.cumsum(per_document)
        per_source = (
            pa.table(
                {
                    "source": batch.column(DocumentColumn.SOURCE),
                    "bytes": running[ends] - running[ends - per_document],
                }
            )
            .group_by("source")
            .aggregate([("bytes", "sum"), ("bytes", "count")])
        )
        grouped = per_source.to_pydict()
        for source, total, count in zip(
            grouped["source"], grouped["bytes_sum"], grouped["bytes_count"], strict=True
        ):
            section.per_source[source] += count
            section.bytes_per_source[source] += total
        section.documents += batch.num_rows
        section.sentences += len(flat)
        section.text_bytes += int(lengths.sum())
        section.sentences_per_document.update(per_document.tolist())
        first = (-position) % stride
        section.sampled += flat[first::stride].to_pylist() if first < len(flat) else []
        position += len(flat)
    section.duplicates = read_duplicates(target.url, manifest)
    return section


def duplicate_files(url: str, manifest: DocumentsManifest) -> list[str]:
    """The _duplicates/ files of a documents directory: those its manifest lists (in
    `rejects_files` or `duplicates_files`); only a manifest that lists none and has no
    `duplicates_files` (an older dedup's) has its Parquet files there listed (a local
    directory, s3:// or gs://; plain HTTP cannot list). A manifest's `duplicates_files: []`
    says its run removed nothing: a stray file there is not read as its duplicates."""
    recorded = manifest.config.get("duplicates_files")
    listed = [*manifest.rejects_files, *(recorded or [])]
    names = sorted({n for n in listed if str(n).startswith(DUPLICATES_DIR + "/")})
    if not names and recorded is None:
        names = _duplicates_listed(url)
    return [storage.join(url, name) for name in names]


def _duplicates_listed(url: str) -> list[str]:
    """The Parquet files in a documents directory's _duplicates/, listed."""
    if not storage.is_remote(url):
        folder = os.path.join(url, DUPLICATES_DIR)
        found = os.listdir(folder) if os.path.isdir(folder) else []
        return [f"{DUPLICATES_DIR}/{n}" for n in sorted(found) if n.endswith(".parquet")]
    if storage.scheme(url) in ("s3", "gs"):
        from pipelines.io import objects

        found = objects.list_names(storage.join(url, DUPLICATES_DIR))
        return [f"{DUPLICATES_DIR}/{n}" for n in found if "/" not in n and n.endswith(".parquet")]
    return []


def read_duplicates(url: str, manifest: DocumentsManifest) -> DuplicatesSummary | None:
    """The documents `bertkit dedup` removed, or None when no dedup ran on this directory."""
    dropped = {kind: manifest.dropped[kind] for kind in KINDS if kind in manifest.dropped}
    files = duplicate_files(url, manifest)
    if not dropped and not files and manifest.stage != "dedup":
        return None
    import pyarrow.parquet as pq

    threshold = manifest.config.get("threshold")
    summary = DuplicatesSummary(dropped, files=len(files), threshold=threshold)
    for file_url in files:
        with storage.open_seekable(file_url) as source:
            table = pq.read_table(source, columns=list(DUPLICATE_SCHEMA.names))
        kinds = table.column(DuplicateColumn.KIND).to_pylist()
        summary.rows.update(kinds)
        summary.by_source.update(table.column(DuplicateColumn.SOURCE).to_pylist())
        inputs = table.column(DuplicateColumn.INPUT).to_pylist()
        summary.by_input.update(zip(inputs, kinds, strict=True))
        similarity = table.column(DuplicateColumn.SIMILARITY).to_pylist()
        summary.similarities += [s for s, k in zip(similarity, kinds, strict=True) if k != KINDS[0]]
    if files and dict(summary.rows) != {k: v for k, v in dropped.items() if v}:
        summary.note = (
            f"the manifest counts {dropped} but {DUPLICATES_DIR}/ holds {dict(summary.rows)}"
        )
    return summary


# --------------------------------------------------------------------------- shards


@dataclass(slots=True)
class SplitSection:
    """One seqN/SPLIT's examples: lengths, NotNext, predictions, the 80/10/10 split."""

    label: str
    max_seq_length: int
    max_predictions: int
    examples: int = 0
    tokens: int = 0
    not_next: int = 0
    lengths: Counter[int] = field(default_factory=Counter)
    predictions: Counter[int] = field(default_factory=Counter)
    masked: Counter[str] = field(default_factory=Counter)  # mask, keep, random

    def add(self, example: PretrainingExample, mask_id: int) -> None:
        self.examples += 1
        self.tokens += len(example.input_ids)
        self.not_next += int(example.next_sentence_label == NOT_NEXT)
        self.lengths[len(example.input_ids)] += 1
        self.predictions[len(example.masked_lm_positions)] += 1
        shown = example.input_ids[example.masked_lm_positions]
        is_mask = shown == mask_id
        masks = int(np.count_nonzero(is_mask))
        keeps = int(np.count_nonzero((shown == example.masked_lm_ids) & ~is_mask))
        self.masked["mask"] += masks
        self.masked["keep"] += keeps
        self.masked["random"] += len(shown) - masks - keeps


@dataclass(slots=True)
class ShardsSection:
    url: str
    manifest: ShardsManifest | None
    splits: dict[str, SplitSection] = field(default_factory=dict)
    token_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    shard_bytes: int = 0


def count_tokens(counts: np.ndarray, chunks: list[np.ndarray], size: int) -> np.ndarray:
    """`counts` plus the occurrences of each id in `chunks`, grown to `size` ids at least."""
    if not chunks:
        return counts
    added = np.bincount(np.concatenate(chunks), minlength=max(size, len(counts)))
    if len(counts) < len(added):
        counts = np.pad(counts, (0, len(added) - len(counts)))
    counts[: len(added)] += added
    return counts


def original_ids(example: PretrainingExample) -> np.ndarray:
    """The example's tokens as the text had them: masked positions hold their labels."""
    ids = example.input_ids.astype(np.int64)
    ids[example.masked_lm_positions] = example.masked_lm_ids
    return ids


def read_shards(target: Target, verify: bool, vocab: Vocabulary | None) -> ShardsSection:
    """Every example of every shard, per seqN/SPLIT, and how often each token occurs."""
    manifest = target.manifest if isinstance(target.manifest, ShardsManifest) else None
    section = ShardsSection(target.url, manifest)
    mask_id = vocab.mask_id if vocab is not None else -1
    size = vocab.size if vocab is not None else 0
    chunks: list[np.ndarray] = []
    for shard in shard_refs(target):
        section.shard_bytes += shard.info.bytes if shard.info is not None else 0
        split = section.splits.get(shard.label)
        if split is None:
            output = manifest.outputs[shard.output] if manifest and shard.output else None
            split = section.splits[shard.label] = SplitSection(
                shard.label,
                output.max_seq_length if output else 0,
                output.max_predictions_per_seq if output else 0,
            )
        for example in read_examples(shard, verify):
            split.add(example, mask_id)
            chunks.append(original_ids(example))
            if len(chunks) >= 4096:
                section.token_counts = count_tokens(section.token_counts, chunks, size)
                chunks = []
    section.token_counts = count_tokens(section.token_counts, chunks, size)
    return section


# --------------------------------------------------------------------------- Google's figures


def google_predictions(
    lengths: Counter[int], masked_lm_prob: float, max_predictions: int
) -> Counter[int]:
    """Predictions per example that Google's rule gives these example lengths:
    min(max_predictions, max(1, round(n × masked_lm_prob))), Python's round as Google's."""
    expected: Counter[int] = Counter()
    for length, count in lengths.items():
        expected[min(max_predictions, max(1, round(length * masked_lm_prob)))] += count
    return expected


def google_target_lengths(max_seq_length: int, short_seq_prob: float) -> dict[int, float]:
    """The share of Google's per-document target lengths, as example lengths (+3 for [CLS]
    and two [SEP]): max_seq_length with 1 - short_seq_prob, else uniform in [5, max]."""
    top = max_seq_length - 3
    share = {length + 3: short_seq_prob / (top - 1) for length in range(2, top + 1)}
    share[max_seq_length] = share.get(max_seq_length, 0.0) + 1 - short_seq_prob
    return share


def rank_frequency(counts: np.ndarray, skip: set[int]) -> np.ndarray:
    """Occurrences of each token that occurs, most frequent first, `skip` ids left out."""
    kept = np.delete(counts, [i for i in skip if i < len(counts)])
    kept = kept[kept > 0]
    return np.sort(kept)[::-1]


def heldout_shares(manifest: ShardsManifest) -> dict[str, Any]:
    """Documents and examples held out, next to the --heldout-fraction asked for."""
    counts = manifest.counts
    samples = Counter[str]()
    for output in manifest.outputs.values():
        for split, shards in output.splits.items():
            samples[split] += shards.samples
    total = sum(samples.values())
    return {
        "fraction": manifest.config.get("heldout_fraction"),
        "documents": counts.get("documents", 0),
        "documents_heldout": counts.get("documents_heldout", 0),
        "examples": total,
        "examples_heldout": samples.get("heldout", 0),
    }


# --------------------------------------------------------------------------- vocabulary


def find_vocabulary(target: Target, vocab_dir: str | None) -> tuple[Vocabulary | None, str]:
    """The shards' vocabulary (checked by sha256) or --vocab DIR, with a note on where it came
    from or why there is none: a bertkit vocabulary or a released BERT's, loaded as the
    stages load it, with the casing the shards' manifest recorded (uncased where nothing
    says it: the report counts tokens, it does not make them)."""
    from pipelines.inspect.reading import resolve_vocab

    found, note = resolve_vocab(target, vocab_dir)
    if found is None:
        return None, note
    recorded = target.manifest.vocab if isinstance(target.manifest, ShardsManifest) else {}
    directory = storage.parent(found.url)
    cased = recorded.get("cased")
    try:
        try:
            return load_vocab(directory, cased=cased, cased_flag="the shards' manifest"), note
        except CasingNotSaidError:
            return load_vocab(directory, cased=False), note
    except VocabError as error:  # vocab.txt and tokenizer.json disagree, a file modified, …
        raise InspectError(str(error)) from error


# --------------------------------------------------------------------------- targets


@dataclass(slots=True)
class ReportData:
    """Everything the report shows, with notes on what could not be read and why."""

    title: str
    documents: list[DocumentsSection] = field(default_factory=list)
    shards: ShardsSection | None = None
    vocab: Vocabulary | None = None
    vocab_note: str = ""
    sentence_tokens: Counter[int] = field(default_factory=Counter)
    sampled_sentences: int = 0
    sampled_unknown: int = 0
    sampled_tokens: int = 0
    notes: list[str] = field(default_factory=list)


def input_documents(target: Target) -> tuple[list[Target], list[str]]:
    """The documents directories a shards manifest names that can be read (relative to the
    manifest, else as an older manifest recorded them: pipelines/io/recorded_paths.py), and
    a note for each that cannot, or that changed since."""
    manifest = target.manifest
    if not isinstance(manifest, ShardsManifest) or target.manifest_url is None:
        return [], []
    found, notes = [], []
    for entry in manifest.inputs:
        path = str(entry.get("path", ""))
        directory = resolve_path(path, storage.parent(target.manifest_url), MANIFEST_NAME)
        foreign = storage.is_remote(path) and not _same_storage(path, target)
        if foreign or not storage.exists(storage.join(directory, MANIFEST_NAME)):
            notes.append(
                f"documents {storage.redact(path)}: not readable from here (no {MANIFEST_NAME} "
                "there, or on other storage than the shards), so its plots are left out"
            )
            continue
        manifest_url = storage.join(directory, MANIFEST_NAME)
        text = storage.read_bytes(manifest_url, MAX_RECORD_BYTES)
        if entry.get("manifest_sha256") and hashlib.sha256(text).hexdigest() != entry.get(
            "manifest_sha256"
        ):
            notes.append(
                f"documents {storage.redact(path)}: its manifest changed since the shards were "
                "made (another sha256), so it is shown as it is now, not as the shards read it"
            )
        try:
            found.append(open_target(directory))
        except InspectError as error:  # its manifest is damaged: the shards still report
            notes.append(_unreadable(directory, error))
    return found, notes


def _unreadable(path: str, error: InspectError) -> str:
    return f"documents {storage.redact(path)}: cannot be read ({error}), so its plots are left out"


def _same_storage(path: str, target: Target) -> bool:
    return path.split("/", 3)[:3] == (target.manifest_url or "").split("/", 3)[:3]


def collect(target: Target, vocab_dir: str | None, verify: bool) -> ReportData:
    """Read a documents directory, a shards directory (and the documents it names) or a
    shard into one ReportData."""
    data = ReportData(storage.redact(target.url))
    documents: list[Target] = []
    if target.kind == "documents":
        documents = [target]
    else:
        documents, data.notes = input_documents(target)
    if target.kind != "documents" or vocab_dir is not None:
        data.vocab, data.vocab_note = find_vocabulary(target, vocab_dir)
    else:
        data.vocab_note = "no vocabulary: pass --vocab DIR for tokens per sentence"
    total = sum(
        int(t.manifest.counts.get("sentences", 0))
        for t in documents
        if isinstance(t.manifest, DocumentsManifest)
    )
    stride = sample_stride(total)
    for documents_target in documents:
        try:
            data.documents.append(read_documents(documents_target, verify, stride))
        except InspectError as error:
            if target.kind == "documents":  # the report's own subject: nothing to show
                raise
            data.notes.append(_unreadable(documents_target.url, error))
    if target.kind != "documents":
        data.shards = read_shards(target, verify, data.vocab)
    if data.vocab is not None:
        tokenize_sample(data)
    return data


def tokenize_sample(data: ReportData) -> None:
    """Tokens per sentence, and the [UNK] share, of the sampled sentences."""
    assert data.vocab is not None
    sentences = [s for section in data.documents for s in section.sampled]
    if not sentences:
        return
    encodings = data.vocab.tokenizer.encode_batch_fast(sentences, add_special_tokens=False)
    unk = data.vocab.unk_id
    for encoding in encodings:
        ids = encoding.ids
        data.sentence_tokens[len(ids)] += 1
        data.sampled_tokens += len(ids)
        data.sampled_unknown += ids.count(unk)
    data.sampled_sentences = len(sentences)


def check_readable(target: Target) -> None:
    """A report needs a manifest to read through, or a single shard."""
    if target.kind != "shard" and target.manifest is None:
        raise InspectError(f"{target.url}: no manifest to read the data through")
