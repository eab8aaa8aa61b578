"""Extract sentence-split articles from Wikipedia `pages-articles` XML dumps.

Reads .xml.bz2 (single- or multi-stream: with its -index.txt.bz2 beside it, one file is cut
at stream boundaries across workers), .xml.gz and .xml, from local disk or any filesystem
Beam knows (gs://, s3://). Keeps main-namespace articles, drops redirects and disambiguation
pages, turns wikitext into running text (no lists, tables, headers, templates, references)
and splits it into sentences. Writes DIR/documents-*.parquet (Document schema), DIR/_rejects/
and, last, DIR/_manifest.json. Exits 1 if any input could not be read to its end.

    bertkit wikipedia --input 'dumps/enwiki-*-pages-articles-multistream.xml.bz2' --output out/wiki
    python -m pipelines.wikipedia --input data/wikipedia/*.xml.bz2 --output out/wiki \\
        --direct_num_workers 2 --direct_running_mode multi_processing
    python -m pipelines.wikipedia --input gs://bucket/enwiki-*-multistream.xml.bz2 \\
        --output gs://bucket/documents/wiki --runner DataflowRunner --project P \\
        --region us-central1 --temp_location gs://bucket/tmp

Read on: docs/stages/wikipedia.md (what it keeps, flags, what a correct run produces),
docs/bad-input.md (damaged dumps). Flags not listed below go to Beam's PipelineOptions.
"""

from pipelines.command.startup import lazy_exports

# Each name and the module that defines it, imported on first use: importing the package
# costs nothing, so that `python -m pipelines.wikipedia` (__main__.py) decides how Beam is
# imported (pipelines/command/startup.py).
_EXPORTS = {
    "COUNTERS": "transforms",
    "ExtractArticles": "transforms",
    "PageContext": "pages",
    "STAGE": "cli",
    "WikipediaConfig": "config",
    "document_from_page": "pages",
    "main": "cli",
    "progress_phases": "cli",
    "run": "cli",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
