"""Remove exact and near-duplicate documents: `bertkit dedup`.

    bertkit dedup --documents out/books out/wiki --output out/dedup
    bertkit vocab --documents out/dedup --output out/vocab     # reads it as any documents
    # = python -m pipelines.dedup …; every other flag goes to Beam: two local workers,
    bertkit dedup … --direct_num_workers 2 --direct_running_mode multi_processing

Reads one or more documents directories (written by `bertkit wikipedia`, `books` or
`corpus`, each finished with its `_manifest.json`) and writes one documents directory,
the same schema and manifest, without the documents that duplicate an earlier one:
    documents-<dir>-<file>-<part>.parquet   the kept documents, in their input order
    _duplicates/duplicates-<dir>-<file>.parquet
                                            one row per removed document: the one it
                                            duplicates, exact or near, and the similarity
    _manifest.json                          written last; dropped = {exact_duplicate: n,
                                            near_duplicate: m}; inputs with their sha256
    _work/                                  spill files of keys and edges during the run
                                            (memory does not grow with the documents);
                                            deleted before the manifest is written

Which copy survives: "earlier" is the order of --documents, then of the files in each
manifest, then of the rows; the earliest copy is kept, whatever the runner or the number of
workers. A document is removed when an earlier document is
- an exact duplicate: the same words after normalisation (NFKC, case-folded, punctuation
  dropped, whitespace collapsed), or
- a near duplicate: MinHash (rensa, --num-perm values, --seed) over word --ngram shingles
  finds them in the same LSH band (bands × rows chosen for --threshold) and the
  signatures' estimated Jaccard similarity is at least --threshold.
The earlier document need not survive itself: with A before B before C, A like B, B like
C and A unlike C, both B and C go. When A and B are unlike each other but both like a later
C, only C goes.

Word 5-grams by default: a changed word alters at most 5 shingles, so a copy with 1 % of its
words changed keeps a similarity near 0.9, while unrelated texts share few 5-word runs.

Read on: docs/stages/dedup.md (flags, what a correct run produces).
Flags not listed below go to Beam's PipelineOptions (e.g. --runner DataflowRunner).
"""

from pipelines.command.startup import lazy_exports

# Imported on first use, so that importing the package (for its config, say) costs nothing
# and `python -m pipelines.dedup` decides how Beam is imported (pipelines/command/startup.py).
_EXPORTS = {
    "DEDUP_RUN_FILES": "cli",
    "DedupConfig": "config",
    "DedupError": "config",
    "DedupUnit": "units",
    "DeduplicateDocuments": "transforms",
    "Edge": "candidates",
    "KEEP_EARLIEST": "candidates",
    "Member": "candidates",
    "STAGE": "cli",
    "band_keys": "lsh",
    "candidate_probability": "lsh",
    "choose_bands": "lsh",
    "error_areas": "lsh",
    "exact_edges": "candidates",
    "exact_key": "normalise",
    "main": "cli",
    "near_edges": "candidates",
    "normalised_words": "normalise",
    "parse_config": "cli",
    "plan_units": "units",
    "progress_phases": "cli",
    "run": "cli",
    "shingles": "minhash",
    "signature": "minhash",
    "similarity": "minhash",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
