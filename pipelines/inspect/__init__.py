"""Look inside bertkit artifacts: documents, shards, a vocabulary, a training run.

PATH_OR_URL is a local path or an s3://, gs:// or http(s):// URL: a shards directory or its
manifest.json, one seqN/SPLIT/shard-NNNNNN.tar, or a documents directory or its
_manifest.json. Nothing is listed: files are found through the manifest, so a plain HTTP
server works. With no flag it prints a short summary from the manifest.

A vocabulary directory (or its vocab.json or vocab.txt) shows its size, casing, sha256,
special tokens, sample tokens and inputs; a released BERT's directory (vocab.txt or
tokenizer.json, without vocab.json) the files it holds, and its casing and what said it. A
training run's directory, its checkpoints/ directory or one step-NNNNNNNN.pt (local or
mounted; reading one needs torch, the train extra) shows the checkpoints there, `latest`
marked, and what the latest holds: model, recipe, optimizer and schedule, data position,
world size, shards and vocabulary.

    bertkit inspect out/shards                                   # what it is, counts, hashes
    bertkit inspect out/shards --stats --max-seq-length 128 --split train  # every shard read
    bertkit inspect out/shards/seq128/train/shard-000000.tar --show 3 --vocab out/vocab
    bertkit inspect s3://bucket/shards/manifest.json --json 100 > examples.jsonl
    bertkit inspect out/demo/documents/books --show 2 --schema
    bertkit inspect out/demo/shards --report out/demo/report.html     # one page of plots
    bertkit inspect out/demo/shards --parquet out/examples.parquet --limit 1000 --split train
    bertkit inspect out/demo/vocab                                # size, cased, sha256, tokens
    bertkit inspect out/demo/run                                  # checkpoints, model, position

--report writes one self-contained HTML page (plots embedded, no network) of a documents
directory, or of a shards directory with the documents directories and vocabulary its
manifest names, each plot beside the figure Google's create_pretraining_data.py gives on the
same settings. --parquet writes the examples as one Parquet file of the PretrainingExample
schema, with the tokens decoded beside the ids when a vocabulary is at hand. Neither
replaces a file bertkit did not write.

--show marks each masked position with the original token: `[MASK]→cat` (replaced by
[MASK]), `{dog→cat}` (replaced by a random token), `{cat}` (kept). Token strings come from
--vocab DIR or the vocabulary the manifest names, whose vocab.txt must have the sha256 the
manifest records; without one, ids are shown.

Shards read through a manifest are checked against it (samples, bytes, sha256) as they
stream, unless --no-verify. A damaged shard ends the command with exit code 1 and a message
naming it, after what was read before the damage has been printed.

Read on: docs/stages/inspect.md (every target, the report, the Parquet export).
"""

from pipelines.command.startup import lazy_exports

# Imported on first use, so that importing the package (for its config, say) costs nothing
# and `python -m pipelines.inspect` decides how Beam is imported (pipelines/command/startup.py).
_EXPORTS = {
    "InspectError": "targets",
    "collect_document_stats": "stats",
    "collect_shards_stats": "stats",
    "example_stats": "stats",
    "iter_documents": "reading",
    "iter_examples": "reading",
    "main": "cli",
    "open_target": "targets",
    "read_examples": "reading",
    "run": "cli",
    "shard_refs": "targets",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
