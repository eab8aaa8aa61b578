"""`bertkit examples`: documents → BERT pre-training examples in WebDataset shards.

    bertkit examples --documents out/documents/wikipedia out/documents/books \\
        --vocab out/vocab --output out/shards --max-seq-length 128,512 --dupe-factor 5

(= `python -m pipelines.examples …`; every other flag goes to Beam, e.g. `--runner
DataflowRunner --project P --region R --temp_location gs://…`, or `--direct_num_workers 4
--direct_running_mode multi_processing` locally.)

google-research/bert's `create_pretraining_data.py` algorithm (pipelines/bert/pairs.py,
pipelines/bert/masking.py) with its flag names and defaults, made parallel and streaming:

1. TokenizeDocuments: each documents file is read row group by row group and tokenized
   once; held-out documents are chosen by a hash of their id (`--heldout-fraction`); for
   each dupe pass a document is sent to a random *partner group* (a hash of seed, pass and
   id), so NotNext partners come from the whole corpus and change every pass.
2. PairAndMask: per group, each document's sentence pairs and masks are drawn from its own
   generator seeded by (seed, document id, pass, length), so the result does not depend on
   runner, worker count or order; each example gets a random place in the global shuffle.
3. WriteShards: examples are sorted by that place and cut into shards of equal size (±1)
   per length and split, each written under a temporary name and renamed; `manifest.json`
   is written last.

Documents and examples move between steps through spill files under `OUTPUT/_work` (see
pipelines/beam/spill.py), not through Beam's shuffle, so every worker's memory is bounded by a
flag (`--work-partition-mb`, `--bucket-mb`, `--spill-budget-mb`) however large the corpus.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from itertools import chain
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import files
from pipelines.beam.documents import DocumentsInput, UnitTally, finish_unit, read_documents_input
from pipelines.beam.runner import OutputOptions, make_pipeline, parse_stage_arguments, stage_main
from pipelines.beam.shards import write_shard
from pipelines.beam.spill import (
    SpillWriter,
    TokenizedDocument,
    pack_document,
    pack_example,
    unpack_documents,
    unpack_examples,
)
from pipelines.bert.draws import document_stream
from pipelines.bert.masking import MaskingConfig, mask_batch
from pipelines.bert.pairs import create_pairs, pair_input_ids
from pipelines.io.hashing import stable_hash64, unit_fraction
from pipelines.io.parquet import iter_row_groups
from pipelines.io.vocabulary import Vocabulary, load_vocab
from schemas import (
    MANIFEST_NAME,
    REJECTS_DIR,
    SHARDS_MANIFEST_NAME,
    DocumentColumn,
    PretrainingExample,
    Reject,
)
from schemas.examples import NOT_NEXT, SPLITS, id_width_for_vocab, sample_key, seq_dir, shard_name
from schemas.shards import SequenceOutput, ShardInfo, ShardsManifest, SplitShards

_LOG = logging.getLogger(__name__)
WORK_DIR = "_work"
# Planning estimates: BERT's uncased WordPiece makes ~1 token per 4.6 bytes of English text;
# an example costs its ids plus ~60 bytes of predictions, header and provenance.
_BYTES_PER_TOKEN_ESTIMATE = 4.6
_EXAMPLE_OVERHEAD_ESTIMATE = 60
# A tokenizers Encoding holds ids, strings and offsets: ~100 bytes a token. Tokenizing ~4,000
# sentences per call keeps that near 10 MB and still feeds every tokenizer thread.
TOKENIZE_BATCH_SENTENCES = 4096

DEVIATIONS = [
    "NotNext partner: drawn from a random group of documents of the whole corpus, regrouped "
    "every dupe pass, never the same document (Google: any document of the in-memory corpus, "
    "the same one possible after 10 tries; NVIDIA/HF: the same file or shard only)",
    "randomness: one generator per (seed, document id, pass, max_seq_length) instead of one "
    "generator walked over the corpus in input order, so output is independent of runner "
    "and worker count; values differ from Google's for the same seed, distributions do not",
    "masking: the 80/10/10 draws are vectorised per example (numpy PCG64)",
    "whole-word masking: the 80/10/10 choice is made per word and applied to all its pieces "
    "(google-research/bert#910); a word never spans [SEP]",
    "random replacement token: never [PAD]/[UNK]/[CLS]/[SEP]/[MASK] or an [unusedN] slot",
    "held-out split: documents whose id hashes below --heldout-fraction, with their own "
    "partner groups (no held-out text in training examples)",
    "output: globally shuffled, equal-size shards instead of one file per input",
    "next_sentence_label: 1 = NotNext, 0 = IsNext (Google's and HF's convention)",
]


class ExamplesOptions(PipelineOptions):
    """This stage's flags (Google's names and defaults); --output comes from OutputOptions."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        def flag(name: str, **kwargs: Any) -> None:
            dest = name.replace("-", "_")
            parser.add_argument(f"--{name}", f"--{dest}", dest=dest, **kwargs)

        flag("documents", nargs="+", help="documents directories (required)")
        flag("vocab", help="vocabulary directory from `bertkit vocab` (required)")
        flag(
            "max-seq-length",
            default="128",
            help="one length or a comma list, e.g. 128,512: one output tree each (default 128)",
        )
        flag(
            "max-predictions-per-seq",
            default=None,
            help="per length, comma list; default round(length × masked-lm-prob): 20 at 128",
        )
        flag("masked-lm-prob", type=float, default=0.15, help="default 0.15")
        flag("dupe-factor", type=int, default=10, help="passes over the corpus (default 10)")
        flag("short-seq-prob", type=float, default=0.1, help="default 0.1")
        flag("seed", type=int, default=12345, help="random seed (default 12345, Google's)")
        flag("whole-word-mask", action="store_true", help="mask whole words")
        flag(
            "heldout-fraction",
            type=float,
            default=0.01,
            help="fraction of documents (by id hash) kept out for evaluation (default 0.01)",
        )
        flag(
            "samples-per-shard",
            type=int,
            default=50_000,
            help="most samples in a shard; shards of a split are equal ±1 (default 50000)",
        )
        flag(
            "partner-group-docs",
            type=int,
            default=1000,
            help="documents per random NotNext partner group (default 1000)",
        )
        flag(
            "work-partition-mb",
            type=int,
            default=64,
            help="MB of token ids one pairing step holds (default 64)",
        )
        flag("bucket-mb", type=int, default=64, help="MB of examples sorted at once (default 64)")
        flag(
            "spill-budget-mb",
            type=int,
            default=32,
            help="MB of spill records a step buffers before writing a file (default 32)",
        )


@dataclass(frozen=True, slots=True)
class ExamplesConfig:
    documents: tuple[str, ...]
    vocab: str
    output: str
    max_seq_lengths: tuple[int, ...]
    max_predictions_per_seq: tuple[int, ...]
    masked_lm_prob: float = 0.15
    dupe_factor: int = 10
    short_seq_prob: float = 0.1
    seed: int = 12345
    whole_word_mask: bool = False
    heldout_fraction: float = 0.01
    samples_per_shard: int = 50_000
    partner_group_docs: int = 1000
    work_partition_mb: int = 64
    bucket_mb: int = 64
    spill_budget_mb: int = 32

    @property
    def work_dir(self) -> str:
        return files.join(self.output, WORK_DIR)


class ExamplesConfigError(ValueError):
    """Flags or inputs that cannot make examples; raised before any work starts."""


def _int_list(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise ExamplesConfigError(f"--{flag} {text!r}: expected integers like 128,512") from None
    if not values:
        raise ExamplesConfigError(f"--{flag} is empty")
    return values


def config_from_flags(flags: Any, output: str) -> ExamplesConfig:
    lengths = _int_list(flags.max_seq_length, "max-seq-length")
    if flags.max_predictions_per_seq is None:
        predictions = tuple(round(length * flags.masked_lm_prob) for length in lengths)
    else:
        predictions = _int_list(flags.max_predictions_per_seq, "max-predictions-per-seq")
    config = ExamplesConfig(
        documents=tuple(flags.documents),
        vocab=flags.vocab,
        output=output,
        max_seq_lengths=lengths,
        max_predictions_per_seq=predictions,
        masked_lm_prob=flags.masked_lm_prob,
        dupe_factor=flags.dupe_factor,
        short_seq_prob=flags.short_seq_prob,
        seed=flags.seed,
        whole_word_mask=flags.whole_word_mask,
        heldout_fraction=flags.heldout_fraction,
        samples_per_shard=flags.samples_per_shard,
        partner_group_docs=flags.partner_group_docs,
        work_partition_mb=flags.work_partition_mb,
        bucket_mb=flags.bucket_mb,
        spill_budget_mb=flags.spill_budget_mb,
    )
    validate(config)
    return config


def validate(config: ExamplesConfig) -> None:
    problems = []
    if len(config.max_predictions_per_seq) != len(config.max_seq_lengths):
        problems.append(
            f"--max-predictions-per-seq has {len(config.max_predictions_per_seq)} values for "
            f"{len(config.max_seq_lengths)} --max-seq-length values: give one per length"
        )
    if len(set(config.max_seq_lengths)) != len(config.max_seq_lengths):
        problems.append(f"--max-seq-length repeats a length: {config.max_seq_lengths}")
    for length in config.max_seq_lengths:
        if not 8 <= length <= 65535:
            problems.append(f"--max-seq-length {length}: must be between 8 and 65535")
    if any(p < 1 for p in config.max_predictions_per_seq):
        problems.append("--max-predictions-per-seq must be at least 1")
    if not 0 < config.masked_lm_prob < 1:
        problems.append(f"--masked-lm-prob {config.masked_lm_prob}: must be in (0, 1)")
    if not 0 <= config.short_seq_prob <= 1:
        problems.append(f"--short-seq-prob {config.short_seq_prob}: must be in [0, 1]")
    if config.dupe_factor < 1 or config.dupe_factor > 65535:
        problems.append(f"--dupe-factor {config.dupe_factor}: must be in [1, 65535]")
    if not 0 <= config.heldout_fraction < 1:
        problems.append(f"--heldout-fraction {config.heldout_fraction}: must be in [0, 1)")
    for name in ("samples_per_shard", "partner_group_docs", "work_partition_mb", "bucket_mb"):
        if getattr(config, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be at least 1")
    if config.partner_group_docs < 2:
        problems.append("--partner-group-docs must be at least 2 (a NotNext needs a partner)")
    if problems:
        raise ExamplesConfigError("; ".join(problems))


# --- inputs -----------------------------------------------------------------------------


def read_documents_inputs(directories: Sequence[str]) -> list[DocumentsInput]:
    """Each documents directory's manifest, checked; the stage refuses what it cannot use."""
    inputs = []
    for directory in directories:
        documents_input = read_documents_input(directory)
        if not documents_input.manifest.counts.get("documents"):
            raise ExamplesConfigError(
                f"{directory} holds no documents (see its {MANIFEST_NAME}): nothing to make "
                "examples from"
            )
        inputs.append(documents_input)
    return inputs


@dataclass(frozen=True, slots=True)
class SplitLayout:
    groups: int  # random NotNext partner groups per pass
    partitions: int  # pairing steps per pass (each holds groups / partitions groups)


@dataclass(frozen=True, slots=True)
class Layout:
    """Sizes derived from the inputs' manifests and the flags: fixed before work starts."""

    id_width: int
    splits: dict[str, SplitLayout]
    buckets: dict[str, int]  # "seq128/train" → shuffle buckets

    def group_of(self, seed: int, dupe_pass: int, split: str, document_id: str) -> int:
        return stable_hash64("partner-group", seed, dupe_pass, document_id) % (
            self.splits[split].groups
        )

    def partition_of(self, split: str, group: int) -> int:
        return group % self.splits[split].partitions


def plan_layout(config: ExamplesConfig, inputs: list[DocumentsInput], vocab_size: int) -> Layout:
    documents = sum(i.manifest.counts["documents"] for i in inputs)
    text_bytes = sum(i.manifest.counts.get("text_bytes", 0) for i in inputs)
    id_width = id_width_for_vocab(vocab_size)
    shares = {"train": 1 - config.heldout_fraction, "heldout": config.heldout_fraction}
    splits, buckets = {}, {}
    for split, share in shares.items():
        split_docs = documents * share
        groups = max(1, round(split_docs / config.partner_group_docs))
        token_bytes = text_bytes * share / _BYTES_PER_TOKEN_ESTIMATE * id_width
        partitions = max(1, min(groups, math.ceil(token_bytes / (config.work_partition_mb << 20))))
        splits[split] = SplitLayout(groups, partitions)
        for length in config.max_seq_lengths:
            example_bytes = (
                token_bytes * config.dupe_factor * (1 + _EXAMPLE_OVERHEAD_ESTIMATE / length)
            )
            buckets[f"{seq_dir(length)}/{split}"] = max(
                1, math.ceil(example_bytes / (config.bucket_mb << 20))
            )
    return Layout(id_width, splits, buckets)


def split_of(document_id: str, heldout_fraction: float) -> str:
    """Held-out documents by a hash of the id alone: the same for every seed and length."""
    return "heldout" if unit_fraction("heldout", document_id) < heldout_fraction else "train"


# --- step 1: tokenize and scatter to partner groups ---------------------------------------


SUMMARY = "summary"


class _TokenizeDocumentsFn(beam.DoFn):
    def __init__(self, config: ExamplesConfig, layout: Layout) -> None:
        self._config = config
        self._layout = layout
        self._vocab: Vocabulary | None = None

    def setup(self) -> None:
        self._vocab = load_vocab(self._config.vocab, files.READER)

    def process(self, unit: tuple[str, str]) -> Iterator[Any]:
        name, path = unit
        config, layout = self._config, self._layout
        tally = UnitTally(name)
        writer = SpillWriter(
            files.join(config.work_dir, "documents"), name, config.spill_budget_mb << 20
        )
        for document in self._read_tokenized(path, tally):
            split = split_of(document.id, config.heldout_fraction)
            tally.counts[f"documents_{split}"] += 1
            record = pack_document(document, layout.id_width)
            for dupe_pass in range(config.dupe_factor):
                group = layout.group_of(config.seed, dupe_pass, split, document.id)
                partition = layout.partition_of(split, group)
                writer.add(f"{split}/p{dupe_pass:05d}/q{partition:05d}", record)
        yield from writer.close()
        yield beam.pvalue.TaggedOutput(SUMMARY, finish_unit(config.output, tally, []))

    def _read_tokenized(self, path: str, tally: UnitTally) -> Iterator[TokenizedDocument]:
        with files.open_raw(path) as source:
            columns = [DocumentColumn.ID, DocumentColumn.SENTENCES]
            for row_group, table in enumerate(iter_row_groups(source, columns)):
                ids = table.column(DocumentColumn.ID).to_pylist()
                sentences = table.column(DocumentColumn.SENTENCES).to_pylist()
                batch: list[tuple[str, list[str]]] = []
                batched = 0
                for doc_id, doc_sentences in zip(ids, sentences, strict=True):
                    batch.append((doc_id, doc_sentences))
                    batched += len(doc_sentences)
                    if batched >= TOKENIZE_BATCH_SENTENCES:
                        yield from self._tokenize(batch, path, row_group, tally)
                        batch, batched = [], 0
                yield from self._tokenize(batch, path, row_group, tally)

    def _tokenize(
        self, batch: list[tuple[str, list[str]]], path: str, row_group: int, tally: UnitTally
    ) -> Iterator[TokenizedDocument]:
        flat = [sentence for _, doc_sentences in batch for sentence in doc_sentences]
        encoded = self._vocab.tokenizer.encode_batch_fast(flat, add_special_tokens=False)
        cursor = 0
        for doc_id, doc_sentences in batch:
            pieces = [e.ids for e in encoded[cursor : cursor + len(doc_sentences)]]
            cursor += len(doc_sentences)
            tally.counts["documents"] += 1
            tally.counts["sentences"] += len(doc_sentences)
            kept = [p for p in pieces if p]
            if len(kept) < len(pieces):
                # Google's script skips these too ("if tokens:").
                tally.drop("sentence_without_tokens", len(pieces) - len(kept))
            if not kept:
                tally.reject(
                    Reject(
                        id=doc_id,
                        input=path,
                        position=f"row group {row_group}",
                        reason="document_without_tokens",
                        error=f"{doc_id}: none of its {len(pieces)} sentences has a token "
                        "after BERT normalization (control characters only?)",
                    )
                )
                continue
            if len(kept) == 1:
                tally.counts["documents_with_one_sentence"] += 1
            lengths = np.fromiter((len(p) for p in kept), dtype=np.uint32, count=len(kept))
            tokens = np.fromiter(
                chain.from_iterable(kept), dtype=np.uint32, count=int(lengths.sum())
            )
            tally.counts["tokens"] += len(tokens)
            yield TokenizedDocument(doc_id, tokens, lengths)


# --- step 2: pairs and masks per partner group --------------------------------------------


class _Others(Sequence):
    """The documents of a group but one, without copying the list per document."""

    def __init__(self, documents: list, skip: int) -> None:
        self._documents = documents
        self._skip = skip

    def __len__(self) -> int:
        return len(self._documents) - 1

    def __getitem__(self, index):  # type: ignore[override]
        return self._documents[index + (index >= self._skip)]


BUCKET_COUNTS = "bucket_counts"


class _PairAndMaskFn(beam.DoFn):
    def __init__(self, config: ExamplesConfig, layout: Layout) -> None:
        self._config = config
        self._layout = layout

    def setup(self) -> None:
        vocab = load_vocab(self._config.vocab, files.READER)
        self._cls, self._sep = vocab.cls_id, vocab.sep_id
        self._masking = {
            length: MaskingConfig(
                masked_lm_prob=self._config.masked_lm_prob,
                max_predictions=predictions,
                mask_id=vocab.mask_id,
                replaceable_ids=vocab.replaceable_ids,
                is_continuation=vocab.is_continuation if self._config.whole_word_mask else None,
            )
            for length, predictions in zip(
                self._config.max_seq_lengths, self._config.max_predictions_per_seq, strict=True
            )
        }

    def process(self, element: tuple[str, Any]) -> Iterator[Any]:
        key, paths = element
        split, pass_part, _ = key.split("/")
        dupe_pass = int(pass_part[1:])
        config, layout = self._config, self._layout
        groups: dict[int, list[TokenizedDocument]] = defaultdict(list)
        for path in sorted(paths):
            for document in unpack_documents(files.read_file(path), path):
                groups[layout.group_of(config.seed, dupe_pass, split, document.id)].append(document)
        unit = key.replace("/", "-")
        writer = SpillWriter(
            files.join(config.work_dir, "examples"), unit, config.spill_budget_mb << 20
        )
        tally = UnitTally(unit)
        bucket_counts: Counter = Counter()
        for group in sorted(groups):
            members = sorted(groups[group], key=lambda d: d.id)
            lengths = [m.sentence_lengths.tolist() for m in members]
            if len(members) == 1:
                tally.reject(
                    Reject(
                        id=members[0].id,
                        input=key,
                        position=f"pass {dupe_pass}, group {group}",
                        reason="no_partner_document",
                        error=f"{members[0].id} is alone in its {split} partner group: its "
                        "chunks that need a NotNext partner make no example in this pass "
                        "(the split has too few documents)",
                    )
                )
            for index in range(len(members)):
                for length in config.max_seq_lengths:
                    self._make_examples(
                        members, lengths, index, dupe_pass, length, split, writer, tally,
                        bucket_counts,
                    )  # fmt: skip
        yield from writer.close()
        for bucket_key, count in sorted(bucket_counts.items()):
            yield beam.pvalue.TaggedOutput(BUCKET_COUNTS, (bucket_key, count))
        yield beam.pvalue.TaggedOutput(SUMMARY, finish_unit(config.output, tally, []))

    def _make_examples(
        self,
        members: list[TokenizedDocument],
        lengths: list[list[int]],
        index: int,
        dupe_pass: int,
        length: int,
        split: str,
        writer: SpillWriter,
        tally: UnitTally,
        bucket_counts: Counter,
    ) -> None:
        """One document's examples in one pass at one length, spilled to their buckets."""
        config = self._config
        document = members[index]
        others = _Others(members, index)
        rng = document_stream(config.seed, document.id, dupe_pass, length)
        pairs = create_pairs(
            lengths[index], _Others(lengths, index), length, config.short_seq_prob, rng
        )
        inputs = [
            pair_input_ids(
                pair,
                document.tokens,
                others[pair.partner].tokens if pair.is_random_next else None,
                self._cls,
                self._sep,
            )
            for pair in pairs
        ]
        masked_inputs = mask_batch(
            [ids for ids, _ in inputs],
            [(0, a_length - 1, len(ids) - 1) for ids, a_length in inputs],
            self._masking[length],
            rng,
        )
        sort_keys = (rng.uniforms(len(pairs)) * 2**53).astype(np.int64).tolist()
        output = f"{seq_dir(length)}/{split}"
        buckets = self._layout.buckets[output]
        counts = tally.counts
        for pair, (input_ids, a_length), masked, sort_key in zip(
            pairs, inputs, masked_inputs, sort_keys, strict=True
        ):
            label = NOT_NEXT if pair.is_random_next else 0
            example = PretrainingExample(
                masked.input_ids, a_length, masked.positions, masked.labels, label,
                document.id, others[pair.partner].id if pair.is_random_next else document.id,
                dupe_pass,
            ).encode(self._layout.id_width)  # fmt: skip
            bucket_key = f"{output}/b{sort_key % buckets:05d}"
            writer.add(bucket_key, pack_example(sort_key, example))
            bucket_counts[bucket_key] += 1
            counts[f"{output}/examples"] += 1
            counts[f"{output}/not_next"] += label
            counts[f"{output}/tokens"] += len(input_ids)
            counts[f"{output}/predictions"] += len(masked.positions)


# --- step 3: global order and equal shards ------------------------------------------------

PIECES = "pieces"


def shard_bounds(total: int, shards: int) -> list[tuple[int, int]]:
    """Positions [start, end) of each shard: sizes differ by at most one."""
    return [(k * total // shards, (k + 1) * total // shards) for k in range(shards)]


def shard_count(total: int, samples_per_shard: int) -> int:
    return math.ceil(total / samples_per_shard) if total else 0


class _OrderBucketFn(beam.DoFn):
    """One shuffle bucket: sort by place, write the shards inside it, hand on edge pieces."""

    def __init__(self, config: ExamplesConfig) -> None:
        self._config = config

    def process(self, element: tuple[str, Any], counts: dict[str, int]) -> Iterator[Any]:
        key, paths = element
        output, bucket_part = key.rsplit("/", 1)
        bucket = int(bucket_part[1:])
        siblings = {
            int(k.rsplit("/", 1)[1][1:]): n for k, n in counts.items() if k.startswith(output + "/")
        }
        total = sum(siblings.values())
        start = sum(n for b, n in siblings.items() if b < bucket)
        records = [
            r for path in sorted(paths) for r in unpack_examples(files.read_file(path), path)
        ]
        records.sort()  # by place, then bytes: a total order
        end = start + len(records)
        for index, (low, high) in enumerate(
            shard_bounds(total, shard_count(total, self._config.samples_per_shard))
        ):
            first, last = max(low, start), min(high, end)
            if first >= last:
                continue
            samples = [(sample_key(p), records[p - start][1]) for p in range(first, last)]
            relative = f"{output}/{shard_name(index)}"
            if (first, last) == (low, high):
                yield asdict(write_shard(self._config.output, relative, samples))
            else:
                piece = files.join(self._config.work_dir, "pieces", relative, f"b{bucket:05d}.bin")
                files.write_file(piece, b"".join(pack_example(int(k), data) for k, data in samples))
                yield beam.pvalue.TaggedOutput(PIECES, (relative, piece))


class _JoinPiecesFn(beam.DoFn):
    """A shard that straddles buckets: its pieces in order, written as one shard."""

    def __init__(self, config: ExamplesConfig) -> None:
        self._config = config

    def process(self, element: tuple[str, Any]) -> Iterator[dict[str, Any]]:
        relative, paths = element
        samples = [
            (sample_key(position), data)
            for path in sorted(paths)
            for position, data in unpack_examples(files.read_file(path), path)
        ]
        samples.sort()
        yield asdict(write_shard(self._config.output, relative, samples))


class CreateExamples(beam.PTransform):
    """Documents files → examples in spill buckets (+ bucket counts and unit summaries)."""

    def __init__(
        self, config: ExamplesConfig, layout: Layout, units: list[tuple[str, str]]
    ) -> None:
        super().__init__()
        self._config = config
        self._layout = layout
        self._units = units

    def expand(self, pipeline):
        tokenized = (
            pipeline
            | "ListDocumentsFiles" >> beam.Create(self._units)
            | "SpreadFiles" >> beam.Reshuffle()
            | "TokenizeDocuments"
            >> beam.ParDo(_TokenizeDocumentsFn(self._config, self._layout)).with_outputs(
                SUMMARY, main="spills"
            )
        )
        paired = (
            tokenized.spills
            | "GroupPartitions" >> beam.GroupByKey()
            | "PairAndMask"
            >> beam.ParDo(_PairAndMaskFn(self._config, self._layout)).with_outputs(
                SUMMARY, BUCKET_COUNTS, main="spills"
            )
        )
        summaries = (tokenized[SUMMARY], paired[SUMMARY]) | "AllSummaries" >> beam.Flatten()
        return paired.spills, paired[BUCKET_COUNTS], summaries


class WriteShards(beam.PTransform):
    """Spilled examples → globally shuffled, equal shards; yields each ShardInfo as a dict."""

    def __init__(self, config: ExamplesConfig) -> None:
        super().__init__()
        self._config = config

    def expand(self, inputs):
        spills, bucket_counts = inputs
        counts = bucket_counts | "SumBucketCounts" >> beam.CombinePerKey(sum)
        ordered = (
            spills
            | "GroupBuckets" >> beam.GroupByKey()
            | "OrderBuckets"
            >> beam.ParDo(_OrderBucketFn(self._config), beam.pvalue.AsDict(counts)).with_outputs(
                PIECES, main="shards"
            )
        )
        joined = (
            ordered[PIECES]
            | "GroupPieces" >> beam.GroupByKey()
            | "JoinPieces" >> beam.ParDo(_JoinPiecesFn(self._config))
        )
        return (ordered.shards, joined) | "AllShards" >> beam.Flatten()


# --- manifest -----------------------------------------------------------------------------


def build_manifest(
    config: ExamplesConfig,
    layout: Layout,
    vocab: Vocabulary,
    inputs: list[DocumentsInput],
    shards: list[dict[str, Any]],
    summaries: list[dict[str, Any]],
) -> ShardsManifest:
    counts: Counter = Counter()
    dropped: Counter = Counter()
    rejected: Counter = Counter()
    rejects_files = []
    for summary in summaries:
        counts.update(summary["counts"])
        dropped.update(summary["dropped"])
        rejected.update(summary["rejected"])
        if summary["rejects_file"]:
            rejects_files.append(summary["rejects_file"])
    infos = sorted((ShardInfo(**s) for s in shards), key=lambda s: s.path)
    outputs = {}
    for length, predictions in zip(
        config.max_seq_lengths, config.max_predictions_per_seq, strict=True
    ):
        splits = {}
        for split in SPLITS:
            prefix = f"{seq_dir(length)}/{split}"
            split_shards = [s for s in infos if s.path.startswith(prefix + "/")]
            splits[split] = SplitShards(
                samples=counts.pop(f"{prefix}/examples", 0),
                not_next=counts.pop(f"{prefix}/not_next", 0),
                tokens=counts.pop(f"{prefix}/tokens", 0),
                predictions=counts.pop(f"{prefix}/predictions", 0),
                shards=split_shards,
            )
            written = sum(s.samples for s in split_shards)
            if written != splits[split].samples:
                raise RuntimeError(
                    f"{prefix}: {written} samples in shards but {splits[split].samples} made; "
                    "a step lost or repeated work"
                )
        outputs[seq_dir(length)] = SequenceOutput(length, predictions, splits)
    counts["rejected"] = sum(rejected.values())
    config_dict = asdict(config)
    del config_dict["output"]  # where the manifest is: the same run elsewhere, the same bytes
    return ShardsManifest(
        vocab={
            "path": config.vocab,
            "sha256": vocab.sha256,
            "size": vocab.size,
            "cased": vocab.cased,
        },
        inputs=[
            {
                "path": i.directory,
                "manifest_sha256": i.manifest_sha256,
                "documents": i.manifest.counts.get("documents", 0),
                "text_bytes": i.manifest.counts.get("text_bytes", 0),
            }
            for i in inputs
        ],
        config=json.loads(json.dumps(config_dict)),
        layout=json.loads(json.dumps(asdict(layout))),
        deviations=DEVIATIONS,
        counts=dict(sorted(counts.items())),
        dropped=dict(sorted(dropped.items())),
        rejected=dict(sorted(rejected.items())),
        outputs=outputs,
        rejects_files=sorted(rejects_files),
    )


def remove_work_dir(config: ExamplesConfig) -> None:
    files.delete(files.match(files.join(config.work_dir, "**")))
    if files.exists(config.work_dir):
        files.delete([config.work_dir])


def plan_units(inputs: list[DocumentsInput]) -> list[tuple[str, str]]:
    return [
        (f"d{d:03d}-f{f:05d}", files.join(i.directory, output.name))
        for d, i in enumerate(inputs)
        for f, output in enumerate(i.manifest.files)
    ]


def run(argv: list[str] | None = None) -> int:
    options = parse_stage_arguments(
        argv, (ExamplesOptions,), __doc__, required=("documents", "vocab", "output")
    )
    output = options.view_as(OutputOptions)
    try:
        config = config_from_flags(options.view_as(ExamplesOptions), output.output)
        vocab = load_vocab(config.vocab, files.READER)
        inputs = read_documents_inputs(config.documents)
        patterns = (SHARDS_MANIFEST_NAME, "seq*/*/*", f"{REJECTS_DIR}/*", f"{WORK_DIR}/**")
        files.clear_earlier_run(config.output, patterns, output.overwrite)
    except (ValueError, OSError) as error:  # ExamplesConfigError, VocabError, … are ValueErrors
        print(f"bertkit examples: {error}", file=sys.stderr)
        return 2
    return run_examples(options, config, vocab, inputs)


def run_examples(
    options: PipelineOptions,
    config: ExamplesConfig,
    vocab: Vocabulary,
    inputs: list[DocumentsInput],
) -> int:
    layout = plan_layout(config, inputs, vocab.size)
    manifest_path = files.join(config.output, SHARDS_MANIFEST_NAME)

    def write_manifest(
        _: Any, shards: list[dict[str, Any]], summaries: list[dict[str, Any]]
    ) -> str:
        manifest = build_manifest(config, layout, vocab, inputs, shards, summaries)
        files.write_file(manifest_path, manifest.to_json().encode("utf-8"))
        remove_work_dir(config)
        return manifest_path

    with make_pipeline(options) as pipeline:
        spills, bucket_counts, summaries = pipeline | "CreateExamples" >> CreateExamples(
            config, layout, plan_units(inputs)
        )
        shards = (spills, bucket_counts) | "WriteShards" >> WriteShards(config)
        (
            pipeline
            | "ManifestTrigger" >> beam.Create([None])
            | "WriteManifest"
            >> beam.Map(
                write_manifest,
                beam.pvalue.AsList(shards),
                beam.pvalue.AsList(summaries),
            )
        )
    return report(manifest_path)


def report(manifest_path: str) -> int:
    manifest = ShardsManifest.from_json(files.read_file(manifest_path).decode("utf-8"))
    for name, out in manifest.outputs.items():
        for split, shards in out.splits.items():
            ratio = shards.not_next / shards.samples if shards.samples else 0.0
            print(
                f"{name}/{split}: {shards.samples} examples in {len(shards.shards)} shards "
                f"(NotNext {ratio:.3f}, {shards.predictions / max(1, shards.samples):.1f} "
                "predictions per example)"
            )
    print(
        f"{manifest_path}: {manifest.counts.get('documents', 0)} documents, "
        f"{manifest.counts.get('tokens', 0)} tokens; dropped {manifest.dropped or {}}; "
        f"rejected {manifest.rejected or {}}"
    )
    return 0


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv)


if __name__ == "__main__":
    main()
