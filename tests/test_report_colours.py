"""The data report's words and colours: one colour per source in every plot, the NotNext
note quoting the figures its bars show, "0" for a rate of nothing, no literal backticks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from matplotlib.axes import Axes

from pipelines.inspect import open_target
from pipelines.inspect.report import report_html
from pipelines.inspect.report_data import DocumentsSection, ReportData, SplitSection
from pipelines.inspect.report_html import Panel
from pipelines.inspect.report_plots import PALETTE
from pipelines.inspect.report_sections import (
    _not_next_panel,
    _share,
    build_page,
    documents_panels,
    source_colours,
)
from tests.test_report import shards_with_documents  # noqa: F401 (fixture)

BLUE, GREEN, PURPLE = PALETTE[:3]


def section(url: str, sources: dict[str, int], sentences: dict[int, int]) -> DocumentsSection:
    """A documents directory's counts, as report_data reads them."""
    return DocumentsSection(
        url,
        "books",
        documents=sum(sources.values()),
        per_source=Counter(sources),
        bytes_per_source=Counter({source: 100 * n for source, n in sources.items()}),
        sentences_per_document=Counter(sentences),
        sampled=["the cat sat ."],
    )


# The demo's order: its shards manifest names the Wikipedia documents before the books.
WIKIPEDIA = section("out/demo/documents/wikipedia", {"enwiki": 97}, {40: 60, 300: 37})
BOOKS = section("out/demo/documents/books", {"books": 4}, {1500: 3, 2500: 1})


def test_the_source_colour_map() -> None:
    assert source_colours([WIKIPEDIA, BOOKS]) == {"books": BLUE, "enwiki": GREEN}
    assert source_colours([BOOKS, WIKIPEDIA]) == {"books": BLUE, "enwiki": GREEN}
    # A directory of several sources gets a colour of its own, after the sources'.
    corpus = section("out/corpus", {"c4": 5, "pile": 3}, {2: 8})
    assert source_colours([corpus, BOOKS]) == {
        "books": BLUE,
        "c4": GREEN,
        "pile": PURPLE,
        "corpus": PALETTE[3],
    }


@pytest.fixture
def drawn(monkeypatch) -> list[tuple[str, str]]:
    """(label, colour) of every labelled bar series and every named horizontal bar that
    matplotlib draws (barh and hist draw through bar: those inner calls are not counted)."""
    bars: list[tuple[str, str]] = []
    real_bar, real_barh = Axes.bar, Axes.barh
    inside: list[bool] = []

    def bar(self, x, height, *args, color=None, label=None, **kwargs):
        if not inside and isinstance(label, str) and not label.startswith("_"):
            bars.append((label, color))
        return real_bar(self, x, height, *args, color=color, label=label, **kwargs)

    def barh(self, y, width, *args, color=None, **kwargs):
        bars.extend(zip(y, color, strict=True))
        inside.append(True)
        try:
            return real_barh(self, y, width, *args, color=color, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(Axes, "bar", bar)
    monkeypatch.setattr(Axes, "barh", barh)
    return bars


def test_a_source_keeps_its_colour_from_plot_to_plot(drawn) -> None:
    panels = documents_panels(ReportData("out/demo/shards", documents=[WIKIPEDIA, BOOKS]))
    assert [panel.title for panel in panels[:2]] == [
        "Documents per source",
        "Sentences per document",
    ]
    # documents per source (bars from the bottom up), then sentences per document
    assert drawn == [
        ("enwiki", GREEN),
        ("books", BLUE),
        ("wikipedia (enwiki)", GREEN),
        ("books", BLUE),
    ]


def split(label: str, examples: int, not_next: int) -> SplitSection:
    return SplitSection(label, 128, 20, examples=examples, not_next=not_next)


def test_the_notnext_note_quotes_the_shares_its_bars_show(monkeypatch) -> None:
    labels: list[str] = []
    real = Axes.annotate

    def annotate(self, text, *args, **kwargs):
        labels.append(text)
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Axes, "annotate", annotate)
    # 4 NotNext of 8 overall (50.0 %): a figure no bar shows.
    panel = _not_next_panel([split("seq128/train", 5, 3), split("seq128/heldout", 3, 1)])
    assert labels == ["60.0%", "33.3%", "Google 50%"]
    assert panel.meaning == (
        "seq128/train 60.0%, seq128/heldout 33.3% NotNext: the next-sentence task is about "
        "balanced (40%–60% NotNext in seq128/train), so an NSP accuracy near 50 % means the "
        "model has learnt nothing of it; seq128/heldout is skewed towards IsNext (outside "
        "40%–60% NotNext): always answering IsNext scores 66.7% there, so read its NSP "
        "accuracy against that, not 50 %."
    )
    assert panel.figures == [("seq128/train", "3 (60.0%)"), ("seq128/heldout", "1 (33.3%)")]


def test_a_rate_of_nothing_is_0() -> None:
    assert (_share(0, 1000), _share(3, 1000), _share(0, 0)) == ("0", "0.300%", "–")


def prose(panel: Panel) -> list[str]:
    return [panel.title, panel.alt, panel.google, panel.meaning, panel.missing] + [
        text for pair in panel.figures for text in pair
    ]


def test_no_literal_backticks_in_the_report(shards_with_documents: Path) -> None:  # noqa: F811
    page = build_page(ReportData("out/demo/documents/books", documents=[BOOKS]))
    texts = [text for _, panels in page.groups for panel in panels for text in prose(panel)]
    assert (
        "no dedup run: none of these documents directories was made by bertkit dedup, so "
        "duplicates were not looked for."
    ) in texts
    assert [text for text in texts if "`" in text] == []
    html = report_html(open_target(str(shards_with_documents)))
    assert "`" not in html
    assert "<dt>[UNK] rate</dt><dd>0</dd>" in html
