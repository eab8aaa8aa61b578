"""The data report's panels: for each plot, the figures of these data, Google's figure on the
same settings (computed from the manifest's recorded flags) and one line on what it means."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from pipelines.inspect import report_plots as plots
from pipelines.inspect.report_data import (
    KEEP_PROB,
    MASK_PROB,
    NOT_NEXT_PROB,
    RANDOM_PROB,
    DocumentsSection,
    ReportData,
    SplitSection,
    google_predictions,
    google_target_lengths,
    heldout_shares,
    rank_frequency,
)
from pipelines.inspect.report_html import Page, Panel
from pipelines.io import storage
from schemas.duplicates import EXACT, NEAR
from schemas.shards import FULL_SENTENCES, NO_MASKS, ShardsManifest
from schemas.vocab import CLS_TOKEN, MASK_TOKEN, PAD_TOKEN, SEP_TOKEN


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _pct(part: float, whole: float, digits: int = 1) -> str:
    return f"{part / whole:.{digits}%}" if whole else "–"


def _share(part: float, whole: float) -> str:
    """A small share, such as [UNK]'s: "0" rather than 0.000 %."""
    return "0" if whole and not part else _pct(part, whole, 3)


def _name(url: str) -> str:
    return storage.basename(url.rstrip("/")) or url


def _short(path: str) -> str:
    """A directory by its last two names: "demo/books"."""
    return "/".join(storage.redact(path).rstrip("/").split("/")[-2:])


def _mean(counts: Counter[int]) -> float:
    total = sum(counts.values())
    return sum(k * v for k, v in counts.items()) / total if total else 0.0


def _median(counts: Counter[int]) -> int:
    total, seen = sum(counts.values()), 0
    for value in sorted(counts):
        seen += counts[value]
        if 2 * seen >= total:
            return value
    return 0


def _config(data: ReportData) -> dict:
    manifest = data.shards.manifest if data.shards is not None else None
    return manifest.config if manifest is not None else {}


def _max_seq_length(data: ReportData) -> int | None:
    if data.shards is None or not data.shards.splits:
        return None
    return max(split.max_seq_length for split in data.shards.splits.values()) or None


# --------------------------------------------------------------------------- documents


def documents_panels(data: ReportData) -> list[Panel]:
    sections = data.documents
    per_source: Counter[str] = Counter()
    text: Counter[str] = Counter()
    for section in sections:
        per_source.update(section.per_source)
        text.update(section.bytes_per_source)
    rows = [(source, per_source[source], text[source]) for source in sorted(per_source)]
    total_text = sum(text.values())
    top = max(rows, key=lambda row: row[2], default=("", 0, 0))
    colours = source_colours(sections)
    panels = [
        Panel(
            "Documents per source",
            plots.documents_per_source(rows, colours) if rows else None,
            "documents per source, bars",
            [
                ("directories", _n(len(sections))),
                ("documents", _n(sum(s.documents for s in sections))),
                ("sentences", _n(sum(s.sentences for s in sections))),
                ("text", plots.size_text(total_text)),
            ],
            meaning=f"{top[0]} is {_pct(top[2], total_text, 0)} of the text the model reads; "
            "the mix of sources is the mix of what it learns.",
            missing="no documents",
        ),
        _sentences_panel(sections, colours),
        _tokens_panel(data),
        _duplicates_panel(sections),
    ]
    return panels


def source_colours(sections: Sequence[DocumentsSection]) -> dict[str, str]:
    """The colour of each source, and of each documents directory by its name: a directory
    of one source (the usual case: `bertkit books`' "books", a dump's "enwiki") takes its
    source's colour, one of several sources a colour of its own after them."""
    colours = plots.source_colours([source for s in sections for source in s.per_source])
    mixed = sorted({_name(s.url) for s in sections if len(s.per_source) != 1} - set(colours))
    for index, name in enumerate(mixed, start=len(colours)):
        colours[name] = plots.PALETTE[index % len(plots.PALETTE)]
    return colours


def _directory_colour(section: DocumentsSection, colours: dict[str, str]) -> str:
    if len(section.per_source) == 1:
        (source,) = section.per_source
        return colours[source]
    return colours[_name(section.url)]


def _directory_label(section: DocumentsSection) -> str:
    """A documents directory's name in a legend, with its source where the two differ:
    "wikipedia (enwiki)"."""
    name = _name(section.url)
    sources = sorted(section.per_source)
    return f"{name} ({sources[0]})" if len(sources) == 1 and sources[0] != name else name


def _sentences_panel(sections: Sequence[DocumentsSection], colours: dict[str, str]) -> Panel:
    counts: Counter[int] = Counter()
    for section in sections:
        counts.update(section.sentences_per_document)
    documents = sum(counts.values())
    series = [
        (_directory_label(s), _directory_colour(s, colours), s.sentences_per_document)
        for s in sections
    ]
    return Panel(
        "Sentences per document",
        plots.sentences_per_document(series) if documents else None,
        "documents by sentence count, power-of-two buckets",
        [
            ("mean", f"{_mean(counts):,.1f}"),
            ("median", _n(_median(counts))),
            ("longest", _n(max(counts, default=0))),
            ("one sentence", f"{_n(counts[1])} ({_pct(counts[1], documents)})"),
        ],
        google="a document is a run of lines ended by a blank line; a chunk of one sentence "
        "always gets a random next sentence.",
        meaning=f"{_pct(counts[1], documents)} of documents have one sentence and give only "
        "NotNext pairs; long documents give many IsNext pairs.",
        missing="no documents",
    )


def _tokens_panel(data: ReportData) -> Panel:
    seq = _max_seq_length(data)
    target = seq - 3 if seq else None
    if data.vocab is None or not data.sampled_sentences:
        words: Counter[int] = Counter(
            len(sentence.split()) for section in data.documents for sentence in section.sampled
        )
        return Panel(
            "Words per sentence",
            plots.tokens_per_sentence(words, None, "words") if words else None,
            "sentences by word count, histogram",
            [("sentences sampled", _n(sum(words.values()))), ("mean", f"{_mean(words):.1f}")],
            meaning=f"{data.vocab_note}; words are shown instead of tokens.",
            missing=data.vocab_note or "no sentences",
        )
    counts = data.sentence_tokens
    sampled = data.sampled_sentences
    over = sum(v for k, v in counts.items() if target is not None and k > target)
    stride = max((s.stride for s in data.documents), default=1)
    figures = [
        ("sentences tokenised", f"{_n(sampled)}" + (f" (1 in {stride})" if stride > 1 else "")),
        ("tokens per sentence", f"mean {_mean(counts):.1f}, median {_median(counts)}"),
        ("longest", _n(max(counts, default=0))),
        ("[UNK] share", _share(data.sampled_unknown, data.sampled_tokens)),
    ]
    if target is not None:
        figures.append((f"over {target} tokens", f"{_n(over)} ({_pct(over, sampled, 2)})"))
    return Panel(
        "Tokens per sentence",
        plots.tokens_per_sentence(counts, target),
        "sentences by WordPiece tokens, histogram",
        figures,
        google=f"sentences are gathered until the target ({target} tokens: max_seq_length {seq} "
        "− 3); a pair longer than it is trimmed a token at a time from the longer side."
        if target
        else "",
        meaning=f"{_pct(over, sampled, 2)} of sentences do not fit one example and are trimmed "
        f"wherever they appear; [UNK], text the model never sees: "
        f"{_share(data.sampled_unknown, data.sampled_tokens)}."
        if target
        else "how much text one sentence is, in the tokens the model reads.",
    )


def _duplicates_panel(sections: Sequence[DocumentsSection]) -> Panel:
    summaries = [(s, s.duplicates) for s in sections if s.duplicates is not None]
    if not summaries:
        return Panel(
            "Duplicates removed",
            None,
            "",
            google="no deduplication: every copy of a document is trained on.",
            meaning="repeated text is memorised rather than learnt from; run bertkit dedup to "
            "remove exact and near duplicates.",
            missing="no dedup run: none of these documents directories was made by "
            "bertkit dedup, so duplicates were not looked for.",
        )
    rows, similarities, figures = [], [], []
    threshold = None
    for section, summary in summaries:
        exact = summary.dropped.get(EXACT, summary.rows[EXACT])
        near = summary.dropped.get(NEAR, summary.rows[NEAR])
        inputs = sorted({name for name, _ in summary.by_input})
        # Per input directory the removed documents were read from; else per dedup output.
        rows += [
            (_short(name), summary.by_input[name, EXACT], summary.by_input[name, NEAR])
            for name in inputs
        ] or [(_name(section.url), exact, near)]
        similarities += summary.similarities
        threshold = summary.threshold if threshold is None else threshold
        kept = section.documents
        figures.append(
            (_name(section.url), f"{_n(exact + near)} of {_n(kept + exact + near)} removed")
        )
    removed = sum(e + n for _, e, n in rows)
    kept = sum(s.documents for s, _ in summaries)
    notes = "; ".join(s.note for _, s in summaries if s.note)
    return Panel(
        "Duplicates removed",
        plots.duplicates(rows, similarities, threshold),
        "documents removed as exact and near duplicates; similarity histogram",
        [
            *figures,
            ("exact", _n(sum(e for _, e, _ in rows))),
            ("near", _n(sum(n for _, _, n in rows))),
        ],
        google="no deduplication: every copy of a document is trained on.",
        meaning=f"{_pct(removed, removed + kept)} of the documents were copies of others; "
        "without dedup their text would be trained on twice or more."
        + (f" Note: {notes}." if notes else ""),
    )


# --------------------------------------------------------------------------- shards


def shards_panels(data: ReportData) -> list[Panel]:
    assert data.shards is not None
    splits = list(data.shards.splits.values())
    manifest = data.shards.manifest
    config = _config(data)
    full = manifest is not None and manifest.sequences == FULL_SENTENCES
    unmasked = manifest is not None and manifest.masking == NO_MASKS
    panels = [_lengths_panel(splits, config, full)]
    if full:
        panels.append(
            Panel("NotNext share", None, "", missing="full-sentence sequences: no NSP label")
        )
    else:
        # The examples stage's reject of a chunk that found no partner document for NotNext.
        no_partner = manifest is not None and bool(manifest.rejected.get("no_partner_document"))
        panels.append(_not_next_panel(splits, no_partner))
    if unmasked:
        panels.append(
            Panel(
                "Predictions per example",
                None,
                "",
                missing="--masking none: the trainer draws the masks, the shards hold none",
            )
        )
    else:
        panels.append(_predictions_panel(splits, config))
        if data.vocab is not None:
            panels.append(_mask_panel(splits))
        else:
            missing = f"{data.vocab_note}: [MASK] cannot be told from a random token without it"
            panels.append(Panel("What a masked position holds", None, "", missing=missing))
    panels.append(_frequency_panel(data))
    if manifest is not None:
        panels.append(_heldout_panel(manifest))
    return panels


def _lengths_panel(splits: list[SplitSection], config: dict, full: bool) -> Panel:
    seq = max((s.max_seq_length for s in splits), default=0)
    short = config.get("short_seq_prob")
    google = {} if full or short is None or seq < 6 else google_target_lengths(seq, short)
    figures = []
    for split in splits:
        at_max = split.lengths.get(split.max_seq_length, 0)
        figures.append(
            (split.label, f"{_n(split.examples)}, {_pct(at_max, split.examples)} full length")
        )
    tokens = sum(s.tokens for s in splits)
    room = sum(s.examples * s.max_seq_length for s in splits)
    figures.append(("padding", _pct(room - tokens, room)))
    return Panel(
        "Example length, per split and length",
        plots.example_lengths([(s.label, s.lengths) for s in splits], google),
        "share of examples by length per split, step lines",
        figures,
        google=f"{1 - short:.0%} of documents' targets are {seq} tokens; short_seq_prob {short} "
        f"of them are drawn uniformly from 5 to {seq}; each document's last chunk is shorter."
        if google
        else "",
        meaning=f"padded to {seq} tokens, {_pct(room - tokens, room)} of a batch is padding, "
        "compute spent on nothing; the short examples are what teaches short inputs.",
    )


def _not_next_panel(splits: list[SplitSection], no_partner: bool = False) -> Panel:
    shares = [s.not_next / s.examples if s.examples else 0.0 for s in splits]
    return Panel(
        "NotNext share",
        plots.shares_against(
            [s.label for s in splits], shares, NOT_NEXT_PROB, "Google", "NotNext share", "NotNext"
        ),
        "share of NotNext pairs per split, bars, Google's 50 % dashed",
        [(s.label, f"{_n(s.not_next)} ({_pct(s.not_next, s.examples)})") for s in splits],
        google="a 50 % coin per pair, and NotNext always for a chunk of one sentence: a little "
        "over 50 %.",
        meaning=not_next_meaning(splits, no_partner),
    )


# A NotNext share in this range is "about balanced": Google's coin gives a little over 50 %.
BALANCED_NOT_NEXT = (0.4, 0.6)


def not_next_meaning(splits: Sequence[SplitSection], no_partner: bool = False) -> str:
    """What the NotNext shares say of the next-sentence task, split by split: about
    balanced (`BALANCED_NOT_NEXT`), skewed towards one class, or one class only; IsNext
    only with `no_partner` (chunks rejected for want of a partner document) is what the
    examples stage warned of."""
    shown = [s for s in splits if s.examples]
    empty = [s.label for s in splits if not s.examples]
    low, high = BALANCED_NOT_NEXT
    bounds = f"{low:.0%}–{high:.0%} NotNext"
    if not shown:
        return "no examples, so no next-sentence pairs to count."
    said = f" ({', '.join(empty)}: no examples)" if empty else ""
    balanced, clauses = [], []
    for split in shown:
        share = split.not_next / split.examples
        if split.not_next == 0:
            why = (
                ", as the examples stage warned: a NotNext pair takes its second segment from "
                "another document of the same split, and it had none"
                if no_partner
                else ""
            )
            clauses.append(
                f"{split.label} holds IsNext pairs only{why}, so next-sentence prediction there "
                "sees one class (give the split two or more documents, or train with "
                "--objective mlm)"
            )
        elif split.not_next == split.examples:
            clauses.append(
                f"{split.label} holds NotNext pairs only (a chunk of one sentence always takes a "
                "random next), so next-sentence prediction there sees one class"
            )
        elif low <= share <= high:
            balanced.append(split.label)
        else:
            more = "NotNext" if share > high else "IsNext"
            clauses.append(
                f"{split.label} is skewed towards {more} (outside {bounds}): always answering "
                f"{more} scores {plots.share_label(max(share, 1 - share))} there, so read its "
                "NSP accuracy against that, not 50 %"
            )
    if balanced:
        clauses.insert(
            0,
            f"the next-sentence task is about balanced ({bounds}"
            + (f" in {', '.join(balanced)}" if clauses else "")
            + "), so an NSP accuracy near 50 % means the model has learnt nothing of it",
        )
    return f"{_shown_shares(shown)} NotNext{said}: " + "; ".join(clauses) + "."


def _shown_shares(splits: Sequence[SplitSection]) -> str:
    """The NotNext shares as the bars label them ("seq128/train 53.9%, seq128/heldout
    50.8%"), so the note says what the plot shows."""
    return ", ".join(
        f"{s.label} {plots.share_label(s.not_next / s.examples if s.examples else 0.0)}"
        for s in splits
    )


def _predictions_panel(splits: list[SplitSection], config: dict) -> Panel:
    prob = float(config.get("masked_lm_prob", 0.15))
    observed: Counter[int] = Counter()
    expected: Counter[int] = Counter()
    for split in splits:
        observed.update(split.predictions)
        expected.update(google_predictions(split.lengths, prob, split.max_predictions))
    agree = sum(min(observed[k], expected[k]) for k in observed)
    total = sum(observed.values())
    top = max((s.max_predictions for s in splits), default=0)
    whole = " (whole-word masking can stop a word short)" if config.get("whole_word_mask") else ""
    return Panel(
        "Predictions per example",
        plots.predictions_per_example(observed, expected),
        "examples by predictions, bars; Google's rule, hollow bars",
        [
            ("mean", f"{_mean(observed):.2f}"),
            ("Google's mean", f"{_mean(expected):.2f}"),
            ("range", f"{min(observed, default=0)}–{max(observed, default=0)}"),
            ("as Google's rule", _pct(agree, total)),
        ],
        google=f"min({top}, max(1, round(n × {prob}))) predictions for an example of n tokens "
        f"(max_predictions_per_seq {top}, masked_lm_prob {prob}){whole}.",
        meaning=f"{_pct(agree, total)} of examples predict exactly what Google's rule gives "
        "their length: the MLM loss sees the same number of targets per token.",
    )


def _mask_panel(splits: list[SplitSection]) -> Panel:
    masked: Counter[str] = Counter()
    for split in splits:
        masked.update(split.masked)
    total = sum(masked.values())
    shares = [masked[k] / total if total else 0.0 for k in ("mask", "keep", "random")]
    return Panel(
        "What a masked position holds",
        plots.mask_split(shares, [MASK_PROB, KEEP_PROB, RANDOM_PROB]),
        "[MASK], kept and random shares, bars beside Google's",
        [
            ("masked positions", _n(total)),
            ("[MASK]", _pct(masked["mask"], total)),
            ("kept", _pct(masked["keep"], total)),
            ("random", _pct(masked["random"], total)),
        ],
        google="80 % [MASK], 10 % the original token, 10 % a random token.",
        meaning="the model cannot tell from the input which tokens are targets, so it keeps a "
        "representation of every token; far from 80/10/10 means a masking bug.",
    )


def _frequency_panel(data: ReportData) -> Panel:
    assert data.shards is not None
    counts = data.shards.token_counts
    vocab = data.vocab
    if vocab is None:
        skip: set[int] = set()
        unk = None
    else:
        skip = {vocab.tokens.index(t) for t in (PAD_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)}
        unk = vocab.unk_id
    frequencies = rank_frequency(counts, skip)
    total = int(frequencies.sum())
    size = vocab.size if vocab is not None else len(counts)
    used = len(frequencies)
    top = np.argsort(-np.where(np.isin(np.arange(len(counts)), list(skip)), -1, counts))[:5]
    names = " ".join(f"“{vocab.tokens[i]}”" if vocab else str(i) for i in top if counts[i] > 0)
    unknown = int(counts[unk]) if unk is not None and unk < len(counts) else 0
    figures = [
        ("tokens (text, not [CLS]/[SEP])", _n(total)),
        ("vocabulary entries used", f"{_n(used)} of {_n(size)}"),
        ("ten most frequent", _pct(int(frequencies[:10].sum()), total)),
        ("most frequent", names),
    ]
    if vocab is not None:
        figures.append(("[UNK] rate", _share(unknown, total)))
    return Panel(
        "Token frequency and unknown tokens",
        plots.token_frequency(frequencies) if used else None,
        "token occurrences by rank, log-log",
        figures,
        meaning=f"{_pct(size - used, size)} of the vocabulary never occurs in these shards, "
        f"[UNK]: {_share(unknown, total)}; many unused entries or [UNK]s say the vocabulary "
        "does not fit this text."
        if vocab is not None
        else f"token ids, not strings: {data.vocab_note}",
        missing="no examples",
    )


def _compared(examples: float, documents: float) -> str:
    if abs(examples - documents) <= 0.1 * documents:
        return "held-out documents are about as long as the others."
    longer = "longer" if examples > documents else "shorter"
    return f"held-out documents are {longer} than the others on average."


def _heldout_panel(manifest: ShardsManifest) -> Panel:
    held = heldout_shares(manifest)
    fraction = held["fraction"]
    shares = [
        held["documents_heldout"] / held["documents"] if held["documents"] else 0.0,
        held["examples_heldout"] / held["examples"] if held["examples"] else 0.0,
    ]
    return Panel(
        "Held-out share",
        plots.shares_against(
            ["documents", "examples"],
            shares,
            float(fraction or 0.0),
            "--heldout-fraction",
            "Held out from training",
            "share held out",
        ),
        "documents and examples held out, bars, the flag's fraction dashed",
        [
            ("documents", f"{_n(held['documents_heldout'])} of {_n(held['documents'])}"),
            ("examples", f"{_n(held['examples_heldout'])} of {_n(held['examples'])}"),
            ("--heldout-fraction", str(fraction)),
        ],
        google="none: it writes no held-out split, so a held-out loss needs text kept aside "
        "by hand.",
        meaning=heldout_meaning(held, shares),
    )


def heldout_meaning(held: dict, shares: Sequence[float]) -> str:
    """The held-out panel's line: how held-out documents compare with the others, or, when
    none was held out, that there is no held-out split (as the examples stage warned)."""
    if not held["documents_heldout"]:
        fraction = held["fraction"]
        why = (
            f"--heldout-fraction {fraction} held out none of the {_n(held['documents'])} "
            "documents (chosen by a hash of their id)"
            if fraction
            else "--heldout-fraction is 0"
        )
        return f"no held-out split: {why}, so bertkit train evaluates nothing on these shards" + (
            "; raise --heldout-fraction or give more documents." if fraction else "."
        )
    return (
        "whole documents are held out (by id hash), so the held-out loss measures text the "
        f"model never trained on; {_pct(held['examples_heldout'], held['examples'])} of "
        f"examples against {_pct(held['documents_heldout'], held['documents'])} of documents: "
        + _compared(shares[1], shares[0])
    )


# --------------------------------------------------------------------------- the page


def build_page(data: ReportData) -> Page:
    headline: list[tuple[str, str]] = []
    if data.documents:
        headline += [
            (_n(sum(s.documents for s in data.documents)), "documents"),
            (_n(sum(s.sentences for s in data.documents)), "sentences"),
            (plots.size_text(sum(s.text_bytes for s in data.documents)), "of text"),
        ]
    if data.shards is not None:
        splits = data.shards.splits.values()
        headline += [
            (_n(sum(s.examples for s in splits)), "examples"),
            (_n(sum(s.tokens for s in splits)), "tokens in examples"),
            (plots.size_text(data.shards.shard_bytes), "of shards"),
        ]
    if data.vocab is not None:
        headline.append((_n(data.vocab.size), "vocabulary tokens"))
    notes = list(data.notes)
    if data.vocab is None and data.vocab_note:
        notes.append(data.vocab_note)
    if data.shards is not None and not data.documents and not data.notes:
        notes.append("the shards manifest names no documents directory: documents plots left out")
    groups = []
    if data.documents:
        groups.append(("Documents", documents_panels(data)))
    if data.shards is not None:
        groups.append(("Pre-training examples", shards_panels(data)))
    read = [data.title]
    read += [f"documents {storage.redact(s.url)}" for s in data.documents if s.url != data.title]
    if data.vocab is not None:
        read.append(data.vocab_note)
    return Page(
        "bertkit data report",
        " · ".join(read),
        headline,
        [storage.redact(note) for note in notes],
        groups,
    )
