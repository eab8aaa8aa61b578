"""Extract sentence-split documents from a corpus of JSON lines or Parquet records.

For a corpus you bring: what `datasets` `to_parquet`/`to_json` write, what datatrove and
Dolma write (`.jsonl.gz`, `.jsonl.zst` with `id` and `text`), a database export. Inputs:
`.jsonl`, `.json`, `.ndjson` (JSON lines, one object a line; plain, `.gz`, `.bz2` or `.zst`,
any number of members or frames) and `.parquet`, local, gs:// or s3://, globs allowed.
Everything streams: memory stays flat whatever the file's size.

A record's text (`--text-field`, default `text`; `meta.body` reaches into nested objects) is
cut into paragraphs at blank lines (single newlines are spaces), paragraphs with fewer than
`--min-paragraph-words` words dropped, and each split into sentences as every stage splits
them (control characters removed). Ids are `<source>/<id>`: `--source` (default `corpus`)
and the record's `--id-field` (a string, or an integer in decimal: a float that holds a
whole number too, as pandas writes one), or, when the record has none, `<file>:<line>` for
JSON lines (lines from 1) and `<file>:<row>` for Parquet (rows from 0), the file named by
its path under the inputs' common folder. Ids are not checked for uniqueness. `--license`
(SPDX) and `--language` (BCP-47) are recorded in the manifest's config.

A bad record is rejected with its file and line or row, and the rest kept: not_json,
not_an_object, invalid_utf8, lone_surrogate, line_too_long / text_too_long (over
`--max-line-kb`, never held in memory), text_missing, text_not_string, id_not_string_or_int,
id_empty, id_too_long (over 4 KiB), title_not_string, title_too_long (over 64 KiB). A
Parquet row group holding a page over 8 times `--max-line-kb` (at least 64 MiB), which
pyarrow would decompress whole, is one reject of its rows (page_too_large). A record with
no paragraph left is dropped (no_text), counted.

Writes DIR/documents-*.parquet (Document schema), DIR/_rejects/ and, last, DIR/_manifest.json.
Exits 1 if any input could not be read to its end (a truncated .zst, a corrupt Parquet page,
a Parquet file without the text column, a JSON array, a UTF-32 file); what was read before
the fault is kept, and a Parquet file's other row groups are read.

    bertkit corpus --input 'fineweb/*.jsonl.zst' --output out/fineweb --source fineweb
    bertkit corpus --input 'export/*.parquet' --output out/export --id-field doc_id \\
        --title-field meta.title --license CC-BY-4.0 --language en

Read on: docs/stages/corpus.md (flags, what a correct run produces).
Flags not listed below go to Beam's PipelineOptions (e.g. --runner DataflowRunner).
"""

from pipelines.command.startup import lazy_exports

# Imported on first use, so that importing the package (for its config, say) costs nothing
# and `python -m pipelines.corpus` decides how Beam is imported (pipelines/command/startup.py).
_EXPORTS = {
    "COUNTERS": "transforms",
    "CorpusConfig": "config",
    "CorpusInputError": "reading",
    "ExtractCorpus": "transforms",
    "INPUT_SUFFIXES": "reading",
    "RecordFields": "reading",
    "STAGE": "cli",
    "field_value": "reading",
    "input_kind": "reading",
    "jsonl_documents": "reading",
    "main": "cli",
    "parquet_documents": "reading",
    "progress_phases": "cli",
    "record_document": "reading",
    "record_file_name": "reading",
    "run": "cli",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
