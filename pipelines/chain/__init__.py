"""From dumps, books and JSON lines to shards in one Beam job: `bertkit chain`.

    bertkit chain --wikipedia 'dumps/enwiki-*.xml.bz2' --books 'books/*.txt' \\
        --output out/chain --vocab-size 30522
    # = python -m pipelines.chain …; every other flag goes to Beam: two local workers,
    bertkit chain … --direct_num_workers 2 --direct_running_mode multi_processing
    # or Dataflow (infra/dataflow/, the `chain` Flex Template):
    bertkit chain --wikipedia gs://b/dumps/enwiki-*.xml.bz2 --output gs://b/chain \\
        --runner DataflowRunner --project P --region R --temp_location gs://b/tmp

The same work as the four commands run one after the other, in one job (one start-up of
the runner and its workers, not four), with the same outputs, byte for byte:

    bertkit wikipedia --input DUMP --output OUT/documents/wikipedia
    bertkit books --input BOOKS --output OUT/documents/books
    bertkit corpus --input RECORDS --output OUT/documents/corpus
    bertkit vocab --documents OUT/documents/… --output OUT/vocab
    bertkit examples --documents OUT/documents/… --vocab OUT/vocab --output OUT/shards

Each stage starts once the one before it has written its output. Every output is the one
its own command writes, each directory finished by its manifest, so `bertkit inspect`,
`bertkit train` and a later `bertkit examples` with other flags read them as they are.

Flags: --wikipedia, --books, --corpus take each stage's --input (at least one of them);
--output holds every output; --overwrite is every stage's. A documents stage's other flags
take its name (--wikipedia-split-mb, --books-format, --corpus-text-field,
--books-min-paragraph-words); the vocabulary's keep theirs (--vocab-size, --sample-mb, …)
but --seed, which is --vocab-seed; the examples' keep theirs (--seed, --max-seq-length,
--dupe-factor, --sequences, …). Each means what it means in its own command. --vocab DIR
uses a vocabulary (a `bertkit vocab` directory or a released BERT's) instead of training
one: no vocabulary step runs, and the vocabulary's flags are refused with it.

Every output directory is checked before any work, as its own command checks it: a file
the stage does not write is refused, an earlier run needs --overwrite, and nothing in any
of them is deleted before all of them pass. An input not read to its end is reported as
its own stage reports it (exit 1), and the chain goes on with everything read before it.

Read on: docs/stages/chain.md (the outputs, the flags, Dataflow).
"""

from pipelines.command.startup import lazy_exports

# How one job does what needed four: each stage's steps wait, through a side input, for the
# step before them to finish. The documents steps write their files and manifests; the
# vocabulary's CountWords starts once every manifest is written, each worker planning the
# sample from them; LearnPieces sums the counts on one worker and writes the vocabulary; the
# examples' steps start once it is written, each worker loading it and planning the layout
# from the manifests (once per worker process): pipelines/beam/planned.py.
#
# Imported on first use, so that `python -m pipelines.chain` decides how Beam is imported
# (pipelines/command/startup.py).
_EXPORTS = {"ChainConfig": "config", "main": "cli", "run": "cli"}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
