"""A retried bundle is harmless: a runner may run a bundle twice
(Dataflow retries a failed work item), the second time after the first died half-way
through writing a file. Every DoFn that writes files is driven here as a runner drives it
(setup, start_bundle, process, finish_bundle), first crashing inside a write after some
bytes, then again on the same elements; the directory must then hold exactly what one
undisturbed run writes: the same names, the same bytes, no temporary file left over."""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest

from pipelines import books, vocab, wikipedia
from pipelines.beam import files
from pipelines.beam.documents import WriteManifest, documents_units, read_documents_input
from pipelines.examples.cli import remove_stage_leftovers
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.pairing import BUCKET_COUNTS, PairAndMaskFn
from pipelines.examples.plan import plan_layout, plan_routes
from pipelines.examples.shards import PIECES, JoinPiecesFn, OrderBucketFn
from pipelines.examples.shuffle import RegroupFn, Routing
from pipelines.examples.tokenize import SUMMARY, TokenizeDocumentsFn
from pipelines.io.vocabulary import load_vocab
from pipelines.text.wikidump import plan_splits
from schemas import MANIFEST_NAME
from tests.dumpfiles import Page, article, write_dump


class SimulatedCrash(Exception):
    """A worker dying in the middle of a write."""


class _CrashingSink:
    """A file sink that takes `budget` bytes, then fails, leaving the partial file behind."""

    def __init__(self, sink: Any, path: str, budget: int) -> None:
        self._sink, self._path, self._budget, self._written = sink, path, budget, 0
        self.closed = False

    def write(self, data: bytes) -> int:
        if self._written + len(data) > self._budget:
            self._sink.write(bytes(data[: self._budget - self._written]))
            self.close()
            raise SimulatedCrash(f"simulated crash after {self._budget} bytes of {self._path}")
        self._written += len(data)
        return self._sink.write(data)

    def flush(self) -> None:
        self._sink.flush()

    def tell(self) -> int:
        return self._written

    def close(self) -> None:
        if not self.closed:
            self._sink.close()
            self.closed = True

    def __enter__(self) -> _CrashingSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def crash_in_write(monkeypatch, name: str, budget: int, nth: int = 1) -> Iterator[list[str]]:
    """The `nth` file created whose path matches the regular expression `name` fails after
    `budget` bytes; yields the paths that crashed (one, once it has happened)."""
    real_create, crashed, seen = files.create, [], [0]

    def create(path: str):
        sink = real_create(path)
        if crashed or not re.search(name, path):
            return sink
        seen[0] += 1
        if seen[0] < nth:
            return sink
        crashed.append(path)
        return _CrashingSink(sink, path, budget)

    monkeypatch.setattr(files, "create", create)
    yield crashed
    monkeypatch.setattr(files, "create", real_create)


def run_bundle(fn: beam.DoFn, elements: list, *side_inputs: Any) -> dict[str, list]:
    """Drive `fn` over one bundle as a runner does; its outputs by tag ("main" untagged)."""
    outputs: dict[str, list] = defaultdict(list)
    fn.setup()
    fn.start_bundle()
    for element in elements:
        for output in fn.process(element, *side_inputs):
            if isinstance(output, beam.pvalue.TaggedOutput):
                outputs[output.tag].append(output.value)
            else:
                outputs["main"].append(output)
    fn.finish_bundle()
    fn.teardown()
    return outputs


def crash_then_retry(
    monkeypatch,
    make_fn: Callable[[], beam.DoFn],
    elements: list,
    name: str,
    budget: int,
    *side_inputs: Any,
    nth: int = 1,
) -> dict[str, list]:
    """The bundle's first attempt dies inside a write; a fresh DoFn runs it again."""
    with (
        crash_in_write(monkeypatch, name, budget, nth) as crashed,
        pytest.raises(Exception, match="simulated crash"),
    ):
        run_bundle(make_fn(), elements, *side_inputs)
    assert len(crashed) == 1  # the crash did happen, inside a write
    return run_bundle(make_fn(), elements, *side_inputs)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` (hidden ones too) with its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


# --- Documents: the Parquet writer and the rejects of wikipedia and books ----------------


def book_inputs(directory: Path) -> list[str]:
    directory.mkdir()
    texts = {
        "a.txt": "The first book has one paragraph of plain words in it. " * 40,
        "b.txt": "A second book follows with other words for its readers. " * 40,
        "c.txt": "",  # rejected (not_text): the unit writes a rejects file too
        "d.txt": "The last book closes the unit with a few more sentences. " * 40,
    }
    for name, text in texts.items():
        (directory / name).write_text(text)
    return [str(directory / name) for name in sorted(texts)]


@pytest.mark.parametrize(
    ("name", "budget", "nth"),
    [
        (r"/\.tmp-[^/]*\.parquet$", 10, 1),  # inside the first Parquet file
        (r"/\.tmp-[^/]*\.parquet$", 300, 2),  # the second, after the first was renamed
        (r"/_rejects/", 5, 1),  # inside the rejects file, every Parquet file done
    ],
)
def test_books_unit_retried_after_a_crash_mid_write_leaves_one_run(
    tmp_path, monkeypatch, name, budget, nth
) -> None:
    paths = book_inputs(tmp_path / "in")
    # Small files: the unit writes one Parquet file per book, so a crash can follow a rename.
    out = tmp_path / "out"
    config = books.BooksConfig(input=tuple(paths), output=str(out), file_mb=1000 / (1 << 20))
    root = books.common_root(paths)

    def make_fn() -> beam.DoFn:
        return books.transforms._ExtractBooksFn(str(out), root, config)

    clean = run_bundle(make_fn(), [(0, paths)])
    expected = snapshot(out)
    assert sorted(expected) == [
        "_rejects/rejects-00000.jsonl",
        "documents-00000-0000.parquet",
        "documents-00000-0001.parquet",
        "documents-00000-0002.parquet",
    ]
    shutil.rmtree(out)
    retried = crash_then_retry(monkeypatch, make_fn, [(0, paths)], name, budget, nth=nth)
    assert snapshot(out) == expected
    assert retried == clean


def test_a_temporary_file_left_by_a_killed_attempt_is_removed_by_the_retry(tmp_path) -> None:
    paths = book_inputs(tmp_path / "in")
    out = tmp_path / "out"
    fn = books.transforms._ExtractBooksFn(
        str(out), books.common_root(paths), books.BooksConfig(input=tuple(paths), output=str(out))
    )
    run_bundle(fn, [(0, paths)])
    expected = snapshot(out)
    # kill -9 mid-write: no exception handler ran, the unit's temporary file stays behind.
    leftover = out / f".tmp-00000.{'e' * 32}.parquet"
    leftover.write_bytes(b"PAR1 and then nothing")
    run_bundle(fn, [(0, paths)])
    assert snapshot(out) == expected


def test_wikipedia_split_retried_after_a_crash_mid_write_leaves_one_run(
    tmp_path, monkeypatch
) -> None:
    pages = [article(i, words=30) for i in range(1, 40)]
    pages.append(Page(90, "Deep", "{{a|" * 50 + "x" + "}}" * 50))  # rejected: 50 deep
    dump = write_dump(tmp_path / "testwiki-pages-articles.xml.bz2", pages)
    (split,) = plan_splits(str(dump), 64 << 20, files.READER)
    out = tmp_path / "out"
    # 2000 bytes of text a file: the split writes four.
    config = wikipedia.WikipediaConfig(
        input=(str(dump),), output=str(out), file_mb=2000 / (1 << 20)
    )

    def make_fn() -> beam.DoFn:
        return wikipedia.transforms._ExtractSplitFn(str(out), config)

    clean = run_bundle(make_fn(), [(0, split, None)])
    expected = snapshot(out)
    assert len([n for n in expected if n.startswith("documents-00000-00000-")]) == 4
    shutil.rmtree(out)
    retried = crash_then_retry(
        monkeypatch, make_fn, [(0, split, None)], r"/\.tmp-[^/]*\.parquet$", 500, nth=3
    )
    assert snapshot(out) == expected
    assert retried == clean


# --- Examples: the spill writers, the shard writer and the pieces of straddling shards ----


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> tuple[Path, Path]:
    """A documents directory of 6 short books and a 300-token vocabulary trained on them."""
    root = tmp_path_factory.mktemp("tiny-corpus")
    (root / "in").mkdir()
    topics = ["river", "mountain", "railway", "market", "harbour", "forest"]
    for number, topic in enumerate(topics):
        sentences = [
            f"The {topic} near town number {k} was busy in the summer of that year."
            for k in range(number * 7, number * 7 + 30)
        ]
        paragraphs = ["\n".join(sentences[i : i + 5]) for i in range(0, 30, 5)]
        (root / "in" / f"{topic}.txt").write_text("\n\n".join(paragraphs) + "\n")
    documents, vocabulary = root / "documents", root / "vocab"
    assert books.run(["--input", str(root / "in" / "*.txt"), "--output", str(documents)]) == 0
    assert (
        vocab.run(
            ["--documents", str(documents), "--output", str(vocabulary), "--vocab-size", "300"]
        )
        == 0
    )
    return documents, vocabulary


def group(pairs: list[tuple[Any, str]]) -> list[tuple[Any, list[str]]]:
    """A GroupByKey of (key, path) pairs, in key order."""
    grouped: dict[Any, list[str]] = defaultdict(list)
    for key, path in pairs:
        grouped[key].append(path)
    return sorted(grouped.items())


STEPS = ("tokenize", "regroup-partitions", "pair", "regroup-buckets", "order", "join")


def run_examples_chain(
    config: ExamplesConfig, crash: tuple[str, str, int] | None, monkeypatch
) -> dict[str, Any]:
    """The example stage's graph, step by step as a runner would; with `crash`, the step it
    names dies inside a write (the file matching its pattern) and is retried."""
    vocabulary = load_vocab(config.vocab, files.READER)
    inputs = [read_documents_input(d) for d in config.documents]
    layout = plan_layout(config, inputs, vocabulary.size)
    # Three buckets per split and tiny shards: shards straddle buckets, so pieces are written.
    layout = dataclasses.replace(layout, buckets={k: 3 for k in layout.buckets})

    def step(name: str, make_fn: Callable[[], beam.DoFn], elements: list, *side) -> dict:
        if crash is None or crash[0] != name:
            return run_bundle(make_fn(), elements, *side)
        return crash_then_retry(monkeypatch, make_fn, elements, crash[1], crash[2], *side)

    routes = plan_routes(config, layout, inputs)

    def regroup(name: str, folder: str, routing: Routing, spills: list) -> dict:
        """The second level of a regrouping, where it has one; else the spills as they are."""
        if not routing.two_level:
            return {"main": spills}
        directory = str(Path(config.work_dir) / folder)
        return step(name, lambda: RegroupFn(directory, routing), group(spills))

    tokenized = step(
        "tokenize",
        lambda: TokenizeDocumentsFn(config, layout, routes.partitions),
        documents_units(inputs),
    )
    partitions = regroup("regroup-partitions", "documents", routes.partitions, tokenized["main"])
    paired = step(
        "pair", lambda: PairAndMaskFn(config, layout, routes.buckets), group(partitions["main"])
    )
    buckets = regroup("regroup-buckets", "examples", routes.buckets, paired["main"])
    counts: dict[tuple, int] = defaultdict(int)
    for key, count in paired[BUCKET_COUNTS]:
        counts[key] += count
    ordered = step("order", lambda: OrderBucketFn(config), group(buckets["main"]), dict(counts))
    joined = step("join", lambda: JoinPiecesFn(config), group(ordered[PIECES]))
    return {
        "tokenize": tokenized,
        "regroup-partitions": partitions,
        "pair": paired,
        "regroup-buckets": buckets,
        "order": ordered,
        "join": joined,
        "shards": sorted(ordered["main"] + joined["main"], key=lambda s: s["path"]),
        "summaries": tokenized[SUMMARY] + paired[SUMMARY],
    }


@pytest.mark.parametrize(
    ("levels", "crash"),
    [
        ("1", ("tokenize", r"/_work/documents/.*-00001\.bin$", 7)),  # a document spill file
        ("1", ("pair", r"/_work/examples/", 30)),  # an example spill file
        ("1", ("order", r"/shard-[0-9]{6}\.tar\.tmp-", 700)),  # a whole shard, in its bucket
        ("1", ("order", r"/_work/pieces/", 20)),  # a piece of a shard that straddles buckets
        ("1", ("join", r"/shard-[0-9]{6}\.tar\.tmp-", 1500)),  # a shard joined from its pieces
        ("1", ("order", r"/shard-[0-9]{6}\.tar\.blocks\.json\.tmp-", 50)),  # a block table
        # Two levels: a route group's file, then a key's file written by a regroup step.
        ("2", ("tokenize", r"/_work/documents/_routes/", 7)),
        ("2", ("regroup-partitions", r"/_work/documents/train/", 7)),
        ("2", ("regroup-buckets", r"/_work/examples/seq128/", 30)),
    ],
)
def test_examples_steps_retried_after_a_crash_mid_write_leave_one_run(
    tmp_path, monkeypatch, tiny_corpus, levels, crash
) -> None:
    documents, vocabulary = tiny_corpus
    out = tmp_path / "shards"
    config = ExamplesConfig(
        documents=(str(documents),),
        vocab=str(vocabulary),
        output=str(out),
        dupe_factor=2,
        samples_per_shard=10,
        partner_group_docs=2,
        spill_budget_mb=0,
        regroup_budget_mb=0,
        shuffle_levels=levels,
    )
    clean = run_examples_chain(config, None, monkeypatch)
    clean_files = snapshot(out)
    remove_stage_leftovers(config)
    expected = snapshot(out)
    shard_files = [n for n in expected if n.endswith(".tar")]
    assert len(shard_files) == len(clean["shards"]) >= 4
    assert clean["join"]["main"]  # some shards were joined from pieces
    assert any(n.startswith("_work/pieces/") for n in expected)
    assert clean_files == expected  # an undisturbed run leaves nothing to remove
    shutil.rmtree(out)

    retried = run_examples_chain(config, crash, monkeypatch)
    # Each step's outputs (paths, counts, shard descriptions) are those of the clean run …
    for name in STEPS:
        assert retried[name] == clean[name], name
    if ".tar" in crash[1]:  # a shard write that raised removed its own temporary file;
        assert snapshot(out) == expected  # only a kill (no exception) leaves one behind
    # … and so are the files, once the stage's last step has removed what a crash left.
    remove_stage_leftovers(config)
    assert snapshot(out) == expected


def test_documents_manifest_retried_after_a_crash_mid_write_leaves_one_manifest(
    tmp_path, monkeypatch
) -> None:
    paths = book_inputs(tmp_path / "in")
    out = tmp_path / "out"
    fn = books.transforms._ExtractBooksFn(
        str(out), books.common_root(paths), books.BooksConfig(input=tuple(paths), output=str(out))
    )
    summaries = run_bundle(fn, [(0, paths)])["main"]
    inputs = [{"path": path, "bytes": Path(path).stat().st_size} for path in paths]
    write = WriteManifest(str(out), "books", inputs, {"format": "files"})._write
    write(summaries)
    expected = snapshot(out)
    (out / MANIFEST_NAME).unlink()
    with (
        crash_in_write(monkeypatch, rf"/{MANIFEST_NAME}\.tmp-", 50) as crashed,
        pytest.raises(SimulatedCrash),
    ):
        write(summaries)
    assert len(crashed) == 1 and not (out / MANIFEST_NAME).exists()
    write(summaries)
    assert snapshot(out) == expected


def test_the_examples_stage_removes_only_its_own_leftover_temporaries(tmp_path) -> None:
    out = tmp_path / "shards"
    (out / "seq128" / "train").mkdir(parents=True)
    kept = {
        "seq128/train/shard-000000.tar": b"a shard",
        "seq128/train/shard-000000.tar.blocks.json": b"its block table",
        "seq128/train/notes.tar.tmp-1": b"not a name the stage writes",
    }
    leftovers = [
        f"seq128/train/shard-000001.tar.tmp-{'a' * 32}",
        f"seq128/train/shard-000001.tar.blocks.json.tmp-{'c' * 32}",
        f"manifest.json.tmp-{'b' * 32}",
    ]
    for name, data in kept.items():
        (out / name).write_bytes(data)
    for name in leftovers:
        (out / name).write_bytes(b"half")
    config = ExamplesConfig(documents=("d",), vocab="v", output=str(out))
    remove_stage_leftovers(config)
    assert snapshot(out) == kept
