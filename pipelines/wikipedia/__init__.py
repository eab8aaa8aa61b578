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

Flags not listed below go to Beam's PipelineOptions.
"""

from pipelines.wikipedia.cli import STAGE, main, progress_phases, run
from pipelines.wikipedia.config import WikipediaConfig
from pipelines.wikipedia.pages import PageContext, document_from_page
from pipelines.wikipedia.transforms import COUNTERS, ExtractArticles

__all__ = [
    "COUNTERS",
    "STAGE",
    "ExtractArticles",
    "PageContext",
    "WikipediaConfig",
    "document_from_page",
    "main",
    "progress_phases",
    "run",
]
