"""Train a BERT WordPiece vocabulary on a sample of documents: `bertkit vocab`.

    bertkit vocab --documents out/demo/documents/wikipedia out/demo/documents/books \\
        --output out/demo/vocab --vocab-size 8000
    # = python -m pipelines.vocab …; every other flag goes to Beam: two local workers,
    bertkit vocab … --direct_num_workers 2 --direct_running_mode multi_processing
    # or Dataflow (infra/dataflow/):
    bertkit vocab --documents gs://corpus/wiki gs://corpus/books --output gs://corpus/vocab \\
        --runner DataflowRunner --project P --region R --temp_location gs://corpus/tmp

Reads one or more documents directories (written by `bertkit wikipedia`, `books`, `corpus`
or `dedup`, each finished with its `_manifest.json`) and writes to --output:
    vocab.txt        one token per line, line number = id: Google's format
    tokenizer.json   the HF `tokenizers` pipeline for that vocabulary
    vocab.json       settings, the sample trained on, the inputs' manifest sha256s, written last

Two steps, shown on the progress line:
1. count words, spread over every worker, one documents file at a time: the sampled
   documents are normalised and split into words as BERT does, and the counts go to
   `OUTPUT/_work/` (deleted at the end);
2. learn pieces, on one worker: the counts are summed and WordPiece pieces learned from
   them with HF's merge rule, then the three files are written. Its time grows with the
   number of distinct words, not with the size of the sample.

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
runner or the number of workers (HF's trainer alone orders some ids differently from run
to run), and the same tokens as HF's trainer learns from the same sample.

A correct run on the demo's documents (`bertkit demo`) reads 101 documents, 24,233
sentences, 3,580,477 bytes of text and keeps 343 characters (uncased).

Read on: docs/stages/vocab.md (flags, what a correct run produces), docs/formats.md#vocabulary.
Flags not listed below go to Beam's PipelineOptions (e.g. --runner DataflowRunner).
"""

from pipelines.command.startup import lazy_exports

# Steps: CountWords (counting.py) writes each unit's counts to `OUTPUT/_work/words/<unit>.parquet`
# (schemas/vocab.py: WORD_COUNTS_SCHEMA); LearnPieces (learning.py, over
# pipelines/text/wordpiece.py) sums them. HF's trainer alone is not byte-stable (its ids of
# `##c` pieces follow Rust HashMap order, and ids break ties between merges of equal count):
# bertkit fixes the alphabet and the ids of every single-character piece before learning, and
# learns from words in sorted order; tests/test_wordpiece.py checks the tokens equal HF's.
#
# Imported on first use, so that importing the package (for its config, say) costs nothing
# and `python -m pipelines.vocab` decides how Beam is imported (pipelines/command/startup.py).
_EXPORTS = {
    "COUNT_BATCH_SENTENCES": "sample",
    "DEFAULT_VOCAB_SIZE": "config",
    "READ_THREADS": "counting",
    "SampleCounts": "sample",
    "SamplePlan": "sample",
    "TrainedVocab": "learning",
    "VOCAB_RUN_FILES": "cli",
    "VocabConfig": "config",
    "continuation_alphabet": "learning",
    "count_unit": "counting",
    "document_hash": "sample",
    "iter_sample_texts": "sample",
    "learn_vocab": "learning",
    "main": "cli",
    "parse_config": "cli",
    "progress_phases": "cli",
    "read_word_counts": "counting",
    "remove_work_dir": "counting",
    "report": "cli",
    "reserved_tokens": "learning",
    "run": "cli",
    "sum_word_counts": "counting",
    "word_counts_path": "counting",
    "write_vocab": "writing",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
