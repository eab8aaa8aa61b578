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

Flags not listed below go to Beam's PipelineOptions (e.g. --runner DataflowRunner).
"""

from pipelines.dedup.candidates import KEEP_EARLIEST, Edge, Member, exact_edges, near_edges
from pipelines.dedup.cli import DEDUP_RUN_FILES, STAGE, main, parse_config, progress_phases, run
from pipelines.dedup.config import DedupConfig, DedupError
from pipelines.dedup.lsh import band_keys, candidate_probability, choose_bands, error_areas
from pipelines.dedup.minhash import shingles, signature, similarity
from pipelines.dedup.normalise import exact_key, normalised_words
from pipelines.dedup.transforms import DeduplicateDocuments
from pipelines.dedup.units import DedupUnit, plan_units

__all__ = [
    "DEDUP_RUN_FILES",
    "KEEP_EARLIEST",
    "STAGE",
    "DedupConfig",
    "DedupError",
    "DedupUnit",
    "DeduplicateDocuments",
    "Edge",
    "Member",
    "band_keys",
    "candidate_probability",
    "choose_bands",
    "error_areas",
    "exact_edges",
    "exact_key",
    "main",
    "near_edges",
    "normalised_words",
    "parse_config",
    "plan_units",
    "progress_phases",
    "run",
    "shingles",
    "signature",
    "similarity",
]
