"""Time the two pure-Python stages of Wikipedia extraction on the sample's articles.

    python -m bench.extract_stages                  # 7 repeats, the median reported
    python -m bench.extract_stages --repeats 15

Run from the repository root. The sample dump's articles (what `bertkit wikipedia` keeps:
main namespace, no redirects, no disambiguation pages) are read once; then, --repeats times
each, every article's wikitext goes through `clean_wikitext` (min 5 words per paragraph, as
the stage's default) and the paragraphs through `split_paragraphs`. It prints the median CPU
time of each, with the fastest and slowest repeat (process time: what other processes on the
machine do counts least there) and the sha256 of all the sentences, which a change that
claims to keep the output byte-identical must leave as it was. `python -m bench.extract`
measures the whole stage against WikiExtractor; this isolates what a change to the cleaner or
the splitter wins.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable

from bench.measure import argument_parser
from bench.scale_dump import find_sample_dump
from pipelines.beam.documents import UnitTally
from pipelines.io.storage import READER
from pipelines.text.sentences import split_paragraphs
from pipelines.text.wikidump import SiteInfo, iter_dump, plan_splits
from pipelines.text.wikitext import clean_wikitext
from pipelines.wikipedia.config import WikipediaConfig
from pipelines.wikipedia.pages import PageContext, document_from_page

MIN_WORDS = WikipediaConfig.min_paragraph_words


def sample_articles() -> tuple[list[str], PageContext]:
    """The wikitext of every page of the sample that the stage turns into a document."""
    path = str(find_sample_dump())
    context = PageContext.of(path, SiteInfo())
    config = WikipediaConfig(input=(path,), output="unused")
    tally = UnitTally("bench", output_dir="unused")
    articles = []
    for split in plan_splits(path, 0, READER):
        for item in iter_dump(split, READER):
            if isinstance(item, SiteInfo):
                context = PageContext.of(path, item)
            elif document_from_page(item, context, config, tally) is not None:
                articles.append(item.text or "")
    return articles, context


def cpu_times(repeats: int, work: Callable[[], object]) -> list[float]:
    """CPU seconds of each of `repeats` runs of `work`."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return times


def shown(times: list[float]) -> str:
    """The median in ms, and the range."""
    ms = [t * 1000 for t in times]
    return f"{statistics.median(ms):7.1f} ms CPU (range {min(ms):.1f}-{max(ms):.1f})"


def main(argv: list[str] | None = None) -> None:
    parser = argument_parser("bench.extract_stages", __doc__)
    parser.add_argument("--repeats", type=int, default=7, help="runs of each stage (default 7)")
    args = parser.parse_args(argv)
    articles, context = sample_articles()

    def clean_all() -> list[list[str]]:
        return [
            clean_wikitext(
                text,
                min_words=MIN_WORDS,
                file_namespaces=context.file_namespaces,
                category_namespaces=context.category_namespaces,
            )
            for text in articles
        ]

    paragraphs = clean_all()

    def split_all() -> list[list[str]]:
        return [split_paragraphs(article) for article in paragraphs]

    digest = hashlib.sha256()
    for sentences in split_all():
        digest.update("\n".join(sentences).encode("utf-8") + b"\0")
    megabytes = sum(len(text.encode("utf-8")) for text in articles) / 1e6
    clean_s, split_s = cpu_times(args.repeats, clean_all), cpu_times(args.repeats, split_all)
    print(f"{len(articles)} articles, {megabytes:.2f} MB of wikitext; median of {args.repeats}:")
    print(f"  clean_wikitext    {shown(clean_s)}")
    print(f"  split_paragraphs  {shown(split_s)}")
    print(f"sentences sha256 {digest.hexdigest()}")


if __name__ == "__main__":
    main()
