"""Benchmark `bertkit dedup` against datatrove's MinHash deduplication on planted duplicates.

    python -m bench.dedup --datatrove-python ENV/bin/python   # 3 interleaved repeats each
    python -m bench.dedup --install-into bench/.work           # datatrove installed there
    python -m bench.dedup --datatrove-python ENV/bin/python --repeats 1

Run from the repository root. The corpus is built from the real sample (data/), once, in
WORKDIR/out/dedup/corpus/: four documents directories, read in this order:

  wiki      the Wikipedia sample's documents (`bertkit wikipedia`)   originals, all kept
  books     the four Gutenberg books (`bertkit books`)               originals, all kept
  planted   of each Wikipedia document, by its position: an exact copy (every third), a
            copy with 1 % of its words (at least one) replaced by other words of the
            corpus (every third after the first), or nothing; alice29 copied exactly and
            lcet10 with 1 % of its words changed                       all duplicates
  editions  the four books re-wrapped, with typographic quotes and dashes, CRLF, in cp1252
            (tests/support/editions.py), through `bertkit books`     all duplicates
  related   related but unlike documents, given last so that a tool that takes them for
            duplicates removes them: of every fifth Wikipedia document, its first half
            followed by the second half of the next one (Jaccard about 1/3 with each), and
            the first 60 % of each book's sentences (Jaccard 0.6 with the book, under the
            threshold: a truncated copy is not a near duplicate by Jaccard)  all kept

Each tool runs --repeats times, interleaved, each time in a fresh child process tree
(bench.measure: user+sys CPU of the whole tree, os.wait4 checked against a /proc poll),
and so does bertkit on a directory of one document (its fixed cost: imports, Beam's start):

  bertkit    python -m pipelines.dedup --documents wiki books planted editions (its defaults:
             threshold 0.8, word 5-grams, 128 values in 12 bands of 10 rows, FnApiRunner)
  datatrove  bench/dedup_datatrove.py run by the python of your install of datatrove 0.10.1
             (--datatrove-python; or --install-into DIR: a venv DIR/datatrove of datatrove,
             xxhash < 4, regex, tokenizers, spacy, orjson, each pinned): its four steps, signatures,
             buckets, cluster, filter, at its defaults (5-grams, 14 buckets of 8 hashes), on
             the same documents as one JSONL file in the same order ({"id", "text"}: the
             sentences joined by spaces)

A planted document removed is a true positive, an original or related one removed a false
positive:
recall = planted removed / planted, precision = planted removed / removed. Targets: bertkit's
recall ≥ 0.95 and precision ≥ 0.99, and its CPU-seconds per MB of text (UTF-8 bytes of the
sentences of all five directories, 10^6) no more than datatrove's. Medians of the repeats.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import json
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds

from bench import runs, venvs
from bench.measure import (
    DEFAULT_WORKDIR,
    MB,
    REPO_ROOT,
    RunMeasurement,
    argument_parser,
    fmt,
    print_table,
    repo_python,
    verdict_word,
)
from pipelines.beam.documents import (
    DocumentFileWriter,
    UnitTally,
    build_manifest,
    finish_unit,
    read_manifest,
)
from pipelines.io.recorded_paths import record_path
from schemas import MANIFEST_NAME, Document
from schemas.duplicates import DUPLICATES_DIR, DuplicateColumn
from tests.support.editions import write_edition
from tests.support.sample import DATA_DIR

BENCHMARK = "dedup"
DIRECTORIES = ("wiki", "books", "planted", "editions", "related")
FLOOR = "floor"  # one Wikipedia document: bertkit dedup's fixed cost (imports, Beam's start)
DATATROVE_VENV = "datatrove"
# datatrove 0.10 hashes str shingles with xxhash, which takes only bytes from xxhash 4 on.
# The version docs/benchmarks.md measured (a newer one may change its defaults or its speed).
# datatrove's own pin is the measured one; the others are pinned so that --install-into
# makes the same venv each time (regex, tokenizers and orjson at constraints.txt's versions).
DATATROVE = venvs.Tool(
    name=DATATROVE_VENV,
    flag="--datatrove-python",
    what="datatrove 0.10.1",
    packages=(
        "datatrove==0.10.1",
        "xxhash==3.8.2",
        "regex==2026.11.15",
        "tokenizers==0.23.3",
        "spacy==3.8.18",
        "orjson==3.13.0",
    ),
    check_code="import importlib.metadata as m, datatrove.pipeline.dedup.minhash, spacy, orjson, "
    "xxhash; xxhash.xxh64_intdigest('a'); assert m.version('datatrove') == '0.10.1'",
)
RECALL_TARGET = 0.95
PRECISION_TARGET = 0.99
CHANGED_SHARE = 0.01
TIMEOUT_S = 1800


# --------------------------------------------------------------------------------------
# The corpus


def changed_words(document: Document, share: float, words: list[str], rng: random.Random):
    """`document` with `share` of its words (at least one) replaced by other corpus words."""
    positions = [
        (s, w)
        for s, sentence in enumerate(document.sentences)
        for w in range(len(sentence.split()))
    ]
    chosen = set(rng.sample(positions, max(1, round(share * len(positions)))))
    sentences = []
    for s, sentence in enumerate(document.sentences):
        split = sentence.split()
        sentences.append(
            " ".join(
                rng.choice(words) if (s, w) in chosen else word for w, word in enumerate(split)
            )
        )
    return sentences


def planted_documents(wiki: list[Document], books: list[Document]) -> list[Document]:
    """The planted copies (module docstring), in a fixed order from a fixed seed."""
    rng = random.Random(0)
    words = sorted({w for d in wiki for s in d.sentences for w in s.split()})
    planted = []

    def copy(document: Document, kind: str, sentences) -> Document:
        return Document(
            f"planted/{kind}/{document.id}", "planted", document.title, tuple(sentences)
        )

    for position, document in enumerate(wiki):
        if position % 3 == 0:
            planted.append(copy(document, "exact", document.sentences))
        elif position % 3 == 1:
            planted.append(
                copy(document, "near", changed_words(document, CHANGED_SHARE, words, rng))
            )
    by_id = {d.id: d for d in books}
    planted.append(copy(by_id["books/alice29"], "exact", by_id["books/alice29"].sentences))
    lcet10 = by_id["books/lcet10"]
    planted.append(copy(lcet10, "near", changed_words(lcet10, CHANGED_SHARE, words, rng)))
    return planted


def related_documents(wiki: list[Document], books: list[Document]) -> list[Document]:
    """Related but unlike documents (module docstring), to be kept, in a fixed order."""
    related = []
    for position in range(0, len(wiki) - 1, 5):
        first, second = wiki[position], wiki[position + 1]
        halves = (*first.sentences[: len(first.sentences) // 2],)
        halves += (*second.sentences[len(second.sentences) // 2 :],)
        if len(first.sentences) > 1 and len(second.sentences) > 1:
            related.append(Document(f"related/halves/{first.id}", "related", first.title, halves))
    for book in books:
        prefix = book.sentences[: len(book.sentences) * 3 // 5]
        related.append(Document(f"related/prefix/{book.id}", "related", book.title, prefix))
    return related


def read_documents(directory: Path) -> list[Document]:
    rows = ds.dataset(directory, format="parquet").to_table().to_pylist()
    return [
        Document(r["id"], r["source"], r["title"], tuple(r["sentences"]), r["url"], r["revision"])
        for r in rows
    ]


def write_documents(directory: Path, documents: list[Document]) -> None:
    """A documents directory as a documents stage writes it (one unit, then the manifest)."""
    directory.mkdir(parents=True)
    writer = DocumentFileWriter(str(directory), "00000")
    for document in documents:
        writer.add(document)
    summary = finish_unit(str(directory), UnitTally("00000"), writer.close())
    manifest = build_manifest("planted", [], {"changed_share": CHANGED_SHARE}, [summary])
    (directory / MANIFEST_NAME).write_text(manifest.to_json())


def build_corpus(corpus: Path) -> None:
    """The four documents directories, the JSONL copy for datatrove and the floor's
    one-document directory, unless built."""
    if not (corpus / "documents.jsonl").exists() or not (corpus / "related").exists():
        build_documents(corpus)
    if not (corpus / FLOOR).exists():
        write_documents(corpus / FLOOR, read_documents(corpus / "wiki")[:1])


def build_documents(corpus: Path) -> None:
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir(parents=True)
    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    stage = [repo_python(), "-m"]
    run = lambda *args: subprocess.run([*stage, *args], cwd=REPO_ROOT, check=True)  # noqa: E731
    run("pipelines.wikipedia", "--input", str(dump), "--output", str(corpus / "wiki"))
    run(
        "pipelines.books",
        "--input",
        str(DATA_DIR / "books" / "*.txt"),
        "--output",
        str(corpus / "books"),
    )
    (corpus / "edition-files").mkdir()
    for book in sorted((DATA_DIR / "books").glob("*.txt")):
        write_edition(book, corpus / "edition-files" / book.name)
    editions = str(corpus / "edition-files" / "*.txt")
    run("pipelines.books", "--input", editions, "--output", str(corpus / "editions"))
    wiki, books = read_documents(corpus / "wiki"), read_documents(corpus / "books")
    write_documents(corpus / "planted", planted_documents(wiki, books))
    write_documents(corpus / "related", related_documents(wiki, books))
    with (corpus / "documents.jsonl.tmp").open("w", encoding="utf-8") as sink:
        for name in DIRECTORIES:
            for document in read_documents(corpus / name):
                record = {"id": f"{name}:{document.id}", "text": " ".join(document.sentences)}
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
    (corpus / "documents.jsonl.tmp").rename(corpus / "documents.jsonl")


def corpus_truth(corpus: Path) -> tuple[set[str], set[str]]:
    """(every document as "directory:id", the planted ones)."""
    every, planted = set(), set()
    for name in DIRECTORIES:
        for document in read_documents(corpus / name):
            every.add(f"{name}:{document.id}")
            if name in ("planted", "editions"):
                planted.add(f"{name}:{document.id}")
    return every, planted


def text_mb(corpus: Path) -> float:
    return sum(read_manifest(str(corpus / n)).counts["text_bytes"] for n in DIRECTORIES) / MB


# --------------------------------------------------------------------------------------
# The tools and their results


def bertkit_removed(output: Path, corpus: Path) -> set[str]:
    # Each input as the report names it: as its manifest's inputs[].path, relative to it.
    names = {record_path(str(corpus / n), str(output)): n for n in DIRECTORIES}
    columns = [DuplicateColumn.ID, DuplicateColumn.INPUT]
    table = ds.dataset(output / DUPLICATES_DIR, format="parquet").to_table(columns=columns)
    return {f"{names[i]}:{d}" for d, i in zip(*table.to_pydict().values(), strict=True)}


def datatrove_removed(output: Path) -> set[str]:
    removed = set()
    for path in sorted((output / "removed").glob("*.jsonl")):
        removed |= {json.loads(line)["id"] for line in path.read_text("utf-8").splitlines()}
    return removed


def quality(removed: set[str], planted: set[str]) -> tuple[float, float]:
    """(recall, precision) of the removed documents against the planted ones."""
    found = len(removed & planted)
    return found / len(planted), (found / len(removed) if removed else 1.0)


def commands(
    workdir: Path, corpus: Path, datatrove_python: str
) -> dict[str, tuple[list[str], Path]]:
    out = workdir / "out" / BENCHMARK
    bertkit = [repo_python(), "-m", "pipelines.dedup", "--documents"]
    bertkit += [str(corpus / n) for n in DIRECTORIES] + ["--output", str(out / "bertkit")]
    script = str(REPO_ROOT / "bench" / "dedup_datatrove.py")
    datatrove = [datatrove_python, script, str(corpus / "documents.jsonl"), str(out / "datatrove")]
    floor = [repo_python(), "-m", "pipelines.dedup", "--documents", str(corpus / FLOOR)]
    floor += ["--output", str(out / "bertkit-floor")]
    return {
        "bertkit": (bertkit, out / "bertkit"),
        "datatrove": (datatrove, out / "datatrove"),
        FLOOR: (floor, out / "bertkit-floor"),
    }


def measure_interleaved(
    workdir: Path, tools: dict[str, tuple[list[str], Path]], repeats: int
) -> dict[str, list[RunMeasurement]]:
    measured: dict[str, list[RunMeasurement]] = {tool: [] for tool in tools}
    for repeat in range(1, repeats + 1):
        for tool, (command, output) in tools.items():
            log = runs.log_path(workdir, BENCHMARK, tool, repeat)
            run = runs.run_fresh(command, REPO_ROOT, output, log, TIMEOUT_S)
            problem = runs.failure(run)
            line = f"  {tool:9s} r{repeat}  cpu {run.cpu_s:6.2f} s  wall {run.wall_s:6.2f} s"
            runs.print_run(line + (f"  {problem}" if problem else ""), run)
            if problem:
                raise SystemExit(f"{tool} failed: {problem}")
            measured[tool].append(run)
    return measured


def report(
    measured: dict[str, list[RunMeasurement]],
    scores: dict[str, tuple[float, float]],
    megabytes: float,
) -> dict[str, dict[str, float]]:
    rows, figures = [], {}
    for tool, tool_runs in measured.items():
        cpu = statistics.median(r.cpu_s for r in tool_runs)
        wall = statistics.median(r.wall_s for r in tool_runs)
        rss = statistics.median(r.peak_rss_mib for r in tool_runs)
        figures[tool] = {"cpu_s": cpu, "wall_s": wall, "peak_rss_mib": rss}
        if tool == FLOOR:
            cells = ["bertkit, 1 document", "", "", fmt(cpu, ".2f"), ""]
        else:
            recall, precision = scores[tool]
            figures[tool] |= {"cpu_s_per_mb": cpu / megabytes}
            figures[tool] |= {"recall": recall, "precision": precision}
            cells = [tool, f"{recall:.3f}", f"{precision:.3f}", fmt(cpu, ".2f")]
            cells.append(fmt(cpu / megabytes, ".3f"))
        rows.append([*cells, fmt(wall, ".2f"), fmt(rss, ".0f")])
    headers = ["tool", "recall", "precision", "CPU s", "CPU s/MB", "wall s", "peak RSS MiB"]
    print_table(headers, rows)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.dedup", __doc__)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each tool (default 3)")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    venvs.add_tool_arguments(parser, DATATROVE)
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    command = "python -m bench.dedup"
    datatrove_python = venvs.tool_python(
        command, DATATROVE, args.datatrove_python, args.install_into
    )
    corpus = workdir / "out" / BENCHMARK / "corpus"
    build_corpus(corpus)
    every, planted = corpus_truth(corpus)
    megabytes = text_mb(corpus)
    print(
        f"corpus: {len(every)} documents, {len(planted)} planted duplicates, "
        f"{megabytes:.2f} MB of text"
    )
    tools = commands(workdir, corpus, datatrove_python)
    measured = measure_interleaved(workdir, tools, args.repeats)
    scores = {
        "bertkit": quality(bertkit_removed(tools["bertkit"][1], corpus), planted),
        "datatrove": quality(datatrove_removed(tools["datatrove"][1]), planted),
    }
    figures = report(measured, scores, megabytes)
    bertkit, datatrove = figures["bertkit"], figures["datatrove"]
    met = {
        f"recall ≥ {RECALL_TARGET}": bertkit["recall"] >= RECALL_TARGET,
        f"precision ≥ {PRECISION_TARGET}": bertkit["precision"] >= PRECISION_TARGET,
        "CPU s/MB ≤ datatrove's": bertkit["cpu_s_per_mb"] <= datatrove["cpu_s_per_mb"],
    }
    above_floor = (bertkit["cpu_s"] - figures[FLOOR]["cpu_s"]) / megabytes
    ratio = datatrove["cpu_s_per_mb"] / max(bertkit["cpu_s_per_mb"], 1e-9)
    print(f"bertkit: {ratio:.1f}x fewer CPU s per MB than datatrove (medians)")
    print(f"bertkit above its fixed cost (the 1-document run): {above_floor:.3f} CPU s/MB")
    for target, ok in met.items():
        print(f"bertkit {target}: {verdict_word(True, ok)}")
    results = {"text_mb": megabytes, "documents": len(every), "planted": len(planted)}
    results |= {"repeats": args.repeats, "tools": figures}
    (workdir / "dedup-results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
