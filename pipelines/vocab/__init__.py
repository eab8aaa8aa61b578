"""Train a BERT WordPiece vocabulary on a sample of documents: `bertkit vocab`.

    bertkit vocab --documents out/demo/documents/wikipedia out/demo/documents/books \\
        --output out/demo/vocab --vocab-size 8000
    # = python -m pipelines.vocab …; every other flag goes to Beam: two local workers,
    bertkit vocab … --direct_num_workers 2 --direct_running_mode multi_processing
    # or Dataflow (infra/dataflow/):
    bertkit vocab --documents gs://corpus/wiki gs://corpus/books --output gs://corpus/vocab \\
        --runner DataflowRunner --project P --region R --temp_location gs://corpus/tmp

Reads one or more documents directories (written by `bertkit wikipedia` / `bertkit books`,
each finished with its `_manifest.json`) and writes to --output:
    vocab.txt        one token per line, line number = id: Google's format
    tokenizer.json   the HF `tokenizers` pipeline for that vocabulary
    vocab.json       settings, the sample trained on, the inputs' manifest sha256s, written last

A Beam pipeline in two steps:
1. CountWords, one unit per documents file, spread over every worker: the file's sampled
   documents are normalised and split into words as BERT does, and the unit's word counts
   go to `OUTPUT/_work/words/<unit>.parquet` (schemas/vocab.py: WORD_COUNTS_SCHEMA).
2. LearnPieces, on one worker: the counts are summed and WordPiece pieces learned from
   them (pipelines/text/wordpiece.py: HF's merge step, on word counts), then the three
   files are written and `_work` deleted. Its time grows with the number of distinct words,
   not with the sample: reading and splitting the text, ~95 % of the work when one process
   did it all, is spread.

Vocabulary layout: [PAD] = 0, then [unused0] … [unusedN-1] (--num-unused), [UNK], [CLS],
[SEP], [MASK], the alphabet (single characters, by code point), the continuation pieces
`##c`, then the learned pieces in the order they were merged.

The text is normalised as Google's BERT does (control characters removed, CJK characters
split, lower-cased and accents stripped unless --cased), split on whitespace and punctuation
and cut into WordPiece pieces, greedy longest match first; a word with no match, or over 200
characters, is one [UNK].

The sample: each document is kept when a hash of (--seed, its id) falls under
sample-mb / total text bytes of the manifests, so the same inputs and flags give the same
sample, of about --sample-mb MiB of text (every document when the inputs hold less).

The same inputs and flags give byte-identical vocab.txt and tokenizer.json, whatever the
runner or the number of workers. HF's trainer alone does not (its ids of `##c` pieces follow
Rust HashMap order, and ids break ties between merges of equal count): bertkit fixes the
alphabet and the ids of every single-character piece before learning, and learns from
words in sorted order. On the same sample the vocabulary equals HF's trainer's, token for
token (tests/test_wordpiece.py).

A correct run on the demo's documents (`bertkit demo`) reads 101 documents, 24,513
sentences, 3,627,333 bytes of text and keeps 340 characters (uncased).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions
from tokenizers import pre_tokenizers

from pipelines.beam import files
from pipelines.beam.documents import (
    DOCUMENTS_DIRS,
    DocumentsInput,
    DocumentsInputError,
    documents_units,
    read_documents_input,
)
from pipelines.beam.progress import (
    DOCUMENTS_COUNTED,
    PIECES_LEARNED,
    TEXT_BYTES_COUNTED,
    StageCounters,
    progress_shown,
)
from pipelines.beam.runner import (
    StagePaths,
    make_pipeline,
    parse_stage,
    report_submission,
    stage_main,
    submitted_only,
)
from pipelines.command.flags import AT_LEAST_1, POSITIVE, ZERO_OR_MORE, config_problem, option
from pipelines.command.progress import Phase
from pipelines.io.hashing import keyed_fraction
from pipelines.io.parquet import iter_row_groups
from pipelines.io.vocabulary import VocabError, bert_normalizer, build_tokenizer, vocab_txt_bytes
from pipelines.text.wordpiece import WordCounter, choose_alphabet, learn_pieces
from schemas.checks import MAX_RECORD_BYTES
from schemas.documents import DocumentColumn
from schemas.vocab import (
    CONTINUATION_PREFIX,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    WORD_COUNTS_DIR,
    WORD_COUNTS_SCHEMA,
    VocabMetadata,
    WordCountColumn,
    unused_token,
)

_LOG = logging.getLogger(__name__)
# Every name `bertkit vocab` writes, and their temporary names: nothing else may be in --output.
VOCAB_RUN_FILES = (
    r"(?:vocab\.txt|tokenizer\.json|vocab\.json)(?:\.tmp-[0-9a-f]{32})?"
    rf"|{WORD_COUNTS_DIR}/d[0-9]{{3}}-f[0-9]{{5}}\.parquet(?:\.tmp-[0-9a-f]{{32}})?"
)
DEFAULT_VOCAB_SIZE = 30522  # BERT-base's vocabulary size
# Sentences handed to the word counter at once: a few hundred kB of text.
COUNT_BATCH_SENTENCES = 1000
_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class VocabConfig:
    """Every flag of `bertkit vocab` (recorded in vocab.json)."""

    documents: tuple[str, ...] = option(
        help="documents directories (local, gs://, s3://), each with its manifest", metavar="DIR"
    )
    output: str = option(help="vocabulary directory to write")
    vocab_size: int = option(DEFAULT_VOCAB_SIZE, help="tokens in vocab.txt, all included")
    cased: bool = option(
        False, help="keep case and accents (default: lower-case and strip accents)"
    )
    num_unused: int = option(
        0, help="[unusedN] slots reserved after [PAD] (Google's: 994)", bounds=ZERO_OR_MORE
    )
    sample_mb: float = option(1024.0, help="train on about this many MiB of text", bounds=POSITIVE)
    seed: int = option(0, help="picks the sample")
    limit_alphabet: int = option(
        1000, help="keep the N most frequent characters", bounds=AT_LEAST_1
    )
    min_frequency: int = option(
        2, help="merge only pairs seen at least this often", bounds=AT_LEAST_1
    )
    overwrite: bool = option(
        False, help="replace the vocabulary files of an earlier run in --output"
    )

    def validate(self) -> None:
        """Stop before any work on flags that cannot give a vocabulary."""
        if not self.documents:
            raise VocabError("no documents directory given: pass --documents DIR [DIR …]")
        problem = config_problem(self)  # each field's bounds, as parsing checks them
        if problem:
            raise VocabError(problem)
        reserved = len(SPECIAL_TOKENS) + self.num_unused
        if self.vocab_size <= reserved:
            raise VocabError(
                f"--vocab-size {self.vocab_size} leaves no room after the {reserved} special "
                "and unused tokens: raise --vocab-size or lower --num-unused"
            )


def reserved_tokens(num_unused: int) -> list[str]:
    """The vocabulary's first ids: [PAD], the unused slots, [UNK], [CLS], [SEP], [MASK]."""
    # Google's vocabularies put [unused0..98] right after [PAD] and the rest after [MASK];
    # keeping every unused slot in one run after [PAD] keeps the ids of the four others
    # predictable (num_unused + 1 …).
    return [PAD_TOKEN, *(unused_token(i) for i in range(num_unused)), *SPECIAL_TOKENS[1:]]


# --- The sample -----------------------------------------------------------------------------


def document_hash(seed: int, document_id: str) -> float:
    """A uniform number in [0, 1) fixed by (seed, id): the sample's coin for one document."""
    return keyed_fraction(str(seed), document_id)


@dataclass(frozen=True, slots=True)
class SamplePlan:
    """Which documents the vocabulary is trained on, fixed by the manifests and the flags
    before any work: every worker decides each document the same way."""

    inputs: tuple[DocumentsInput, ...]
    sample_mb: float
    seed: int

    @classmethod
    def open(cls, documents_dirs: Sequence[str], sample_mb: float, seed: int) -> SamplePlan:
        """Each directory's manifest, checked; sorted, so flag order does not matter."""
        directories = sorted(d.rstrip("/") or d for d in documents_dirs)
        for first, second in pairwise(directories):
            if first == second:
                raise VocabError(f"--documents names {first} twice: pass each directory once")
        return cls(tuple(read_documents_input(d) for d in directories), sample_mb, seed)

    @property
    def total_text_bytes(self) -> int:
        return sum(i.text_bytes for i in self.inputs)

    @property
    def budget_bytes(self) -> int:
        return int(self.sample_mb * _MIB)

    @property
    def expected_bytes(self) -> int:
        return min(self.budget_bytes, self.total_text_bytes)

    @property
    def fraction(self) -> float:
        """The share of documents (by the hash) to keep; 1.0 reads everything."""
        return min(1.0, self.budget_bytes / max(1, self.total_text_bytes))

    def keeps(self, document_id: str) -> bool:
        fraction = self.fraction
        return fraction >= 1.0 or document_hash(self.seed, document_id) < fraction

    def units(self) -> list[tuple[str, str]]:
        return documents_units(list(self.inputs))

    def documents(self, path: str) -> Iterator[list[str]]:
        """The sentences of each sampled document of one documents file, in file order.
        Only one Parquet row group (≤ 8 MB of text) is in memory at a time."""
        columns = [DocumentColumn.ID, DocumentColumn.SENTENCES]
        with files.open_raw(path) as f:
            for table in iter_row_groups(f, columns):
                ids = table.column(DocumentColumn.ID).to_pylist()
                sentences = table.column(DocumentColumn.SENTENCES)
                for row, document_id in enumerate(ids):
                    if self.keeps(document_id):
                        yield sentences[row].as_py()

    def describe(self, counted: SampleCounts) -> dict[str, Any]:
        """The sample's recipe and size, for vocab.json."""
        return {
            "seed": self.seed,
            "sample_mb": self.sample_mb,
            "selection": "blake2b-64(key=str(seed), document id) / 2**64 < fraction",
            "fraction": self.fraction,
            "budget_bytes": self.budget_bytes,
            "total_text_bytes": self.total_text_bytes,
            **asdict(counted),
        }


@dataclass(slots=True)
class SampleCounts:
    """What counting read: one unit's, or (summed) the whole sample's."""

    documents: int = 0
    sentences: int = 0
    text_bytes: int = 0
    distinct_words: int = 0  # in the unit; summed over units, in the whole sample

    def add(self, other: SampleCounts) -> None:
        self.documents += other.documents
        self.sentences += other.sentences
        self.text_bytes += other.text_bytes


def iter_sample_texts(
    documents_dirs: Sequence[str], sample_mb: float, seed: int = 0
) -> Iterator[list[str]]:
    """Batches of the sampled sentences, file by file: the text `bertkit vocab` counts
    words in, for benchmarks that hand the same sample to HF's trainer."""
    plan = SamplePlan.open(documents_dirs, sample_mb, seed)
    batch: list[str] = []
    for _, path in plan.units():
        for document in plan.documents(path):
            batch.extend(document)
            if len(batch) >= COUNT_BATCH_SENTENCES:
                yield batch
                batch = []
    if batch:
        yield batch


# --- Step 1: count words, one unit per documents file ------------------------------------


def word_counts_path(output: str, unit: str) -> str:
    return files.join(output, WORD_COUNTS_DIR, f"{unit}.parquet")


def count_unit(plan: SamplePlan, config: VocabConfig, unit: str, path: str,
               counters: StageCounters | None = None) -> dict[str, Any]:  # fmt: skip
    """Count the words of one documents file's sampled documents into its spill file
    (written atomically: a retried bundle replaces it whole); return the unit's counts."""
    counter, counted = WordCounter(config.cased), SampleCounts()
    batch: list[str] = []
    for document in plan.documents(path):
        size = sum(len(s.encode("utf-8")) for s in document)
        counted.add(SampleCounts(1, len(document), size))
        batch.extend(document)
        if len(batch) >= COUNT_BATCH_SENTENCES:
            counter.add(batch)
            batch = []
        if counters is not None:
            counters.add(DOCUMENTS_COUNTED)
            counters.add(TEXT_BYTES_COUNTED, size)
    counter.add(batch)
    words = sorted(counter.counts)
    counted.distinct_words = len(words)
    table = pa.table(
        {
            WordCountColumn.WORD: pa.array(words, pa.string()),
            WordCountColumn.COUNT: pa.array([counter.counts[w] for w in words], pa.int64()),
        },
        schema=WORD_COUNTS_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    files.write_atomically(word_counts_path(config.output, unit), sink.getvalue().to_pybytes())
    if counters is not None:
        counters.flush()
    return {"unit": unit, **asdict(counted)}


class CountWordsFn(beam.DoFn):
    """(unit name, documents file) → the unit's counts, its words in a spill file."""

    def __init__(self, plan: SamplePlan, config: VocabConfig) -> None:
        self._plan = plan
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters((DOCUMENTS_COUNTED, TEXT_BYTES_COUNTED))

    def process(self, unit: tuple[str, str]) -> Iterator[dict[str, Any]]:
        yield count_unit(self._plan, self._config, *unit, counters=self._counters)


def read_word_counts(path: str, data: bytes) -> tuple[list[str], list[int]]:
    """One spill file's words and counts, checked against WORD_COUNTS_SCHEMA."""
    table = pq.read_table(pa.BufferReader(data))
    if not table.schema.equals(WORD_COUNTS_SCHEMA, check_metadata=False):
        raise VocabError(f"{path}: not a word-count file of this bertkit version ({table.schema})")
    return (
        table.column(WordCountColumn.WORD).to_pylist(),
        table.column(WordCountColumn.COUNT).to_pylist(),
    )


# Spill files fetched at once while summing: on object storage each read is a round trip.
READ_THREADS = 16


def sum_word_counts(output: str, summaries: Sequence[dict[str, Any]]) -> Counter[str]:
    """Every unit's word counts added up, units in name order (files fetched by threads)."""
    paths = [
        word_counts_path(output, s["unit"]) for s in sorted(summaries, key=lambda s: s["unit"])
    ]
    total: Counter[str] = Counter()
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for path, data in zip(paths, pool.map(files.read_file, paths), strict=True):
            words, counts = read_word_counts(path, data)
            for word, count in zip(words, counts, strict=True):
                total[word] += count
    return total


# --- Step 2: learn the pieces and write the vocabulary ------------------------------------


def continuation_alphabet(alphabet: Sequence[str], cased: bool) -> list[str]:
    """The characters that can follow another inside a word, sorted.

    Punctuation and CJK characters are always words of their own (the pre-tokenizer and the
    normaliser split them off whatever surrounds them), so they never need a `##c` piece.
    """
    normalizer, pre_tokenizer = bert_normalizer(cased), pre_tokenizers.BertPreTokenizer()
    return [
        c
        for c in alphabet
        if len(pre_tokenizer.pre_tokenize_str(normalizer.normalize_str("a" + c))) == 1
    ]


@dataclass(frozen=True, slots=True)
class TrainedVocab:
    """The trainer's result: tokens in id order, and how many ids were fixed before it ran."""

    tokens: list[str]
    alphabet: int  # single characters
    continuations: int  # `##c` pieces
    fixed: int  # special and unused tokens, alphabet, continuations: ids 0 … fixed-1

    @property
    def learned(self) -> int:
        return len(self.tokens) - self.fixed


def learn_vocab(
    word_counts: Counter[str], config: VocabConfig, counters: StageCounters | None = None
) -> TrainedVocab:
    """The vocabulary of the summed word counts; the same counts and config give the same
    tokens."""
    alphabet = choose_alphabet(word_counts, config.limit_alphabet)
    if not alphabet:
        raise VocabError(
            f"the sample of {', '.join(config.documents)} holds no text: check the documents "
            "directories or raise --sample-mb"
        )
    continuations = [CONTINUATION_PREFIX + c for c in continuation_alphabet(alphabet, config.cased)]
    # Every id below `fixed` is decided here, not by the order pieces are met in.
    fixed = [*reserved_tokens(config.num_unused), *alphabet, *continuations]
    if config.vocab_size <= len(fixed):
        raise VocabError(
            f"--vocab-size {config.vocab_size} leaves no room for learned pieces: the special "
            f"tokens, {len(alphabet)} characters and {len(continuations)} continuation pieces "
            f"take {len(fixed)} ids; raise --vocab-size or lower --limit-alphabet"
        )

    reported = 0

    def learned(size: int) -> None:
        nonlocal reported
        if counters is not None:
            counters.add(PIECES_LEARNED, size - reported)
            reported = size

    tokens = learn_pieces(
        word_counts, fixed, config.vocab_size, config.min_frequency, CONTINUATION_PREFIX,
        progress=learned,
    )  # fmt: skip
    stray = [t for t in tokens[len(fixed) :] if t.startswith(CONTINUATION_PREFIX) and len(t) == 3]
    if stray:
        raise RuntimeError(
            f"continuation pieces {stray[:5]} were made after the fixed ids (a character the "
            "continuation alphabet missed): please report this with the input"
        )
    return TrainedVocab(tokens, len(alphabet), len(continuations), len(fixed))


class LearnPiecesFn(beam.DoFn):
    """Every unit's summary → the vocabulary files, written on one worker; `_work` deleted."""

    def __init__(self, plan: SamplePlan, config: VocabConfig) -> None:
        self._plan = plan
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters((PIECES_LEARNED,))

    def process(self, _: Any, summaries: list[dict[str, Any]]) -> Iterator[str]:
        config = self._config
        counted = SampleCounts()
        for summary in summaries:
            counted.add(SampleCounts(**summary_counts(summary)))
        word_counts = sum_word_counts(config.output, summaries)
        counted.distinct_words = len(word_counts)
        try:
            trained = learn_vocab(word_counts, config, self._counters)
        except VocabError:
            # A refusal of the flags or the sample: a retry would refuse again, so the word
            # counts go (any other failure keeps them for the runner's retry of this step).
            remove_work_dir(config.output)
            raise
        if self._counters is not None:
            self._counters.flush()
        write_vocab(self._plan, counted, config, trained)
        remove_work_dir(config.output)
        yield files.join(config.output, VOCAB_METADATA_FILE)


def summary_counts(summary: dict[str, Any]) -> dict[str, int]:
    return {k: summary[k] for k in ("documents", "sentences", "text_bytes")}


def remove_work_dir(output: str) -> None:
    """Delete the word-count spill files (and `_work` itself, on a local disk)."""
    work = files.join(output, WORD_COUNTS_DIR.split("/")[0])
    files.delete(files.match(files.join(work, "**")))
    if files.exists(work):
        files.delete([work])


# --- Writing --------------------------------------------------------------------------------


def write_vocab(
    plan: SamplePlan, counted: SampleCounts, config: VocabConfig, trained: TrainedVocab
) -> VocabMetadata:
    """Write vocab.txt, tokenizer.json and, last, vocab.json; return the metadata."""
    tokens = trained.tokens
    vocab_bytes = vocab_txt_bytes(tokens)
    tokenizer_bytes = build_tokenizer(tokens, config.cased).to_str(pretty=True).encode("utf-8")
    # An earlier run's vocab.json goes first: a run that dies half-way then leaves a
    # directory that `load_vocab` refuses, never a new vocab.txt under old metadata.
    files.delete(files.match(files.join(config.output, VOCAB_METADATA_FILE)))
    files.write_atomically(files.join(config.output, VOCAB_FILE), vocab_bytes)
    files.write_atomically(files.join(config.output, TOKENIZER_FILE), tokenizer_bytes)
    metadata = VocabMetadata(
        vocab_size=len(tokens),
        cased=config.cased,
        num_unused=config.num_unused,
        special_tokens={t: tokens.index(t) for t in SPECIAL_TOKENS},
        sample={
            **plan.describe(counted),
            "alphabet": trained.alphabet,
            "continuation_pieces": trained.continuations,
            "learned_tokens": trained.learned,
        },
        inputs=[i.summary() for i in plan.inputs],
        config=json.loads(json.dumps(asdict(config))),
        vocab_sha256=hashlib.sha256(vocab_bytes).hexdigest(),
        tokenizer_sha256=hashlib.sha256(tokenizer_bytes).hexdigest(),
    )
    files.write_atomically(
        files.join(config.output, VOCAB_METADATA_FILE), metadata.to_json().encode("utf-8")
    )
    return metadata


# --- The command ----------------------------------------------------------------------------

_PATHS = StagePaths(input_dirs=(DOCUMENTS_DIRS,))


def parse_config(argv: list[str] | None) -> tuple[VocabConfig, PipelineOptions]:
    """VocabConfig's flags; every other flag goes to Beam (runner, workers, s3, GCS)."""
    config, options = parse_stage(VocabConfig, argv, "bertkit vocab", __doc__, _PATHS)
    config.validate()
    return config, options


def progress_phases(plan: SamplePlan, config: VocabConfig) -> list[Phase]:
    """Two steps: count words (sampled text read, of the sample's expected size), then
    learn pieces (tokens in the vocabulary, of --vocab-size)."""
    return [
        Phase(
            "count words", TEXT_BYTES_COUNTED, plan.expected_bytes, "read", True,
            rate=(DOCUMENTS_COUNTED, "documents"),
        ),
        Phase("learn pieces", PIECES_LEARNED, config.vocab_size, "tokens"),
    ]  # fmt: skip


def run(argv: list[str] | None = None) -> int:
    """Train and write the vocabulary; return the exit code. Raises VocabError on bad input."""
    config, options = parse_config(argv)
    plan = SamplePlan.open(config.documents, config.sample_mb, config.seed)
    files.clear_earlier_run(config.output, VOCAB_RUN_FILES, config.overwrite, "vocab", remove=False)
    remove_work_dir(config.output)  # a killed run's word counts: never read again
    metadata_path = files.join(config.output, VOCAB_METADATA_FILE)
    with (
        progress_shown(options, "vocab", progress_phases(plan, config)),
        make_pipeline(options) as pipeline,
    ):
        summaries = (
            pipeline
            | "ListDocumentsFiles" >> beam.Create(plan.units())
            | "SpreadFiles" >> beam.Reshuffle()
            | "CountWords" >> beam.ParDo(CountWordsFn(plan, config))
        )
        (
            pipeline
            | "LearnTrigger" >> beam.Create([None])
            | "LearnPieces"
            >> beam.ParDo(LearnPiecesFn(plan, config), beam.pvalue.AsList(summaries))
        )
    if submitted_only(options):
        return report_submission(pipeline, options, metadata_path, "bertkit vocab")
    return report(config)


def report(config: VocabConfig) -> int:
    """The finished vocabulary in one line (from vocab.json, as the job wrote it)."""
    metadata = VocabMetadata.from_json(
        files.read_file(files.join(config.output, VOCAB_METADATA_FILE), MAX_RECORD_BYTES).decode()
    )
    if metadata.vocab_size < config.vocab_size:
        _LOG.warning(
            "the sample ran out of pairs seen --min-frequency %d times: %d tokens, not %d",
            config.min_frequency, metadata.vocab_size, config.vocab_size,
        )  # fmt: skip
    drawn = metadata.sample
    print(
        f"{config.output}: {metadata.vocab_size} tokens ({drawn['alphabet']} characters, "
        f"{drawn['learned_tokens']} learned) from {drawn['documents']} documents, "
        f"{drawn['sentences']} sentences, {drawn['text_bytes']} bytes of text "
        f"(of {drawn['total_text_bytes']}); vocab.txt sha256 {metadata.vocab_sha256[:16]}…"
    )
    return 0


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit vocab", (VocabError, DocumentsInputError))


if __name__ == "__main__":
    main()
