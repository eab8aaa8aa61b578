"""bertkit dedup: normalisation, shingles and signatures, the LSH bands, the bucket edges, the
stage on literal documents (exact, near, unlike, chains, across directories, the report and
the manifest, determinism), its refusals, and the real sample's books."""

from __future__ import annotations

import hashlib
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to
from rensa import RMinHash

from pipelines import books, dedup, examples, vocab
from pipelines.beam.documents import read_documents_input, read_manifest
from pipelines.beam.files import OutputDirectoryError
from pipelines.dedup import (
    DedupConfig,
    DedupError,
    DeduplicateDocuments,
    Member,
    band_keys,
    candidate_probability,
    choose_bands,
    error_areas,
    exact_edges,
    exact_key,
    near_edges,
    normalised_words,
    plan_units,
    shingles,
    signature,
    similarity,
)
from schemas import Document, DocumentsManifest, OutputFile, documents_table
from schemas.duplicates import DUPLICATE_SCHEMA
from tests.support.editions import write_edition

SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "te",
    "vo",
    "zi",
    "pa",
    "do",
    "fe",
    "gu",
    "hi",
    "ja",
    "ko",
    "lu",
    "ma",
    "ni",
    "po",
]
WORDS = [a + b for a in SYLLABLES for b in SYLLABLES]  # 400 made-up words


def text(seed: int, length: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(length)]


def changed(words: list[str], every: int, offset: int = 0) -> list[str]:
    """`words` with every `every`-th word (from `offset`) replaced by one not in WORDS."""
    return [f"x{i}" if i % every == offset else w for i, w in enumerate(words)]


def document(doc_id: str, words: list[str], per_sentence: int = 10) -> Document:
    sentences = [
        " ".join(words[i : i + per_sentence]).capitalize() + "."
        for i in range(0, len(words), per_sentence)
    ]
    return Document(
        id=doc_id, source=doc_id.split("/")[0], title=doc_id, sentences=tuple(sentences)
    )


def write_documents_dir(directory: Path, files: list[list[Document]]) -> Path:
    """A documents directory as a documents stage leaves it: files, then the manifest."""
    directory.mkdir(parents=True)
    outputs = []
    for number, documents in enumerate(files):
        path = directory / f"documents-{number:05d}-0000.parquet"
        pq.write_table(documents_table(documents), path, compression="zstd")
        data = path.read_bytes()
        outputs.append(
            OutputFile(
                name=path.name,
                documents=len(documents),
                sentences=sum(len(d.sentences) for d in documents),
                text_bytes=sum(d.text_bytes() for d in documents),
                bytes=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        )
    manifest = DocumentsManifest(
        stage="books",
        inputs=[],
        config={},
        counts={
            "documents": sum(o.documents for o in outputs),
            "sentences": sum(o.sentences for o in outputs),
            "text_bytes": sum(o.text_bytes for o in outputs),
        },
        dropped={},
        rejected={},
        failed_inputs=[],
        files=outputs,
    )
    (directory / "_manifest.json").write_text(manifest.to_json())
    return directory


def kept_ids(directory: Path) -> list[str]:
    return ds.dataset(directory, format="parquet").to_table(columns=["id"]).column("id").to_pylist()


def duplicates(directory: Path) -> list[dict]:
    rows = []
    for path in sorted((directory / "_duplicates").glob("*.parquet")):
        table = pq.read_table(path)
        assert table.schema.equals(DUPLICATE_SCHEMA, check_metadata=True)
        rows += table.to_pylist()
    return rows


def run_dedup(output: Path, *documents: Path, flags: tuple[str, ...] = (), **kwargs) -> int:
    argv = ["--documents", *map(str, documents), "--output", str(output), *flags]
    return dedup.run(argv, **kwargs)


# ---------------------------------------------------------------------------------------
# Beam-free pieces


def test_normalised_words_fold_case_width_quotes_dashes_and_spaces() -> None:
    words = normalised_words(["Don’t  STOP—now!", "“Ｆｕｌｌ”\twidth ﬁne,", "don't"])
    assert words == ["dont", "stopnow", "full", "width", "fine", "dont"]
    # A text of symbols only keeps them: it is the same as another only where they are.
    assert normalised_words(["…", " -- "]) == ["...", "--"]
    assert normalised_words(["∑ ∫ ≤"]) != normalised_words(["🚀 🌍 ✨"])
    # Combining marks are part of their letters (\w leaves them out): the boy and the girl
    # go to school, two texts; punctuation between digits is a space, not nothing.
    assert normalised_words(["लड़का रोज़ स्कूल जाता है।"]) == ["लड़का", "रोज़", "स्कूल", "जाता", "है"]
    assert normalised_words(["लड़की रोज़ स्कूल जाती है।"]) == ["लड़की", "रोज़", "स्कूल", "जाती", "है"]
    assert normalised_words(["Final score: 3-10."]) == ["final", "score", "3", "10"]
    assert normalised_words(["Final score: 31-0."]) == ["final", "score", "31", "0"]
    assert exact_key(normalised_words(["The cat sat."])) == exact_key(["the", "cat", "sat"])
    assert exact_key(["the", "cat"]) != exact_key(["thecat"])
    assert len(exact_key([])) == 16


def test_shingles_are_word_ngrams_and_short_documents_one_shingle() -> None:
    assert shingles(["a", "b", "c", "d"], 2) == ["a b", "b c", "c d"]
    assert shingles(["a", "b"], 5) == ["a b"]
    assert shingles([], 5) == []


def test_signatures_are_rensas_and_the_same_in_another_process() -> None:
    words = text(1)
    ours = signature(words, 5, 128, 7)
    minhash = RMinHash(128, 7)
    minhash.update(shingles(words, 5))
    assert ours == b"".join(v.to_bytes(4, "little") for v in minhash.digest())
    code = (
        "import sys; from pipelines.dedup import signature; "
        f"sys.stdout.write(signature({words!r}, 5, 128, 7).hex())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout == ours.hex()
    assert signature([], 5, 128, 7) is None
    near = changed(words, 100)
    other_minhash = RMinHash(128, 7)
    other_minhash.update(shingles(near, 5))
    assert similarity(ours, signature(near, 5, 128, 7)) == minhash.jaccard(other_minhash)
    with pytest.raises(ValueError, match="cannot be compared"):
        similarity(ours, ours[:64])


def test_bands_minimise_the_error_areas_as_datasketch_chooses_them() -> None:
    # datasketch's MinHashLSH(threshold, num_perm) picks these with its weights (0.5, 0.5).
    assert choose_bands(0.8, 128, 0.5, 0.5) == (9, 13)
    assert choose_bands(0.5, 128, 0.5, 0.5) == (25, 5)
    assert choose_bands(0.9, 128, 0.5, 0.5) == (5, 25)
    # bertkit weighs a missed pair 0.8 (datasketch's weights=(0.2, 0.8) give the same).
    assert choose_bands(0.8, 128) == (12, 10)
    bands, rows = choose_bands(0.7, 64)
    best = 0.2 * error_areas(0.7, bands, rows)[0] + 0.8 * error_areas(0.7, bands, rows)[1]
    for b in range(1, 65):
        for r in range(1, 64 // b + 1):
            false_positive, false_negative = error_areas(0.7, b, r)
            assert 0.2 * false_positive + 0.8 * false_negative >= best
    # The S-curve: a pair at 0.9 almost always meets, at 0.5 seldom.
    assert round(candidate_probability(0.9, 12, 10), 3) == 0.994
    assert round(candidate_probability(0.85, 12, 10), 3) == 0.928
    assert round(candidate_probability(0.5, 12, 10), 3) == 0.012
    with pytest.raises(ValueError, match="threshold"):
        choose_bands(0.0, 128)


def test_band_keys_are_equal_exactly_when_bands_are() -> None:
    first = signature(text(1), 5, 128, 1)
    second = bytearray(first)
    second[0] ^= 1  # band 0 differs, every other band is equal
    keys_1, keys_2 = band_keys(first, 12, 10), band_keys(bytes(second), 12, 10)
    assert len(keys_1) == 12 and keys_1[0] != keys_2[0] and keys_1[1:] == keys_2[1:]
    assert keys_1[3][:2] == b"\x00\x03" and len(keys_1[3]) == 10


def member(row: int, words: list[str], directory: int = 0) -> Member:
    return Member(directory, 0, row, f"t/{row}", "t", signature(words, 5, 128, 1))


def test_exact_edges_point_at_the_earliest_member() -> None:
    bucket = [Member(1, 0, 0, "b", "s"), Member(0, 2, 5, "a", "s"), Member(0, 3, 0, "c", "s")]
    edges = sorted(exact_edges(bucket))
    assert [(p, e.id, e.rank, e.similarity) for p, e in edges] == [
        ((0, 3, 0), "a", 0, 1.0),
        ((1, 0, 0), "a", 0, 1.0),
    ]


def test_near_edges_verify_and_keep_a_chain_of_unlike_documents() -> None:
    base = text(3, 1000)
    a, b = changed(base, 67, 0), changed(base, 67, 33)  # each ~0.86 like base, ~0.74 alike
    assert similarity(member(0, a).signature, member(1, b).signature) < 0.8
    # A and B before C: only C goes, as a duplicate of A (the earliest it is like).
    edges = list(near_edges([member(2, base), member(0, a), member(1, b)], 0.8))
    assert [(p, e.id) for p, e in edges] == [((0, 0, 2), "t/0")]
    # C first: A and B both go. A before B before C, A unlike C: B goes for A, C for B.
    edges = sorted(near_edges([member(0, base), member(1, a), member(2, b)], 0.8))
    assert [(p, e.id) for p, e in edges] == [((0, 0, 1), "t/0"), ((0, 0, 2), "t/0")]
    edges = sorted(near_edges([member(0, a), member(1, base), member(2, b)], 0.8))
    assert [(p, e.id) for p, e in edges] == [((0, 0, 1), "t/0"), ((0, 0, 2), "t/1")]
    # An unlike member of the bucket (a band shared by chance) gets no edge.
    assert list(near_edges([member(0, text(4)), member(1, text(5))], 0.8)) == []
    assert list(near_edges([member(0, base)], 0.8)) == []


# ---------------------------------------------------------------------------------------
# The stage on literal documents

BASE_A, BASE_B, BASE_C, BASE_E = text(10), text(11), text(12), text(13)
SHOUTED_A = " ".join(BASE_A).upper().replace(" ", "  \t", 7)  # case, spaces, one sentence


def literal_inputs(root: Path) -> tuple[Path, Path]:
    """Two directories: the first, two files; the second, a copy of a document of the first."""
    first = write_documents_dir(
        root / "first",
        [
            [
                document("wiki/a", BASE_A),
                document("wiki/b", BASE_B),
                Document("wiki/a-shouted", "wiki", "A", (SHOUTED_A + "!",)),
                document("wiki/c", BASE_C),
            ],
            [
                document("wiki/b-near", changed(BASE_B, 100, 50)),  # 1 % of the words
                document("wiki/a-unlike", changed(BASE_A, 34, 17)),  # ~0.74 like A: kept
            ],
        ],
    )
    second = write_documents_dir(
        root / "second",
        [[document("books/a-again", BASE_A, per_sentence=7), document("books/e", BASE_E)]],
    )
    return first, second


def expected_similarity(first: list[str], second: list[str]) -> float:
    return similarity(signature(first, 5, 128, 1), signature(second, 5, 128, 1))


def test_exact_near_and_cross_directory_duplicates_go_and_the_earliest_copy_stays(
    tmp_path: Path,
) -> None:
    first, second = literal_inputs(tmp_path)
    out = tmp_path / "out"
    assert run_dedup(out, first, second) == 0
    assert kept_ids(out) == ["wiki/a", "wiki/b", "wiki/c", "wiki/a-unlike", "books/e"]
    assert sorted(p.name for p in out.glob("documents-*")) == [
        "documents-000-00000-0000.parquet",
        "documents-000-00001-0000.parquet",
        "documents-001-00000-0000.parquet",
    ]
    near = expected_similarity(changed(BASE_B, 100, 50), BASE_B)
    assert 0.85 < near < 0.95
    assert duplicates(out) == [
        {
            "id": "wiki/a-shouted",
            "source": "wiki",
            "input": f"../{first.name}",
            "duplicate_of": "wiki/a",
            "duplicate_of_source": "wiki",
            "duplicate_of_input": f"../{first.name}",
            "kind": "exact_duplicate",
            "similarity": 1.0,
        },
        {
            "id": "wiki/b-near",
            "source": "wiki",
            "input": f"../{first.name}",
            "duplicate_of": "wiki/b",
            "duplicate_of_source": "wiki",
            "duplicate_of_input": f"../{first.name}",
            "kind": "near_duplicate",
            "similarity": near,
        },
        {
            "id": "books/a-again",
            "source": "books",
            "input": f"../{second.name}",
            "duplicate_of": "wiki/a",
            "duplicate_of_source": "wiki",
            "duplicate_of_input": f"../{first.name}",
            "kind": "exact_duplicate",
            "similarity": 1.0,
        },
    ]
    assert expected_similarity(changed(BASE_A, 34, 17), BASE_A) < 0.8
    manifest = read_manifest(str(out))
    assert manifest.stage == "dedup"
    assert manifest.dropped == {"exact_duplicate": 2, "near_duplicate": 1}
    assert {k: v for k, v in manifest.counts.items() if k != "text_bytes"} == {
        "documents": 5,
        "files": 3,
        "input_documents": 8,
        "rejected": 0,
        "sentences": 200,
        "units": 3,
    }
    assert manifest.counts["text_bytes"] == sum(f.text_bytes for f in manifest.files)
    # Recorded relative to the dedup directory (docs/formats.md, "Paths between artifacts").
    assert [(i["path"], i["documents"]) for i in manifest.inputs] == [
        ("../first", 6),
        ("../second", 2),
    ]
    assert (
        manifest.inputs[0]["manifest_sha256"]
        == hashlib.sha256((first / "_manifest.json").read_bytes()).hexdigest()
    )
    assert manifest.config["bands"] == 12 and manifest.config["rows"] == 10
    assert manifest.config["duplicates_files"] == [
        "_duplicates/duplicates-000-00000.parquet",
        "_duplicates/duplicates-000-00001.parquet",
        "_duplicates/duplicates-001-00000.parquet",
    ]
    # The later directory first: its copy of A is the one kept.
    swapped = tmp_path / "swapped"
    assert run_dedup(swapped, second, first) == 0
    assert kept_ids(swapped) == ["books/a-again", "books/e", "wiki/b", "wiki/c", "wiki/a-unlike"]
    assert [(r["id"], r["duplicate_of"]) for r in duplicates(swapped)] == [
        ("wiki/a", "books/a-again"),
        ("wiki/a-shouted", "books/a-again"),
        ("wiki/b-near", "wiki/b"),
    ]


def test_deduplicate_documents_transform(tmp_path: Path, test_pipeline) -> None:
    first, second = literal_inputs(tmp_path)
    inputs = [read_documents_input(str(d)) for d in (first, second)]
    out = str(tmp_path / "out")
    config = DedupConfig(documents=(str(first), str(second)), output=out)
    with test_pipeline as pipeline:
        summaries = pipeline | DeduplicateDocuments(inputs, plan_units(inputs), out, config)
        assert_that(
            summaries | beam.Map(lambda s: (s["unit"], s["counts"]["documents"], s["dropped"])),
            equal_to(
                [
                    ("000-00000", 3, {"exact_duplicate": 1, "near_duplicate": 0}),
                    ("000-00001", 1, {"exact_duplicate": 0, "near_duplicate": 1}),
                    ("001-00000", 1, {"exact_duplicate": 1, "near_duplicate": 0}),
                ]
            ),
        )


def test_a_chain_removes_only_what_is_like_an_earlier_document(tmp_path: Path) -> None:
    base = text(3, 1000)
    a, b = changed(base, 67, 0), changed(base, 67, 33)
    unlike = tmp_path / "ab-then-c"
    write_documents_dir(unlike, [[document("t/a", a), document("t/b", b), document("t/c", base)]])
    out = tmp_path / "out"
    assert run_dedup(out, unlike) == 0
    assert kept_ids(out) == ["t/a", "t/b"]
    assert [(r["id"], r["duplicate_of"]) for r in duplicates(out)] == [("t/c", "t/a")]
    chain = tmp_path / "a-c-b"
    write_documents_dir(chain, [[document("t/a", a), document("t/c", base), document("t/b", b)]])
    assert run_dedup(tmp_path / "out-chain", chain) == 0
    assert kept_ids(tmp_path / "out-chain") == ["t/a"]
    assert [(r["id"], r["duplicate_of"]) for r in duplicates(tmp_path / "out-chain")] == [
        ("t/c", "t/a"),
        ("t/b", "t/c"),
    ]


def output_bytes(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_same_bytes_with_two_workers_and_units_in_another_order(tmp_path: Path) -> None:
    first, second = literal_inputs(tmp_path)
    one, two, shuffled = tmp_path / "one", tmp_path / "two", tmp_path / "shuffled"
    assert run_dedup(one, first, second, flags=("--direct_num_workers", "1")) == 0
    workers = ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing")
    assert run_dedup(two, first, second, flags=workers) == 0
    units = plan_units([read_documents_input(str(d)) for d in (first, second)])
    assert run_dedup(shuffled, first, second, units_order=units[::-1]) == 0
    expected = output_bytes(one)
    assert len(expected) == 7  # 3 documents files, 3 duplicates files, the manifest
    assert output_bytes(two) == expected
    assert output_bytes(shuffled) == expected
    # Another working directory and other spellings of the same places: the same bytes
    # (the duplicates' `input` columns once held the directories as typed).
    respelled = tmp_path / "respelled"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(first.parent)
        assert run_dedup(Path(respelled.name), f"{first.name}/", second.name) == 0
    assert output_bytes(respelled) == expected


def test_refusals_before_any_work(tmp_path: Path, capsys) -> None:
    first, _ = literal_inputs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    for flags in ((), ("--overwrite",)):
        with pytest.raises(OutputDirectoryError, match=r"notes\.txt.*does not write"):
            run_dedup(out, first, flags=flags)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    (out / "notes.txt").unlink()
    assert run_dedup(out, first) == 0
    with pytest.raises(OutputDirectoryError, match="--overwrite"):
        run_dedup(out, first)
    assert run_dedup(out, first, flags=("--overwrite",)) == 0  # its own _duplicates/ too
    # Another stage's documents directory has names like dedup's: its manifest tells.
    _, second = literal_inputs(tmp_path / "again")
    before = output_bytes(second)
    with pytest.raises(OutputDirectoryError, match="written by `bertkit books`"):
        run_dedup(second, first, flags=("--overwrite",))
    assert output_bytes(second) == before
    with pytest.raises(DedupError, match="given twice"):
        run_dedup(tmp_path / "twice", first, first)
    with pytest.raises(SystemExit) as exit_info:
        dedup.main(["--documents", str(tmp_path / "none"), "--output", str(tmp_path / "o")])
    assert exit_info.value.code == 2
    assert "is empty or does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_dedup(tmp_path / "o", first, flags=("--threshold", "1.5"))
    assert "--threshold 1.5: must be in (0, 1]" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# The real sample


def test_real_books_and_another_edition_of_them_keep_one_copy_each_and_feed_vocab_and_examples(
    tmp_path: Path, books_dir: Path
) -> None:
    (tmp_path / "edition").mkdir()
    for book in sorted(books_dir.glob("*.txt")):
        write_edition(book, tmp_path / "edition" / book.name)
    originals, editions = tmp_path / "books", tmp_path / "editions"
    assert books.run(["--input", str(books_dir / "*.txt"), "--output", str(originals)]) == 0
    edition_glob = str(tmp_path / "edition" / "*.txt")
    assert books.run(["--input", edition_glob, "--output", str(editions)]) == 0
    # The editions are cp1252, re-wrapped, with other quotes and dashes: other sentences.
    assert read_manifest(str(editions)).counts["decoded_with_fallback"] == 4
    assert read_manifest(str(editions)).counts["sentences"] == 6365  # the originals: 6,340
    out = tmp_path / "dedup"
    assert run_dedup(out, originals, editions) == 0
    ids = ["books/alice29", "books/asyoulik", "books/lcet10", "books/plrabn12"]
    assert kept_ids(out) == ids
    report = duplicates(out)
    assert [(r["id"], r["duplicate_of"], r["kind"]) for r in report] == [
        (i, i, "near_duplicate") for i in ids
    ]
    assert {r["input"] for r in report} == {"../editions"}
    assert min(r["similarity"] for r in report) > 0.95
    manifest = read_manifest(str(out))
    assert manifest.dropped == {"exact_duplicate": 0, "near_duplicate": 4}
    assert manifest.counts["documents"] == 4 and manifest.counts["sentences"] == 6340
    # The next stages take the output as any documents directory.
    vocabulary = tmp_path / "vocab"
    assert (
        vocab.run(["--documents", str(out), "--output", str(vocabulary), "--vocab-size", "1000"])
        == 0
    )
    shards = tmp_path / "shards"
    flags = ["--max-seq-length", "64", "--dupe-factor", "1", "--samples-per-shard", "20000"]
    assert (
        examples.run(
            ["--documents", str(out), "--vocab", str(vocabulary), "--output", str(shards), *flags]
        )
        == 0
    )
    shards_manifest = json.loads((shards / "manifest.json").read_text())
    assert shards_manifest["counts"]["documents"] == 4
    # The dataset card takes the licence from the books directories dedup read.
    card = (shards / "README.md").read_text()
    assert "license:\n- other\nlicense_name: public-domain\n" in card
    assert f"bertkit books --input {books_dir / 'alice29.txt'} " in card
    flat = re.sub(r" \\\n +", " ", card)  # the card wraps long commands
    assert (
        f"--output {editions}\nbertkit dedup --documents {originals} {editions} --output {out}\n"
        in flat
    )
