"""The vocabulary stage: Google FullTokenizer semantics, the sample, repeatability, loading.

Tokenization is checked with exact values on a tiny hand-written vocab.txt, built through
the same `build_tokenizer` that writes tokenizer.json. Training runs on the real sample
(97 Wikipedia articles and 4 books, 3.6 MB of text), with a 2000-token vocabulary to stay fast.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bertkit import cli
from pipelines import vocab
from pipelines.beam import files
from pipelines.beam.documents import DocumentsInputError
from pipelines.io.vocabulary import (
    VocabError,
    Vocabulary,
    build_tokenizer,
    load_vocab,
    load_vocab_txt,
)
from pipelines.text.wordpiece import choose_alphabet, count_words
from pipelines.vocab import (
    SamplePlan,
    continuation_alphabet,
    document_hash,
    iter_sample_texts,
)
from schemas.manifest import MANIFEST_NAME
from schemas.vocab import (
    TOKENIZER_FILE,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    WORD_COUNTS_DIR,
    WORD_COUNTS_SCHEMA,
)
from tests.conftest import s3_flags

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
PROJECT_ROOT = DATA_DIR.parent
SAMPLE_TEXT_BYTES = 2_515_963 + 1_064_514  # Wikipedia + books, from their manifests

# Google's test vocabulary (tokenization_test.py) and a few more pieces.
TINY_VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "un",
    "##want",
    "##ed",
    "wa",
    "runn",
    "##ing",
    ",",
    "##aff",
    "##able",
    "low",
    "lowest",
    "hello",
    "don",
    "'",
    "t",
    "中",
    "国",
    "!",
    "[",
    "]",
    "mask",
    "a",
    "##a",
]
TINY_CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Héllo", "hello", "H", "##é"]


def tiny_vocab(tmp_path: Path, tokens: list[str], cased: bool = False) -> Vocabulary:
    path = tmp_path / ("cased" if cased else "uncased") / VOCAB_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    return load_vocab_txt(str(path), cased=cased)


def tokens_of(vocabulary: Vocabulary, text: str) -> list[str]:
    return vocabulary.tokenizer.encode(text, add_special_tokens=False).tokens


# --- FullTokenizer semantics, exact values ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Google's own test: lower-case, strip the accent, split the comma, greedy pieces.
        ("UNwant\u00e9d,running", ["un", "##want", "##ed", ",", "runn", "##ing"]),
        ("unaffable", ["un", "##aff", "##able"]),  # longest match first, from the left
        ("don't", ["don", "'", "t"]),  # punctuation is a word of its own
        ("中国!", ["中", "国", "!"]),  # CJK characters are split one by one
        ("Héllo", ["hello"]),  # uncased: accents stripped after lower-casing
        ("he\x00l\ufffdlo\x07", ["hello"]),  # NUL, U+FFFD and control characters removed
        ("\thello\n  low\u3000lowest", ["hello", "low", "lowest"]),  # any Unicode space splits
        ("unwantedx", ["[UNK]"]),  # no piece for "x": the whole word is [UNK], not "un ##want …"
        ("[MASK] mask", ["[", "mask", "]", "mask"]),  # a special token typed in text is text
    ],
)
def test_uncased_tokenization_follows_google(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    assert tokens_of(tiny_vocab(tmp_path, TINY_VOCAB), text) == expected


def test_cased_keeps_case_and_accents(tmp_path: Path) -> None:
    cased = tiny_vocab(tmp_path, TINY_CASED_VOCAB, cased=True)
    assert tokens_of(cased, "Héllo hello") == ["Héllo", "hello"]
    assert tokens_of(cased, "Hé") == ["H", "##é"]
    assert tokens_of(cased, "HELLO") == ["[UNK]"]  # no lower-casing when cased
    assert tokens_of(tiny_vocab(tmp_path, TINY_CASED_VOCAB), "Héllo") == ["hello"]


def test_words_over_200_characters_are_one_unk(tmp_path: Path) -> None:
    tiny = tiny_vocab(tmp_path, TINY_VOCAB)
    assert tokens_of(tiny, "a" * 200) == ["a"] + ["##a"] * 199
    assert tokens_of(tiny, "a" * 201) == ["[UNK]"]
    assert tokens_of(tiny, f"low {'a' * 201} low") == ["low", "[UNK]", "low"]


def test_ids_pairs_and_decoding(tmp_path: Path) -> None:
    tiny = tiny_vocab(tmp_path, TINY_VOCAB)
    assert tiny.tokenizer.encode("unaffable", add_special_tokens=False).ids == [5, 12, 13]
    pair = tiny.tokenizer.encode("hello", "lowest!")
    assert pair.tokens == ["[CLS]", "hello", "[SEP]", "lowest", "!", "[SEP]"]
    assert pair.ids == [2, 16, 3, 15, 22, 3]
    assert pair.type_ids == [0, 0, 0, 1, 1, 1]
    assert tiny.tokenizer.decode(pair.ids) == "hello lowest!"
    assert tiny.tokenizer.decode([5, 12, 13, 14]) == "unaffable low"


def test_vocabulary_fields(tmp_path: Path) -> None:
    tiny = tiny_vocab(
        tmp_path,
        [
            "[PAD]",
            "[unused0]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            "[unused1]",
            "a",
            "##b",
            "ab",
            "##",
        ],
    )
    assert (tiny.pad_id, tiny.unk_id, tiny.cls_id, tiny.sep_id, tiny.mask_id) == (0, 2, 3, 4, 5)
    assert tiny.special_ids == frozenset({0, 1, 2, 3, 4, 5, 6})
    assert tiny.replaceable_ids.tolist() == [7, 8, 9, 10]
    assert tiny.is_continuation.tolist() == [False] * 8 + [True, False, False]
    assert tiny.size == 11 and not tiny.cased and tiny.metadata.num_unused == 2


def test_build_tokenizer_refuses_a_vocabulary_without_specials() -> None:
    with pytest.raises(VocabError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        build_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], cased=False)
    with pytest.raises(VocabError, match="'a' appears twice"):
        build_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"], cased=False)


# --- The alphabet ---------------------------------------------------------------------------


def test_alphabet_is_normalised_and_ties_break_by_character() -> None:
    text = ["A A A a a \u00c9 b c", "\x00" * 9 + "\u3000" * 4]
    # Uncased: a 5, e 1 (É → e), b 1, c 1; spaces and NUL are not characters of any word.
    assert choose_alphabet(count_words([text], cased=False), limit=3) == ["a", "b", "c"]
    assert choose_alphabet(count_words([text], cased=True), limit=3) == ["A", "a", "b"]
    assert choose_alphabet(count_words([text], cased=True), limit=10) == [
        "A",
        "a",
        "b",
        "c",
        "\u00c9",
    ]


def test_only_characters_that_can_continue_a_word_get_a_continuation_piece() -> None:
    assert continuation_alphabet(["'", ".", "a", "é", "中", "ß"], cased=False) == ["a", "é", "ß"]


# --- The sample -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def documents_dirs(sample_documents) -> tuple[str, str]:
    """The real sample extracted once (conftest): 97 Wikipedia documents and 4 books."""
    return tuple(str(d) for d in sample_documents)


def test_document_hash_is_pinned() -> None:
    # The sample recipe is part of the vocabulary's identity: these must never change.
    assert document_hash(0, "enwiki/12") == 0.9099144234287276
    assert document_hash(1, "enwiki/12") == 0.7924502047242048


def sampled_ids(plan: SamplePlan) -> list[str]:
    """The ids of the documents the plan keeps, in unit order (what the workers count)."""
    kept = []
    for _, path in plan.units():
        with files.open_raw(path) as f:
            ids = pq.read_table(f, columns=["id"]).column("id").to_pylist()
        kept += [i for i in ids if plan.keeps(i)]
    return kept


def test_sample_is_repeatable_and_about_sample_mb(documents_dirs) -> None:
    plan = SamplePlan.open(documents_dirs, 1.0, seed=0)
    first = sampled_ids(plan)
    assert sampled_ids(SamplePlan.open(documents_dirs[::-1], 1.0, 0)) == first  # flag order
    assert sampled_ids(SamplePlan.open(documents_dirs, 1.0, 1)) != first
    assert plan.total_text_bytes == SAMPLE_TEXT_BYTES
    assert plan.fraction == pytest.approx(2**20 / SAMPLE_TEXT_BYTES)
    # Kept by the coin alone: 29.3 % of 101 documents expected; with seed 0, 34 documents
    # and 944,203 bytes of text (0.90 MiB: about --sample-mb, not a bound).
    assert len(first) == 34 and first[:3] == ["books/lcet10", "enwiki/39", "enwiki/324"]
    text = [s for _, path in plan.units() for d in plan.documents(path) for s in d]
    assert sum(len(s.encode("utf-8")) for s in text) == 944_203
    assert all(document_hash(0, i) < plan.fraction for i in first)
    whole = SamplePlan.open(documents_dirs, 1024, seed=0)
    assert whole.fraction == 1.0 and len(sampled_ids(whole)) == 101


def test_iter_sample_texts_gives_the_sampled_sentences_in_batches(documents_dirs) -> None:
    batches = list(iter_sample_texts(documents_dirs, 1.0, seed=0))
    plan = SamplePlan.open(documents_dirs, 1.0, 0)
    sentences = [s for _, path in plan.units() for d in plan.documents(path) for s in d]
    assert [s for batch in batches for s in batch] == sentences
    assert all(len(batch) >= vocab.COUNT_BATCH_SENTENCES for batch in batches[:-1])


def test_documents_directory_without_manifest_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        DocumentsInputError, match=rf"{empty} is empty or does not exist.*bertkit wiki"
    ):
        vocab.run(["--documents", str(empty), "--output", str(tmp_path / "v")])
    (empty / "documents-00000-0000.parquet").write_bytes(b"PAR1")
    with pytest.raises(DocumentsInputError, match=rf"{empty} has no {MANIFEST_NAME}"):
        vocab.run(["--documents", str(empty), "--output", str(tmp_path / "v")])


def test_documents_directory_missing_a_file_is_refused(documents_dirs, tmp_path: Path) -> None:
    wiki = shutil.copytree(documents_dirs[0], tmp_path / "wiki")
    (parquet,) = wiki.glob("documents-*.parquet")
    parquet.unlink()
    with pytest.raises(
        DocumentsInputError, match=rf"{parquet.name} is missing.*rerun the documents"
    ):
        vocab.run(["--documents", str(wiki), "--output", str(tmp_path / "v")])


def test_flags_that_cannot_work_stop_before_reading(documents_dirs, tmp_path: Path) -> None:
    out = str(tmp_path / "v")
    with pytest.raises(VocabError, match=r"no room for learned pieces.*--limit-alphabet"):
        vocab.run(["--documents", *documents_dirs, "--output", out, "--vocab-size", "100"])
    with pytest.raises(VocabError, match=r"is given twice: its text would be counted twice"):
        vocab.run(["--documents", documents_dirs[0], documents_dirs[0] + "/", "--output", out])
    again = f"{documents_dirs[0]}/../{Path(documents_dirs[0]).name}"
    with pytest.raises(VocabError, match=r"is the same directory as --documents"):
        vocab.run(["--documents", documents_dirs[0], again, "--output", out])
    with pytest.raises(SystemExit):  # argparse: a flag neither bertkit nor Beam knows
        vocab.run(["--documents", *documents_dirs, "--output", out, "--vocab-sise", "9"])
    # The alphabet's size is known once words are counted: the refusal then deletes them.
    assert [p for p in (tmp_path / "v").rglob("*") if p.is_file()] == []


# --- Training, writing and loading ----------------------------------------------------------


def train_command(documents_dirs, output: Path, *flags: str) -> list[str]:
    return [
        "vocab",
        "--documents",
        *documents_dirs,
        "--output",
        str(output),
        "--vocab-size",
        "2000",
        *flags,
    ]


@pytest.fixture(scope="session")
def trained(documents_dirs, tmp_path_factory) -> Path:
    """`bertkit vocab` end to end on the real sample, through the `bertkit` command."""
    out = tmp_path_factory.mktemp("vocab") / "v"
    with pytest.raises(SystemExit) as exit_:
        cli.main(train_command(documents_dirs, out, "--num-unused", "3"))
    assert exit_.value.code == 0
    return out


def test_cli_end_to_end_on_the_real_sample(trained: Path, documents_dirs) -> None:
    assert sorted(p.name for p in trained.iterdir()) == [
        TOKENIZER_FILE,
        VOCAB_METADATA_FILE,
        VOCAB_FILE,
    ]
    loaded = load_vocab(str(trained))
    assert loaded.size == 2000 and loaded.metadata.vocab_size == 2000
    assert loaded.tokens[:8] == [
        "[PAD]",
        "[unused0]",
        "[unused1]",
        "[unused2]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ]
    assert (loaded.pad_id, loaded.unk_id, loaded.cls_id, loaded.sep_id, loaded.mask_id) == (
        0,
        4,
        5,
        6,
        7,
    )
    assert loaded.special_ids == frozenset(range(8))
    assert np.array_equal(loaded.replaceable_ids, np.arange(8, 2000))
    assert loaded.is_continuation.sum() == sum(t.startswith("##") for t in loaded.tokens) > 100
    # Then the alphabet by code point, then `##c`, then the learned pieces.
    sample = loaded.metadata.sample
    alphabet = loaded.tokens[8 : 8 + sample["alphabet"]]
    assert alphabet == sorted(alphabet) and all(len(c) == 1 for c in alphabet)
    assert sample["documents"] == 101 and sample["text_bytes"] == SAMPLE_TEXT_BYTES
    assert sample["learned_tokens"] == 2000 - 8 - sample["alphabet"] - sample["continuation_pieces"]
    # Inputs are recorded by their manifest's sha256.
    assert [i["manifest_sha256"] for i in loaded.metadata.inputs] == [
        hashlib.sha256((Path(d) / MANIFEST_NAME).read_bytes()).hexdigest()
        for d in sorted(documents_dirs)
    ]
    assert loaded.sha256 == hashlib.sha256((trained / VOCAB_FILE).read_bytes()).hexdigest()
    # tokenizer.json is exactly what build_tokenizer makes of vocab.txt.
    rebuilt = build_tokenizer(loaded.tokens, cased=False).to_str(pretty=True)
    assert (trained / TOKENIZER_FILE).read_text(encoding="utf-8") == rebuilt
    encoding = loaded.tokenizer.encode("Alice was beginning to get very tired of sitting.")
    assert encoding.tokens[0] == "[CLS]" and encoding.tokens[-1] == "[SEP]"
    assert "[UNK]" not in encoding.tokens and "alice" in encoding.tokens


def test_existing_output_needs_overwrite(trained: Path, documents_dirs, tmp_path: Path, capsys):
    out = shutil.copytree(trained, tmp_path / "v")
    before = (out / VOCAB_FILE).read_bytes()
    with pytest.raises(SystemExit) as exit_:
        cli.main(train_command(documents_dirs, out, "--num-unused", "3"))
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f"{out} is not empty" in error and "pass --overwrite" in error
    assert (
        vocab.run(train_command(documents_dirs, out, "--num-unused", "3", "--overwrite")[1:]) == 0
    )
    assert (out / VOCAB_FILE).read_bytes() == before
    assert not list(out.glob(".tmp-*"))


def test_missing_vocabulary_directory(tmp_path: Path) -> None:
    with pytest.raises(VocabError, match=rf"no vocabulary at {tmp_path / 'nope'}.*bertkit vocab"):
        load_vocab(str(tmp_path / "nope"))


def test_tampered_vocab_txt_is_refused(trained: Path, tmp_path: Path) -> None:
    out = shutil.copytree(trained, tmp_path / "v")
    lines = (out / VOCAB_FILE).read_text(encoding="utf-8").split("\n")
    lines[100], lines[101] = lines[101], lines[100]
    (out / VOCAB_FILE).write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(VocabError, match=r"vocab\.txt was modified after training"):
        load_vocab(str(out))


def test_vocab_txt_and_tokenizer_json_from_different_runs_are_refused(
    trained: Path, tmp_path: Path
) -> None:
    out = shutil.copytree(trained, tmp_path / "v")
    tokens = load_vocab(str(out)).tokens
    other = build_tokenizer([*tokens[:-1], "zzzzz"], cased=False).to_str(pretty=True).encode()
    (out / TOKENIZER_FILE).write_bytes(other)
    with pytest.raises(VocabError, match=r"tokenizer\.json was modified after training"):
        load_vocab(str(out))
    metadata = json.loads((out / VOCAB_METADATA_FILE).read_text())
    metadata["tokenizer_sha256"] = hashlib.sha256(other).hexdigest()  # hide the swap
    (out / VOCAB_METADATA_FILE).write_text(json.dumps(metadata))
    swapped = f"disagree: id 1999 is {tokens[-1]!r} in vocab.txt but 'zzzzz' in tokenizer.json"
    with pytest.raises(VocabError, match=re.escape(swapped)):
        load_vocab(str(out))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(vocab_size="2000"), r"vocab_size must be an integer, not str '2000'"),
        (lambda m: m.update(vocab_size=3), r"vocab_size is 3: it must be at least 5"),
        (lambda m: m.update(cased="no"), r"cased must be true or false, not str 'no'"),
        (
            lambda m: m["special_tokens"].update({"[MASK]": 2000}),
            r"special_tokens\['\[MASK\]'\] is 2000: it must be at least 0 and at most 1999",
        ),
        (lambda m: m["special_tokens"].pop("[CLS]"), r"special_tokens lacks \[CLS\]"),
        (lambda m: m.update(vocab_sha256="../vocab.txt"), r"vocab_sha256 is '\.\./vocab\.txt'"),
        (lambda m: m.update(inputs={}), r"inputs must be a list, not dict"),
        (lambda m: m.update(extra=1), r"TypeError: .*unexpected keyword argument 'extra'"),
    ],
)
def test_tampered_vocab_metadata_is_refused_naming_the_field(
    trained: Path, tmp_path: Path, change, message
) -> None:
    out = shutil.copytree(trained, tmp_path / "v")
    metadata = json.loads((out / VOCAB_METADATA_FILE).read_text())
    change(metadata)
    (out / VOCAB_METADATA_FILE).write_text(json.dumps(metadata))
    with pytest.raises(VocabError, match=message) as error:
        load_vocab(str(out))
    assert str(error.value).startswith(f"{out / VOCAB_METADATA_FILE}: not a valid VocabMetadata")


def test_vocabulary_reads_are_bounded(trained: Path, tmp_path: Path) -> None:
    out = shutil.copytree(trained, tmp_path / "v")
    with (out / VOCAB_FILE).open("r+b") as sparse:  # 256 MiB + 1 byte, sparse on disk
        sparse.truncate((256 << 20) + 1)
    with pytest.raises(
        OSError,
        match=r"vocab\.txt: over 268,435,456 bytes, more than a file "
        r"of this kind ever holds",
    ):
        load_vocab(str(out))


_TRAIN_IN_A_FRESH_PROCESS = (
    "import sys; from pipelines import vocab; sys.exit(vocab.run(sys.argv[1:]))"
)


def test_same_flags_give_byte_identical_files_across_processes(documents_dirs, tmp_path) -> None:
    # Each process has its own Rust HashMap seeds (and Python hash seed): HF's trainer alone
    # gives a different vocab.txt in each (5 of 5 differed on this sample at 2000 tokens).
    # --limit-alphabet 300 cuts the ~340 characters between equal counts, the other way
    # HF's own trainer goes astray.
    flags = ["--vocab-size", "2000", "--limit-alphabet", "300", "--num-unused", "2"]
    # Three processes: two fresh ones, each with a Python hash seed of its own, and this
    # test's own (its seed, random unless PYTHONHASHSEED is set, differs from theirs; other
    # trainings may have run in it already), which runs while they do.
    ours = os.environ.get("PYTHONHASHSEED")
    seeds = [seed for seed in ("1", "2", "3") if seed != ours][:2]
    runs = []
    for hash_seed in seeds:
        out = tmp_path / f"run{hash_seed}"
        command = [
            sys.executable,
            "-c",
            _TRAIN_IN_A_FRESH_PROCESS,
            "--documents",
            *documents_dirs,
            "--output",
            str(out),
            *flags,
        ]
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stderr=subprocess.PIPE)
        runs.append((out, process))
    here = tmp_path / "here"
    assert vocab.run(["--documents", *documents_dirs, "--output", str(here), *flags]) == 0
    for _, process in runs:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr.decode()
    outputs = [here, *(out for out, _ in runs)]
    for name in (VOCAB_FILE, TOKENIZER_FILE):
        assert len({(out / name).read_bytes() for out in outputs}) == 1, name
    metadata = [json.loads((out / VOCAB_METADATA_FILE).read_text()) for out in outputs]
    for record in metadata:
        del record["config"]["output"]
    assert metadata[0] == metadata[1] == metadata[2]
    assert metadata[0]["sample"]["alphabet"] == 300
    assert load_vocab(str(outputs[0])).size == 2000


# Slow (10 s): the default run reads remote documents into the vocabulary on gs://
# (tests/test_gcs.py), through the same Beam filesystem layer as s3://.
@pytest.mark.slow
def test_documents_from_s3_give_the_same_vocabulary(s3_server, trained, documents_dirs) -> None:
    endpoint, client = s3_server
    s3_server.bucket("corpus")
    for directory in map(Path, documents_dirs):
        for file in directory.iterdir():
            client.upload_file(str(file), "corpus", f"documents/{directory.name}/{file.name}")
    remote = ["s3://corpus/documents/wikipedia", "s3://corpus/documents/books"]
    flags = s3_flags(endpoint)
    out = "s3://corpus/vocab"
    assert vocab.run(train_command(remote, out, "--num-unused", "3", *flags)[1:]) == 0
    listing = client.list_objects_v2(Bucket="corpus", Prefix="vocab/")["Contents"]
    assert sorted(o["Key"] for o in listing) == [
        f"vocab/{TOKENIZER_FILE}",
        f"vocab/{VOCAB_METADATA_FILE}",
        f"vocab/{VOCAB_FILE}",
    ]
    loaded = load_vocab(out, files.READER)  # Beam's s3 flags, as the stage was given
    assert loaded.sha256 == load_vocab(str(trained)).sha256
    assert loaded.metadata.inputs[0]["path"] == "s3://corpus/documents/books"


def test_vocab_is_a_bertkit_command() -> None:
    assert cli.COMMANDS["vocab"][0] == "pipelines.vocab"


def test_a_file_no_vocab_run_wrote_is_never_replaced(
    trained: Path, documents_dirs, tmp_path, capsys
):
    out = shutil.copytree(trained, tmp_path / "v")
    (out / "README.md").write_text("my notes")
    with pytest.raises(SystemExit) as exit_:
        cli.main(train_command(documents_dirs, out, "--overwrite"))
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f"{out} holds README.md, which `bertkit vocab` does not write" in error
    assert (out / "README.md").read_text() == "my notes"


@pytest.mark.parametrize("vocab_json", [False, True], ids=["alone", "beside a run's vocab.json"])
def test_a_vocab_txt_no_vocab_json_records_is_never_replaced(
    vocab_json: bool, trained: Path, documents_dirs, tmp_path, capsys
):
    out = tmp_path / "v"  # the user's vocab.txt, or one edited after the run, each refused
    out.mkdir()
    if vocab_json:
        shutil.copy(trained / VOCAB_METADATA_FILE, out / VOCAB_METADATA_FILE)
    (out / VOCAB_FILE).write_text("[PAD]\n[UNK]\nmy\nhand\n")
    for overwrite in ((), ("--overwrite",)):
        with pytest.raises(SystemExit) as exit_:
            cli.main(train_command(documents_dirs, out, *overwrite))
        assert exit_.value.code == 2
        assert capsys.readouterr().err.endswith(
            f"{out} holds vocab.txt, which no vocab.json of a `bertkit vocab` run beside it "
            "vouches for (a file of yours, or of a run killed before it finished): nothing was "
            "deleted. Choose a new or empty --output, or move it\n"
        )
    assert (out / VOCAB_FILE).read_text() == "[PAD]\n[UNK]\nmy\nhand\n"


def test_two_workers_give_the_same_files(trained: Path, documents_dirs, tmp_path) -> None:
    out = tmp_path / "v"
    workers = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    assert vocab.run(train_command(documents_dirs, out, "--num-unused", "3", *workers)[1:]) == 0
    for name in (VOCAB_FILE, TOKENIZER_FILE):
        assert (out / name).read_bytes() == (trained / name).read_bytes(), name
    assert sorted(p.name for p in out.iterdir()) == [
        TOKENIZER_FILE,
        VOCAB_METADATA_FILE,
        VOCAB_FILE,
    ]


def test_word_count_files_add_up_to_the_sample_s_words(documents_dirs, tmp_path) -> None:
    config = vocab.VocabConfig(documents=documents_dirs, output=str(tmp_path))
    plan = SamplePlan.open(documents_dirs, 1024, 0)
    summaries = [vocab.count_unit(plan, config, *unit) for unit in plan.units()]
    assert [(s["unit"], s["documents"]) for s in summaries] == [
        ("d000-f00000", 4),
        ("d001-f00000", 97),
    ]
    books = pq.read_table(tmp_path / WORD_COUNTS_DIR / "d000-f00000.parquet")
    assert books.schema.equals(WORD_COUNTS_SCHEMA, check_metadata=True)
    words = books.column("word").to_pylist()
    assert words == sorted(words) and len(words) == summaries[0]["distinct_words"]
    total = vocab.sum_word_counts(str(tmp_path), summaries)
    assert total == count_words(iter_sample_texts(documents_dirs, 1024, 0), cased=False)
    assert total["alice"] == 395 and total["the"] == 39_355 and total.total() == 701_761


def test_a_killed_run_s_word_counts_are_removed(trained: Path, documents_dirs, tmp_path) -> None:
    out = shutil.copytree(trained, tmp_path / "v")
    spill = out / WORD_COUNTS_DIR / "d000-f00000.parquet"
    spill.parent.mkdir(parents=True)
    spill.write_bytes(b"half")
    spill.with_name(spill.name + ".tmp-" + "0" * 32).write_bytes(b"half")
    assert (
        vocab.run(train_command(documents_dirs, out, "--num-unused", "3", "--overwrite")[1:]) == 0
    )
    assert sorted(p.name for p in out.iterdir()) == [
        TOKENIZER_FILE,
        VOCAB_METADATA_FILE,
        VOCAB_FILE,
    ]
