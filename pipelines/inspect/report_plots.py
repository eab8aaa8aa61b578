"""The data report's plots: matplotlib (Agg, no display) figures rendered to PNG bytes.

One look throughout: the data in blue, Google's create_pretraining_data.py figure for the
same settings in orange (dashed or hollow), one colour per source or split from one palette,
light grid, no top or right spine. matplotlib is imported here only, so `bertkit inspect`
without --report never loads it.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

DATA = "#2f6db5"
GOOGLE = "#e0711c"
MUTED = "#8a94a6"
PALETTE = ("#2f6db5", "#3aa17e", "#a05fc0", "#d4a72c", "#d0525c", "#4bb3c9", "#7c8796")
WIDTH, HEIGHT, DPI = 6.4, 3.3, 110


def size_text(value: int) -> str:
    """Bytes in decimal units: "3.6 MB", "61.0 kB", "61 bytes"."""
    if value >= 1e6:
        return f"{value / 1e6:,.1f} MB"
    return f"{value / 1e3:,.1f} kB" if value >= 1e3 else f"{value} bytes"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 9.5,
            "axes.titlesize": 10.5,
            "axes.titleweight": "bold",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.color": "#e3e7ee",
            "grid.linewidth": 0.8,
            "axes.axisbelow": True,
            "axes.edgecolor": "#9aa3b2",
            "legend.frameon": False,
            "svg.hashsalt": "bertkit",
            "path.simplify": True,
            # Names are drawn as text: a directory called `$x$` or `a$b` is not TeX math.
            "text.parse_math": False,
            "text.usetex": False,
        }
    )
    return plt


def _png(figure: Any) -> bytes:
    plt = _pyplot()
    figure.tight_layout()
    buffer = io.BytesIO()
    # No metadata: the same data gives the same bytes.
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def _figure(width: float = WIDTH, height: float = HEIGHT) -> tuple[Any, Any]:
    return _pyplot().subplots(figsize=(width, height))


def _thousands(axis: Any) -> None:
    """Whole counts with thousands separators: no 0.5 of a document."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _percent(axis: Any) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value * 100:g} %"))


def source_colours(sources: Sequence[str]) -> dict[str, str]:
    """One colour per source, from the palette in the sources' sorted order: every plot that
    tells sources apart takes its colours from this one map, so a source keeps its colour
    from plot to plot."""
    return {source: PALETTE[i % len(PALETTE)] for i, source in enumerate(sorted(set(sources)))}


def documents_per_source(rows: Sequence[tuple[str, int, int]], colours: dict[str, str]) -> bytes:
    """Horizontal bars, one per source (coloured by `colours`): documents, labelled with
    their text megabytes."""
    figure, axes = _figure(WIDTH, max(1.9, 0.55 * len(rows) + 1.1))
    names = [name for name, _, _ in rows][::-1]
    counts = [count for _, count, _ in rows][::-1]
    bars = axes.barh(names, counts, color=[colours[name] for name in names], height=0.6)
    for bar, (_, count, text_bytes) in zip(bars, rows[::-1], strict=True):
        axes.annotate(
            f" {count:,} · {size_text(text_bytes)} of text",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            va="center",
            fontsize=8.5,
            color="#333",
        )
    axes.set_xlim(0, max(counts, default=1) * 1.45 or 1)
    axes.set_xlabel("documents")
    axes.grid(axis="y", visible=False)
    _thousands(axes.xaxis)
    return _png(figure)


def sentences_per_document(series: Sequence[tuple[str, str, Counter[int]]]) -> bytes:
    """Documents by sentence count in power-of-two buckets, one bar group per directory:
    (label, colour, counts)."""
    top = max((max(c, default=1) for _, _, c in series), default=1)
    buckets = max(1, top).bit_length()
    figure, axes = _figure()
    width = 0.8 / max(1, len(series))
    for index, (name, colour, counts) in enumerate(series):
        heights = [0] * buckets
        for value, count in counts.items():
            heights[max(value, 1).bit_length() - 1] += count
        x = np.arange(buckets) + (index - (len(series) - 1) / 2) * width
        axes.bar(x, heights, width=width, color=colour, label=name)
    labels = [str(1 << b) if b == 0 else f"{1 << b}–{(2 << b) - 1}" for b in range(buckets)]
    axes.set_xticks(np.arange(buckets), labels, rotation=45 if buckets > 8 else 0, ha="right")
    axes.set_xlabel("sentences in the document")
    axes.set_ylabel("documents")
    _thousands(axes.yaxis)
    axes.grid(axis="x", visible=False)
    if len(series) > 1:
        axes.legend()
    return _png(figure)


def tokens_per_sentence(
    counts: Counter[int], max_tokens: int | None, unit: str = "tokens"
) -> bytes:
    """Sentences by WordPiece tokens (or words), log-scaled, Google's target length marked."""
    figure, axes = _figure()
    top = max(counts, default=1)
    width = max(1, -(-top // 60))
    bins = np.arange(0, top + width + 1, width)
    values = np.repeat(np.array(list(counts), dtype=float), list(counts.values()))
    axes.hist(values, bins=bins, color=DATA)
    if max_tokens is not None:
        axes.axvline(max_tokens, color=GOOGLE, linestyle="--", linewidth=1.5)
        axes.annotate(
            f" target {max_tokens} tokens",
            (max_tokens, 0.92),
            xycoords=("data", "axes fraction"),
            color=GOOGLE,
            fontsize=8.5,
        )
    axes.set_yscale("log")
    axes.set_xlabel(f"{unit} in the sentence")
    axes.set_ylabel("sentences (log)")
    return _png(figure)


def example_lengths(splits: Sequence[tuple[str, Counter[int]]], google: dict[int, float]) -> bytes:
    """Share of examples by length, one step line per split, Google's target draw dashed."""
    figure, axes = _figure()
    top = max([max(c, default=0) for _, c in splits] + list(google) + [1])
    edges = np.arange(0, top + 9, 8)
    centres = edges[:-1] + 4
    for index, (label, counts) in enumerate(splits):
        total = sum(counts.values()) or 1
        heights, _ = np.histogram(
            list(counts), bins=edges, weights=np.array(list(counts.values())) / total
        )
        colour = PALETTE[index % len(PALETTE)]
        axes.step(centres, heights, where="mid", color=colour, linewidth=1.8, label=label)
        axes.fill_between(centres, heights, step="mid", color=colour, alpha=0.12)
    if google:
        heights, _ = np.histogram(list(google), bins=edges, weights=list(google.values()))
        axes.step(
            centres,
            heights,
            where="mid",
            color=GOOGLE,
            linestyle="--",
            linewidth=1.5,
            label="Google's target-length draw",
        )
    axes.set_yscale("log")
    axes.set_ylim(bottom=1e-4)
    axes.set_xlabel("tokens in the example (bins of 8)")
    axes.set_ylabel("share of examples (log)")
    _percent(axes.yaxis)
    axes.legend(fontsize=8)
    return _png(figure)


def share_label(share: float) -> str:
    """A bar's label in `shares_against`, which the text beside the plot quotes."""
    return f"{share:.1%}"


def shares_against(
    labels: Sequence[str],
    shares: Sequence[float],
    reference: float,
    reference_label: str,
    title: str,
    ylabel: str,
) -> bytes:
    """One bar per split, the reference share (Google's, or the flag's) as a dashed line."""
    figure, axes = _figure(WIDTH, 2.9)
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(labels))]
    bars = axes.bar(labels, shares, color=colours, width=0.55)
    for bar, share in zip(bars, shares, strict=True):
        axes.annotate(
            share_label(share),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    axes.axhline(reference, color=GOOGLE, linestyle="--", linewidth=1.5)
    axes.annotate(
        f"{reference_label} {reference:.0%}",
        (0.5, reference),
        xycoords=("axes fraction", "data"),
        ha="center",
        va="bottom",
        color=GOOGLE,
        fontsize=8.5,
    )
    axes.set_ylim(0, max([*shares, reference, 0.01]) * 1.3)
    _percent(axes.yaxis)
    axes.set_ylabel(ylabel)
    axes.grid(axis="x", visible=False)
    return _png(figure)


def predictions_per_example(observed: Counter[int], google: Counter[int]) -> bytes:
    """Examples by number of predictions: bars for the data, hollow bars for Google's rule."""
    figure, axes = _figure()
    values = sorted(set(observed) | set(google))
    x = np.array(values)
    axes.bar(x, [observed.get(v, 0) for v in values], width=0.8, color=DATA, label="these shards")
    axes.bar(
        x,
        [google.get(v, 0) for v in values],
        width=0.8,
        fill=False,
        edgecolor=GOOGLE,
        linewidth=1.4,
        linestyle="--",
        label="Google's rule on these lengths",
    )
    axes.set_yscale("log")
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("masked positions to predict in the example")
    axes.set_ylabel("examples (log)")
    axes.legend(fontsize=8, loc="upper left")
    axes.grid(axis="x", visible=False)
    return _png(figure)


def mask_split(observed: Sequence[float], google: Sequence[float]) -> bytes:
    """[MASK] / kept / random shares of the masked positions, beside Google's 80/10/10."""
    figure, axes = _figure(WIDTH, 2.9)
    names = ["[MASK]", "kept", "random"]
    x = np.arange(3)
    axes.bar(x - 0.2, observed, width=0.4, color=DATA, label="these shards")
    axes.bar(x + 0.2, google, width=0.4, color=GOOGLE, alpha=0.85, label="Google")
    for position, share in zip(x - 0.2, observed, strict=True):
        axes.annotate(f"{share:.1%}", (position, share), ha="center", va="bottom", fontsize=8.5)
    axes.set_xticks(x, names)
    axes.set_ylim(0, 1)
    _percent(axes.yaxis)
    axes.set_ylabel("share of masked positions")
    axes.grid(axis="x", visible=False)
    axes.legend(fontsize=8)
    return _png(figure)


def token_frequency(frequencies: np.ndarray) -> bytes:
    """Rank/frequency of the tokens on log-log axes, with Zipf's 1/rank through rank 1."""
    figure, axes = _figure()
    ranks = np.arange(1, len(frequencies) + 1)
    axes.loglog(ranks, frequencies, color=DATA, linewidth=1.8, label="tokens")
    if len(frequencies):
        axes.loglog(
            ranks,
            frequencies[0] / ranks,
            color=MUTED,
            linestyle=":",
            linewidth=1.4,
            label="Zipf: frequency ∝ 1/rank",
        )
    axes.set_xlabel("rank of the token")
    axes.set_ylabel("occurrences")
    axes.legend(fontsize=8)
    return _png(figure)


def duplicates(
    rows: Sequence[tuple[str, int, int]], similarities: Sequence[float], threshold: float | None
) -> bytes:
    """Removed documents per input directory (exact and near, stacked), and the near
    duplicates' estimated similarity against the run's --threshold."""
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, HEIGHT))
    names = [name for name, _, _ in rows][::-1]
    exact = [e for _, e, _ in rows][::-1]
    near = [n for _, _, n in rows][::-1]
    left.barh(names, exact, height=0.5, color=PALETTE[0], label="exact")
    left.barh(names, near, height=0.5, left=exact, color=PALETTE[2], label="near")
    left.margins(y=0.3)
    left.set_xlabel("documents removed")
    left.grid(axis="y", visible=False)
    left.legend(fontsize=8, loc="upper center", ncol=2, bbox_to_anchor=(0.5, -0.22))
    _thousands(left.xaxis)
    left.set_title("From each input", loc="left")
    low = min([0.5, *(s for s in similarities), *([threshold] if threshold else [])])
    if similarities:
        right.hist(similarities, bins=np.linspace(low, 1.0, 26), color=PALETTE[2])
        right.set_xlabel("estimated Jaccard similarity")
        right.set_ylabel("near duplicates")
        _thousands(right.yaxis)
        if threshold is not None:
            right.axvline(threshold, color=GOOGLE, linestyle="--", linewidth=1.4)
    else:
        right.text(0.5, 0.5, "no near duplicates", ha="center", va="center", color=MUTED)
        right.set_axis_off()
    right.set_title("Near duplicates' similarity", loc="left")
    return _png(figure)
