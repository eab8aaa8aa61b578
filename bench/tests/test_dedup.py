"""bench.dedup's corpus and scores: its helpers on literal documents, and bertkit's recall and
precision on the real sample's planted duplicates (datatrove and the timing never run here)."""

from __future__ import annotations

import random

from bench import dedup
from pipelines import dedup as dedup_stage
from schemas import Document

WORDS = [f"w{i}" for i in range(50)]


def test_changed_words_replaces_one_percent_and_at_least_one() -> None:
    long = Document("t/long", "t", "t", tuple(" ".join(WORDS) for _ in range(10)))
    changed = dedup.changed_words(long, 0.01, ["other"], random.Random(0))
    assert sum(w == "other" for s in changed for w in s.split()) == 5  # 1 % of 500
    short = Document("t/short", "t", "t", ("a b c",))
    assert dedup.changed_words(short, 0.01, ["other"], random.Random(0)) != ["a b c"]


def test_planted_copies_follow_their_position() -> None:
    wiki = [Document(f"enwiki/{i}", "enwiki", str(i), (" ".join(WORDS),)) for i in range(5)]
    books = [Document(f"books/{n}", "books", n, ("x y z",)) for n in ("alice29", "lcet10")]
    planted = [d.id for d in dedup.planted_documents(wiki, books)]
    assert planted == [
        "planted/exact/enwiki/0",
        "planted/near/enwiki/1",
        "planted/exact/enwiki/3",
        "planted/near/enwiki/4",
        "planted/exact/books/alice29",
        "planted/near/books/lcet10",
    ]


def test_quality_is_recall_and_precision_of_the_planted() -> None:
    assert dedup.quality({"a", "b", "x"}, {"a", "b", "c", "d"}) == (0.5, 2 / 3)
    assert dedup.quality(set(), {"a"}) == (0.0, 1.0)


def test_bertkit_finds_every_planted_copy_of_the_sample(tmp_path, sample_documents) -> None:
    wiki, books = sample_documents
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "wiki").symlink_to(wiki)
    (corpus / "books").symlink_to(books)
    originals = dedup.read_documents(wiki), dedup.read_documents(books)
    dedup.write_documents(corpus / "planted", dedup.planted_documents(*originals))
    dedup.write_documents(corpus / "related", dedup.related_documents(*originals))
    inputs = [str(corpus / n) for n in ("wiki", "books", "planted", "related")]
    output = tmp_path / "out"
    assert dedup_stage.run(["--documents", *inputs, "--output", str(output)]) == 0
    removed = dedup.bertkit_removed(output, corpus)
    planted = {f"planted:{d.id}" for d in dedup.read_documents(corpus / "planted")}
    assert len(planted) == 67  # of 97 Wikipedia documents and two books
    assert dedup.quality(removed, planted) == (1.0, 1.0)
    # The related but unlike documents (halves of two articles, 60 % of a book) are kept.
    related = {f"related:{d.id}" for d in dedup.read_documents(corpus / "related")}
    assert len(related) == 24 and not related & removed  # 20 halves, 4 prefixes
