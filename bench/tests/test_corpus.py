"""bench.corpus's own checks: its input is what it says, and the reading path it times is the
stage's (the full run, 100 MB and 1 GB, never runs here)."""

from __future__ import annotations

import json
from itertools import islice

import zstandard

from bench import corpus
from pipelines.books import reading as books_reading


def test_records_are_fineweb_shaped_and_repeatable():
    first = list(islice(corpus.records(), 50))
    assert first == list(islice(corpus.records(), 50))  # seeded
    record = json.loads(first[0])
    assert sorted(record) == ["date", "id", "language", "score", "text", "url"]
    paragraphs = set(corpus.sample_paragraphs())
    assert all(p in paragraphs for p in record["text"].split("\n\n"))


def test_inputs_hold_the_size_asked_and_are_built_once(tmp_path):
    plain, packed = tmp_path / "r.jsonl", tmp_path / "r.jsonl.zst"
    size = corpus.build_input(plain, 0.3)
    assert size == plain.stat().st_size and 300_000 <= size < 400_000
    assert corpus.build_input(packed, 0.3) == size
    assert zstandard.ZstdDecompressor().stream_reader(packed.open("rb")).read() == (
        plain.read_bytes()
    )
    assert corpus.build_input(plain, 0.3) == size  # cached: not rebuilt


def test_the_parse_rate_reads_every_record_and_restores_the_splitter(tmp_path):
    path = tmp_path / "r.jsonl.zst"
    corpus.build_input(path, 0.2)
    lines = zstandard.ZstdDecompressor().stream_reader(path.open("rb")).read().splitlines()
    splitter = books_reading.split_sentences
    cpu_s, made = corpus.parse_cpu_s(path, stub_splitter=True)
    assert books_reading.split_sentences is splitter
    assert cpu_s > 0 and made == len(lines)  # every record has running text
    assert corpus.parse_cpu_s(path, stub_splitter=False)[1] == made
