"""Train a BERT WordPiece vocabulary on a sample of documents: `bertkit vocab`.

    bertkit vocab --documents out/demo/documents/wikipedia out/demo/documents/books \\
        --output out/demo/vocab --vocab-size 8000
    # = python -m pipelines.vocab …; remote directories take Beam's filesystem flags:
    bertkit vocab --documents gs://corpus/wiki gs://corpus/books --output gs://corpus/vocab

Reads one or more documents directories (written by `bertkit wikipedia` / `bertkit books`,
each finished with its `_manifest.json`) and writes to --output:
    vocab.txt        one token per line, line number = id: Google's format
    tokenizer.json   the HF `tokenizers` pipeline for that vocabulary
    vocab.json       settings, the sample trained on, the inputs' manifest sha256s, written last

Vocabulary layout: [PAD] = 0, then [unused0] … [unusedN-1] (--num-unused), [UNK], [CLS],
[SEP], [MASK], the alphabet (single characters, by code point), the continuation pieces
`##c`, then the learned pieces in the order the trainer merged them.

The text is normalised as Google's BERT does (control characters removed, CJK characters
split, lower-cased and accents stripped unless --cased), split on whitespace and punctuation
and cut into WordPiece pieces, greedy longest match first; a word with no match, or over 200
characters, is one [UNK].

The sample: each document is kept when a hash of (--seed, its id) falls under
sample-mb / total text bytes of the manifests, so the same inputs and flags give the same
sample, with at most --sample-mb MB of text. Only one Parquet row group is in memory at a
time; the sample is read twice (once to count characters, once to train).

The same inputs and flags give byte-identical vocab.txt and tokenizer.json. HF's trainer
alone does not (its ids of `##c` pieces follow Rust HashMap order, and ids break ties between
merges of equal count): bertkit fixes the alphabet and the ids of every single-character
piece before the trainer starts.

A correct run on the demo's documents (`bertkit demo`) reads 101 documents, 24,513
sentences, 3,627,333 bytes of text and keeps 340 characters (uncased).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
from tokenizers import (
    Tokenizer,
    models,
    pre_tokenizers,
    trainers,
)

from pipelines.beam import files
from pipelines.beam.documents import (
    DOCUMENTS_DIRS,
    DocumentsInput,
    DocumentsInputError,
    read_documents_input,
)
from pipelines.beam.runner import StagePaths, parse_stage
from pipelines.io.flags import option
from pipelines.io.hashing import keyed_fraction
from pipelines.io.parquet import iter_row_groups
from pipelines.io.progress import Phase, progress_printed
from pipelines.io.vocabulary import VocabError, bert_normalizer, build_tokenizer, vocab_txt_bytes
from schemas.documents import DocumentColumn
from schemas.vocab import (
    CONTINUATION_PREFIX,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    UNK_TOKEN,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    VocabMetadata,
    unused_token,
)

_LOG = logging.getLogger(__name__)
# Every name `bertkit vocab` writes, and their temporary names: nothing else may be in --output.
VOCAB_RUN_FILES = r"(?:vocab\.txt|tokenizer\.json|vocab\.json)(?:\.tmp-[0-9a-f]{32})?"
DEFAULT_VOCAB_SIZE = 30522  # BERT-base's vocabulary size
# Sentences per batch handed to the trainer: big enough to amortise the Python → Rust call,
# small enough that a batch is a few hundred kB.
TRAIN_BATCH_SENTENCES = 1000
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
    num_unused: int = option(0, help="[unusedN] slots reserved after [PAD] (Google's: 994)")
    sample_mb: float = option(1024.0, help="train on at most this many MiB of text")
    seed: int = option(0, help="picks the sample")
    limit_alphabet: int = option(1000, help="keep the N most frequent characters")
    min_frequency: int = option(2, help="merge only pairs seen at least this often")
    overwrite: bool = option(
        False, help="replace the vocabulary files of an earlier run in --output"
    )

    def validate(self) -> None:
        """Stop before any work on flags that cannot give a vocabulary."""
        if not self.documents:
            raise VocabError("no documents directory given: pass --documents DIR [DIR …]")
        if self.sample_mb <= 0:
            raise VocabError(f"--sample-mb must be positive, got {self.sample_mb}")
        if self.num_unused < 0:
            raise VocabError(f"--num-unused must be 0 or more, got {self.num_unused}")
        if self.limit_alphabet < 1:
            raise VocabError(f"--limit-alphabet must be 1 or more, got {self.limit_alphabet}")
        if self.min_frequency < 1:
            raise VocabError(f"--min-frequency must be 1 or more, got {self.min_frequency}")
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


# --- The tokenizer pipeline ----------------------------------------------------------------


# --- Documents directories and the sample --------------------------------------------------


def document_hash(seed: int, document_id: str) -> float:
    """A uniform number in [0, 1) fixed by (seed, id): the sample's coin for one document."""
    return keyed_fraction(str(seed), document_id)


@dataclass(slots=True)
class SampleStats:
    """What one pass over the sample read; identical for every pass."""

    documents: int = 0
    sentences: int = 0
    text_bytes: int = 0
    # Documents whose coin said yes but that would have taken the sample past its budget.
    over_budget: int = 0


@dataclass(slots=True)
class DocumentSample:
    """The deterministic training sample drawn from documents directories.

    Directories are read in sorted order, files in manifest order, row group by row group,
    so the sample (and the documents cut by the budget) does not depend on flag order.
    """

    inputs: list[DocumentsInput]
    sample_mb: float
    seed: int
    stats: SampleStats = field(default_factory=SampleStats)
    # Every pass's stats (`stats` is the last), and how many ran to their end: the progress
    # line reads them from its own thread while a pass runs.
    passes: list[SampleStats] = field(default_factory=list)
    finished_passes: int = 0

    @classmethod
    def open(cls, documents_dirs: Sequence[str], sample_mb: float, seed: int) -> DocumentSample:
        directories = sorted(d.rstrip("/") or d for d in documents_dirs)
        for first, second in pairwise(directories):
            if first == second:
                raise VocabError(f"--documents names {first} twice: pass each directory once")
        return cls([read_documents_input(d) for d in directories], sample_mb, seed)

    @property
    def total_text_bytes(self) -> int:
        return sum(i.text_bytes for i in self.inputs)

    @property
    def budget_bytes(self) -> int:
        return int(self.sample_mb * _MIB)

    @property
    def fraction(self) -> float:
        """The share of documents (by the hash) to keep; 1.0 reads everything."""
        return min(1.0, self.budget_bytes / max(1, self.total_text_bytes))

    def documents(self) -> Iterator[list[str]]:
        """The sentences of each sampled document; resets and fills `stats`."""
        self.stats = stats = SampleStats()
        self.passes.append(stats)
        fraction, budget = self.fraction, self.budget_bytes
        for ids, sentences in self._row_groups():
            for row, document_id in enumerate(ids):
                if fraction < 1.0 and document_hash(self.seed, document_id) >= fraction:
                    continue
                document = sentences[row].as_py()
                size = sum(len(s.encode("utf-8")) for s in document)
                # The coin gives about `budget` bytes on average; this makes it a bound.
                if stats.text_bytes + size > budget:
                    stats.over_budget += 1
                    continue
                stats.documents += 1
                stats.sentences += len(document)
                stats.text_bytes += size
                yield document
        self.finished_passes += 1

    def _row_groups(self) -> Iterator[tuple[list[str], pa.ChunkedArray]]:
        """(ids, sentences) of one Parquet row group at a time: ≤ 8 MB of text in memory."""
        columns = [DocumentColumn.ID, DocumentColumn.SENTENCES]
        for documents_input in self.inputs:
            for output in documents_input.manifest.files:
                path = files.join(documents_input.directory, output.name)
                with files.open_raw(path) as f:
                    for table in iter_row_groups(f, columns):
                        ids = table.column(DocumentColumn.ID).to_pylist()
                        yield ids, table.column(DocumentColumn.SENTENCES)

    def batches(self, batch_sentences: int = TRAIN_BATCH_SENTENCES) -> Iterator[list[str]]:
        """The sampled sentences in batches, as `Tokenizer.train_from_iterator` takes them."""
        batch: list[str] = []
        for document in self.documents():
            batch.extend(document)
            if len(batch) >= batch_sentences:
                yield batch
                batch = []
        if batch:
            yield batch

    def progress(self) -> dict[str, int]:
        """The counts of `progress_phases`: the first pass counts characters, the second
        feeds the trainer; once it has finished the trainer learns its pieces."""
        counts = {PASSES_FINISHED: max(0, self.finished_passes - 1)}
        for (read, documents), stats in zip(PASS_COUNTERS, self.passes, strict=False):
            counts[read], counts[documents] = stats.text_bytes, stats.documents
        return counts

    def describe(self) -> dict[str, Any]:
        """The sample's recipe and size, for vocab.json (after a full pass)."""
        return {
            "seed": self.seed,
            "sample_mb": self.sample_mb,
            "selection": "blake2b-64(key=str(seed), document id) / 2**64 < fraction",
            "fraction": self.fraction,
            "budget_bytes": self.budget_bytes,
            "total_text_bytes": self.total_text_bytes,
            "documents": self.stats.documents,
            "sentences": self.stats.sentences,
            "text_bytes": self.stats.text_bytes,
            "over_budget_documents": self.stats.over_budget,
        }


# The progress line's counters (`DocumentSample.progress`).
PASS_COUNTERS = (
    ("text_bytes_counted", "documents_counted"),
    ("text_bytes_trained", "documents_trained"),
)
PASSES_FINISHED = "training_passes_finished"


def progress_phases(sample: DocumentSample) -> list[Phase]:
    """Three steps: count characters (text read of the sample's expected size, the budget or
    everything), feed the trainer (of what the first pass read), learn the pieces (inside
    `tokenizers`: nothing to count, the line says only that it is there)."""
    (counted, counted_docs), (trained, trained_docs) = PASS_COUNTERS
    expected = min(sample.budget_bytes, sample.total_text_bytes)
    return [
        Phase("count characters", counted, expected, "read", True, (counted_docs, "documents")),
        Phase("train", trained, counted, "read", True, (trained_docs, "documents")),
        Phase("learn pieces", PASSES_FINISHED, None, ""),
    ]


def iter_sample_texts(
    documents_dirs: Sequence[str], sample_mb: float, seed: int = 0
) -> Iterator[list[str]]:
    """Batches of the sentences `bertkit vocab` trains on: the same sample, for benchmarks."""
    return DocumentSample.open(documents_dirs, sample_mb, seed).batches()


# --- The alphabet ---------------------------------------------------------------------------


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def count_characters(batches: Iterator[list[str]]) -> Counter[str]:
    """Raw character counts of the text (normalised afterwards, per character).

    ASCII is counted as bytes with numpy (a byte below 0x80 is always a whole character in
    UTF-8) and only the rest one by one: much faster than `Counter(text)` on English, which
    keeps this extra pass over the sample to a fraction of the training time.
    """
    ascii_counts = np.zeros(128, dtype=np.int64)
    counts: Counter[str] = Counter()
    for batch in batches:
        text = "".join(batch)
        raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        ascii_counts += np.bincount(raw, minlength=256)[:128]
        counts.update(_NON_ASCII.findall(text))
    for code, count in enumerate(ascii_counts.tolist()):
        if count:
            counts[chr(code)] = count
    return counts


def choose_alphabet(raw_counts: Counter[str], cased: bool, limit: int) -> list[str]:
    """The `limit` most frequent characters of the normalised, pre-tokenized text.

    Each distinct raw character goes through the normaliser on its own: BertNormalizer works
    character by character (lower-casing, NFD then dropping marks, CJK spacing), so this
    counts what the trainer will see. Whitespace, which the pre-tokenizer drops, is not a
    character of any word. Ties are broken by the character, never by hash order, which is
    what makes HF's own `limit_alphabet` cut unrepeatable.
    """
    normalizer, pre_tokenizer = bert_normalizer(cased), pre_tokenizers.BertPreTokenizer()
    counts: Counter[str] = Counter()
    for raw, count in raw_counts.items():
        for char in normalizer.normalize_str(raw):
            counts[char] += count
    kept = [c for c in counts if pre_tokenizer.pre_tokenize_str(c)]  # drops whitespace
    kept.sort(key=lambda c: (-counts[c], c))
    return sorted(kept[:limit])


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


# --- Training -------------------------------------------------------------------------------


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


def train_vocab(sample: DocumentSample, config: VocabConfig) -> TrainedVocab:
    """Train WordPiece on the sample; the same sample and config give the same tokens."""
    alphabet = choose_alphabet(
        count_characters(sample.batches()), config.cased, config.limit_alphabet
    )
    if not alphabet:
        raise VocabError(
            f"the sample of {', '.join(config.documents)} holds no text: check the documents "
            "directories or raise --sample-mb"
        )
    continuations = [CONTINUATION_PREFIX + c for c in continuation_alphabet(alphabet, config.cased)]
    # Every id below `fixed` is decided here, not by the trainer. HF's trainer gives `##c`
    # pieces ids in Rust HashMap order (random per process), and ids break ties between
    # merges of equal count, so without this the vocabulary changes from run to run. It also
    # adds these as *added* special tokens to the Tokenizer it trains: that Tokenizer would
    # match "##e" in raw text, so it is never saved; `build_tokenizer` makes a clean one.
    fixed = [*reserved_tokens(config.num_unused), *alphabet, *continuations]
    if config.vocab_size <= len(fixed):
        raise VocabError(
            f"--vocab-size {config.vocab_size} leaves no room for learned pieces: the special "
            f"tokens, {len(alphabet)} characters and {len(continuations)} continuation pieces "
            f"take {len(fixed)} ids; raise --vocab-size or lower --limit-alphabet"
        )
    trainer = trainers.WordPieceTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=fixed,
        # The trainer keeps exactly this alphabet: it counts every initial character as
        # seen infinitely often, and drops the rest to fit the limit.
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        continuing_subword_prefix=CONTINUATION_PREFIX,
        show_progress=False,
    )
    tokenizer = Tokenizer(models.WordPiece(unk_token=UNK_TOKEN))
    tokenizer.normalizer = bert_normalizer(config.cased)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(sample.batches(), trainer=trainer)

    vocab = tokenizer.get_vocab(with_added_tokens=False)
    tokens = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in tokens] != list(range(len(tokens))) or tokens[: len(fixed)] != fixed:
        raise RuntimeError(
            "tokenizers' trainer did not keep the fixed ids (a tokenizers version bertkit "
            "was not tested with?): pin tokenizers from constraints.txt"
        )
    stray = [t for t in tokens[len(fixed) :] if t.startswith(CONTINUATION_PREFIX) and len(t) == 3]
    if stray:
        raise RuntimeError(
            f"the trainer made continuation pieces {stray[:5]} with unfixed ids, so the "
            "vocabulary would not be repeatable: please report this with the input"
        )
    return TrainedVocab(tokens, len(alphabet), len(continuations), len(fixed))


# --- Writing --------------------------------------------------------------------------------


def write_vocab(
    sample: DocumentSample, config: VocabConfig, trained: TrainedVocab
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
            **sample.describe(),
            "alphabet": trained.alphabet,
            "continuation_pieces": trained.continuations,
            "learned_tokens": trained.learned,
        },
        inputs=[i.summary() for i in sample.inputs],
        config=json.loads(json.dumps(asdict(config))),
        vocab_sha256=hashlib.sha256(vocab_bytes).hexdigest(),
        tokenizer_sha256=hashlib.sha256(tokenizer_bytes).hexdigest(),
    )
    files.write_atomically(
        files.join(config.output, VOCAB_METADATA_FILE), metadata.to_json().encode("utf-8")
    )
    return metadata


# --- The command ----------------------------------------------------------------------------


def parse_config(argv: list[str] | None) -> VocabConfig:
    """VocabConfig's flags; any other flag must be a Beam filesystem flag (s3, GCS)."""
    paths = StagePaths(input_dirs=(DOCUMENTS_DIRS,))
    config, _ = parse_stage(VocabConfig, argv, "bertkit vocab", __doc__, paths)
    config.validate()
    return config


def run(argv: list[str] | None = None) -> int:
    """Train and write the vocabulary; return the exit code. Raises VocabError on bad input."""
    config = parse_config(argv)
    sample = DocumentSample.open(config.documents, config.sample_mb, config.seed)
    files.clear_earlier_run(config.output, VOCAB_RUN_FILES, config.overwrite, "vocab", remove=False)
    with progress_printed("vocab", progress_phases(sample), sample.progress):
        trained = train_vocab(sample, config)
    metadata = write_vocab(sample, config, trained)
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
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        code = run(argv)
    except (VocabError, DocumentsInputError, files.OutputDirectoryError) as err:
        print(f"bertkit vocab: error: {err}", file=sys.stderr)
        code = 2
    sys.exit(code)


if __name__ == "__main__":
    main()
