"""`bertkit examples`: documents → BERT pre-training examples in WebDataset shards.

    bertkit examples --documents out/documents/wikipedia out/documents/books \\
        --vocab out/vocab --output out/shards --max-seq-length 128,512 --dupe-factor 5

(= `python -m pipelines.examples …`; every other flag goes to Beam, e.g. `--runner
DataflowRunner --project P --region R --temp_location gs://…`, or `--direct_num_workers 4
--direct_running_mode multi_processing` locally.)

google-research/bert's `create_pretraining_data.py`, with its flag names and defaults, made
parallel and streaming, in three steps (shown on the progress line):

1. tokenize: each documents file is read row group by row group and tokenized
   once; held-out documents are chosen by a hash of their id (`--heldout-fraction`); for
   each dupe pass a document is sent to a random *partner group* (a hash of seed, pass and
   id), so NotNext partners come from the whole corpus and change every pass.
2. pair and mask: per group, each document's sentence pairs and masks are drawn from its own
   generator seeded by (seed, document id, pass, length), so the result does not depend on
   runner, worker count or order; each example gets a random place in the global shuffle.
3. write shards: examples are sorted by that place and cut into shards of equal size (±1)
   per length and split, each written under a temporary name and renamed, then its block
   table beside it (`shard-NNNNNN.tar.blocks.json`: each block's first byte and sha256);
   then `README.md`, a Hugging Face dataset card (licence, counts, the commands that made
   the data); `manifest.json`, which records each table's sha256, is written last.

`--sequences full-sentences` makes RoBERTa's FULL-SENTENCES instead of pairs: step 2 packs
each partner group's documents, in id order, into sequences filled to `--max-seq-length`
(`[CLS] text of one document [SEP] text of the next … [SEP]`, a sentence that does not fit
carried to the next sequence), with no next-sentence label.
`--vocab` takes a `bertkit vocab` directory or a released BERT's (its vocab.txt, with or
without tokenizer.json and tokenizer_config.json, as Google and transformers ship it, or
tokenizer.json without vocab.txt, as transformers 5 saves it): its
tokens are transformers' BertTokenizerFast's there, token for token, and its casing comes
from the directory, or from --cased / --no-cased where the directory does not say it:

    bertkit examples --documents out/documents/wikipedia --vocab path/to/bert-base-uncased \\
        --output out/shards-bert

`--masking none` stores no masks, for a trainer that draws them each epoch:

    bertkit examples --documents out/documents/wikipedia --vocab out/vocab \\
        --output out/shards-full --max-seq-length 128,512 \\
        --sequences full-sentences --masking none --dupe-factor 1

Documents and examples move between steps through files under `OUTPUT/_work` (deleted at
the end), not through Beam's shuffle, so every worker's memory is bounded by a flag
(`--work-partition-mb`, `--bucket-mb`, `--spill-budget-mb`) however large the corpus.

Read on: docs/stages/examples.md (flags, what a correct run produces), docs/formats.md#shards.
"""

from pipelines.command.startup import lazy_exports

# Where the steps live: the graph in transforms.py (CreateExamples, WriteShards); tokenize.py,
# pairing.py (over pipelines/bert/pairs.py and masking.py) or packing.py (over
# pipelines/bert/packing.py), shards.py; spill files through pipelines/beam/spill.py; the card
# in card.py; the layouts in schemas/shards.py.
#
# Imported on first use, so that `python -m pipelines.examples` decides how Beam is imported
# (pipelines/command/startup.py).
_EXPORTS = {
    "BucketKey": "keys",
    "CreateExamples": "transforms",
    "ExamplesConfig": "config",
    "ExamplesConfigError": "config",
    "PartitionKey": "keys",
    "WriteShards": "transforms",
    "main": "cli",
    "run": "cli",
    "run_examples": "cli",
    "shard_bounds": "shards",
    "shard_count": "shards",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
