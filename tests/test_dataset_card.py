"""The dataset card (README.md beside a shards manifest, pipelines/examples/card.py): the
exact text for literal records, its YAML header read and checked with huggingface_hub, the
licence and language of each kind of input, the commands parsed back into the configs they
came from, and the card `bertkit examples` writes on the real sample.
"""

import dataclasses
import functools
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from huggingface_hub import DatasetCard, DatasetCardData

from pipelines import examples
from pipelines.beam import files
from pipelines.books.config import BooksConfig
from pipelines.command import flags
from pipelines.corpus.config import CorpusConfig
from pipelines.dedup.config import DedupConfig
from pipelines.examples import cli as examples_cli
from pipelines.examples.card import (
    dataset_card,
    documents_command,
    dump_dbname,
    examples_command,
    folder_globs,
    run_versions,
    size_category,
    source_terms,
    vocab_command,
)
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.manifest import _recorded
from pipelines.inspect import cli as inspect_cli
from pipelines.io.recorded_paths import join_relative
from pipelines.vocab.config import VocabConfig
from pipelines.wikipedia.config import WikipediaConfig
from schemas.examples import SHARDS_MANIFEST_NAME
from schemas.manifest import MANIFEST_NAME, DocumentsManifest
from schemas.shards import (
    DATASET_CARD_NAME,
    PAIRS,
    STATIC,
    SequenceOutput,
    ShardInfo,
    ShardsManifest,
    SplitShards,
)
from schemas.vocab import VOCAB_METADATA_FILE, VocabMetadata

# What the Hub takes for size_categories (huggingface_hub's DatasetCardData docstring).
HUB_SIZE_CATEGORIES = [
    "n<1K",
    "1K<n<10K",
    "10K<n<100K",
    "100K<n<1M",
    "1M<n<10M",
    "10M<n<100M",
    "100M<n<1B",
    "1B<n<10B",
    "10B<n<100B",
    "100B<n<1T",
    "n>1T",
    "other",
]
VERSIONS = {"bertkit": "0.1.0", "apache-beam": "2.77.0", "python": "3.11.7"}
DUMP = "dumps/enwiki-20240101-pages-articles1.xml-p1p41242.bz2"


def documents_manifest(stage: str, inputs: list[str], config: dict, **counts: int):
    return DocumentsManifest(
        stage=stage,
        inputs=[{"path": path, "bytes": 1000} for path in inputs],
        config=config,
        counts={"documents": 2, "text_bytes": 5000, **counts},
        dropped={},
        rejected={},
        failed_inputs=[],
        files=[],
    )


WIKIPEDIA = documents_manifest(
    "wikipedia",
    [DUMP],
    {"min_paragraph_words": 3, "split_bytes": 64 << 20, "max_file_text_bytes": 256 << 20},
)
BOOKS = documents_manifest(
    "books",
    ["books/alice.txt", "books/notes.txt"],
    {
        "format": "files",
        "min_paragraph_words": 3,
        "lines_per_document": 1000,
        "unit_bytes": 64 << 20,
        "max_file_text_bytes": 32 << 20,
        "max_line_bytes": 1 << 20,
    },
    gutenberg_boilerplate_removed=1,
    input_files=2,
)
VOCAB = VocabMetadata(
    vocab_size=1000,
    cased=False,
    num_unused=0,
    special_tokens={},
    sample={},
    inputs=[],
    config={
        **{f.name: f.default for f in dataclasses.fields(VocabConfig) if f.name != "documents"},
        "documents": ["docs/wiki", "docs/books"],
        "output": "vocab",
        "vocab_size": 1000,
        "overwrite": True,
    },
    vocab_sha256="ab" * 32,
    tokenizer_sha256="cd" * 32,
)


def shard(path: str, samples: int) -> ShardInfo:
    return ShardInfo(path, samples, 4096, "ef" * 32, "000000000000")


def shards_manifest(
    sequences: str = PAIRS, masking: str = STATIC, dupe_factor: int = 2
) -> ShardsManifest:
    kinds = {"sequences": sequences, "masking": masking}
    config = ExamplesConfig(
        ("docs/wiki", "docs/books"), "vocab", "out", dupe_factor=dupe_factor, **kinds
    )
    pairs, masked = sequences == PAIRS, masking == STATIC
    train = SplitShards(
        1500, 700 * pairs, 150_000, 22_000 * masked, [shard("seq128/train/shard-000000.tar", 1500)]
    )
    heldout = SplitShards(
        20, 10 * pairs, 2000, 300 * masked, [shard("seq128/heldout/shard-000000.tar", 20)]
    )
    return ShardsManifest(
        vocab={"path": "vocab", "sha256": "ab" * 32, "size": 1000, "cased": False},
        inputs=[],
        config=json.loads(json.dumps(
            {k: v for k, v in dataclasses.asdict(config).items() if _recorded(k, v)}
        )),
        layout={},
        deviations=["output: globally shuffled"],
        counts={"documents": 4, "documents_train": 3, "documents_heldout": 1,
                "sentences": 900, "tokens": 60_000},
        dropped={},
        rejected={},
        outputs={"seq128": SequenceOutput(128, 19 * masked, {"train": train, "heldout": heldout})},
        **kinds,
    )  # fmt: skip


CARD = """\
---
license:
- cc-by-sa-3.0
- other
license_name: public-domain
language:
- en
size_categories:
- 1K<n<10K
source_datasets:
- extended|wikipedia
- extended|other-project-gutenberg
task_categories:
- fill-mask
task_ids:
- masked-language-modeling
pretty_name: BERT pre-training examples of enwiki and 2 books (seq128)
tags:
- bertkit
- bert
- webdataset
---

# BERT pre-training examples of enwiki and 2 books (seq128)

Sentence pairs with a next-sentence label (Google's BERT), static masks drawn once and stored, made by `bertkit examples`: 1,520 examples in 2 WebDataset shards of `PretrainingExample` records (schema 2.1), each listed with its size and sha256 in `manifest.json` beside this card.

## Contents

| output | split | examples | shards | tokens | predictions | NotNext |
|---|---|---:|---:|---:|---:|---:|
| seq128 | train | 1,500 | 1 | 150,000 | 22,000 | 0.467 |
| seq128 | heldout | 20 | 1 | 2,000 | 300 | 0.500 |

From 4 documents (3 train, 1 held out by a hash of their id), 900 sentences, 60,000 tokens.

Recipe: sequences pairs, masking static (masked-lm-prob 0.15, at most 19 predictions at length 128, whole-word masking off), dupe factor 2, held-out fraction 0.01, seed 12345. Vocabulary: 1,000 WordPiece tokens, uncased, vocab.txt sha256 `abababababababababababababababababababababababababababababababab`.

Where the algorithm differs from Google's (or RoBERTa's):

- output: globally shuffled

## Sources and licences

| documents | stage | documents | text bytes | licence | language |
|---|---|---:|---:|---|---|
| `docs/wiki` | wikipedia | 2 | 5,000 | cc-by-sa-3.0 | en |
| `docs/books` | books | 2 | 5,000 | public-domain | — |

- docs/wiki: Wikipedia (enwiki), 2 articles. Wikipedia's text is licensed under the Creative Commons Attribution-ShareAlike 3.0 licence (CC BY-SA 3.0) and the GNU Free Documentation License (GFDL): reuse must credit the authors and share alike.
- docs/books: 2 books; Project Gutenberg's header and licence were found (and removed) in 1 of its 2 files. Project Gutenberg's books are in the public domain in the United States; check the law where you use them.

## How it was made

```bash
bertkit wikipedia --input dumps/enwiki-20240101-pages-articles1.xml-p1p41242.bz2 \\
    --output docs/wiki --min-paragraph-words 3
bertkit books --input books/alice.txt books/notes.txt --output docs/books --file-mb 32
bertkit vocab --documents docs/wiki docs/books --output vocab --vocab-size 1000
bertkit examples --documents docs/wiki docs/books --vocab vocab --output SHARDS_DIR \\
    --dupe-factor 2
```

Each command is rebuilt from what its stage recorded (the documents manifests, vocab.json, manifest.json): flags at their defaults are left out, and so are `--overwrite` and the runner's flags (`--runner`, `--direct_num_workers`, …), which change where and how the work ran, not its bytes. SHARDS_DIR is the directory of this card: the manifest records no output path, so the same run anywhere gives the same bytes.

## Versions

| stage | bertkit |
|---|---|
| wikipedia (`docs/wiki`) | 0.1.0 |
| books (`docs/books`) | 0.1.0 |
| vocab | 0.1.0 |
| examples | 0.1.0 |

The examples stage ran with bertkit 0.1.0, apache-beam 2.77.0, python 3.11.7.

## Reading it

```bash
bertkit inspect SHARDS_DIR --stats            # every shard read and checked
bertkit inspect SHARDS_DIR --show 2           # examples with their tokens
bertkit inspect SHARDS_DIR --parquet examples.parquet --limit 10000
```
"""


def literal_card() -> str:
    documents = [("docs/wiki", WIKIPEDIA), ("docs/books", BOOKS)]
    return dataset_card(shards_manifest(), documents, VOCAB, VERSIONS)


def test_the_card_of_literal_records(tmp_path: Path) -> None:
    card = literal_card()
    assert card == CARD
    assert literal_card() == card  # no clock, no host: the same records, the same bytes


def header_of(card: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", card, re.S)
    assert match, card[:200]
    return yaml.safe_load(match.group(1))


def test_the_header_is_a_valid_hub_dataset_card() -> None:
    text = literal_card()
    card = DatasetCard(text, ignore_metadata_errors=False)  # raises on a header it cannot read
    data = card.data.to_dict()
    assert data == header_of(text)
    assert DatasetCardData(**data).to_dict() == data  # every key is one the Hub knows
    assert data["license"] == ["cc-by-sa-3.0", "other"]
    assert data["license_name"] == "public-domain"
    assert data["language"] == ["en"]
    assert data["size_categories"] == ["1K<n<10K"]
    assert set(data["size_categories"]) <= set(HUB_SIZE_CATEGORIES)
    assert data["task_categories"] == ["fill-mask"]
    assert all(s == "original" or s.startswith("extended|") for s in data["source_datasets"])
    assert card.text.startswith("\n# BERT pre-training examples of enwiki and 2 books (seq128)")


@pytest.mark.parametrize(
    ("examples", "category"),
    [(0, "n<1K"), (999, "n<1K"), (1000, "1K<n<10K"), (42_132, "10K<n<100K"),
     (10**9, "1B<n<10B"), (10**12, "n>1T")],
)  # fmt: skip
def test_size_categories(examples: int, category: str) -> None:
    assert size_category(examples) == category
    assert category in HUB_SIZE_CATEGORIES


@pytest.mark.parametrize(
    ("paths", "dbname"),
    [
        ([DUMP], "en"),
        (["x/dewiki-latest-pages-articles-multistream1.xml-p1p297012.bz2"], "de"),
        (["zh_min_nanwiki-latest-pages-articles.xml.bz2"], "zh-min-nan"),
        (["enwiki-a.xml.bz2", "dewiki-b.xml.bz2"], None),  # two wikis: no one dbname
        (["enwiki-a.xml.bz2", "pages.xml.bz2"], None),
        (["s3://bucket/dumps/frwiki-20240101-pages-articles.xml.bz2"], "fr"),
        ([], None),
    ],
)
def test_the_dbname_of_dump_files(paths: list[str], dbname: str | None) -> None:
    assert dump_dbname(paths) == dbname


def terms_of(manifest: DocumentsManifest) -> tuple:
    terms = source_terms("docs", manifest)
    return terms.license, terms.license_name, terms.language, terms.source


def test_licence_and_language_of_each_kind_of_input() -> None:
    assert terms_of(WIKIPEDIA) == ("cc-by-sa-3.0", None, "en", "extended|wikipedia")
    assert "GNU Free Documentation License (GFDL)" in source_terms("docs", WIKIPEDIA).note
    simple = documents_manifest("wikipedia", ["simplewiki-latest-pages-articles.xml.bz2"], {})
    assert terms_of(simple)[2] == "en"
    nan = documents_manifest("wikipedia", ["zh_min_nanwiki-latest.xml.bz2"], {})
    assert terms_of(nan)[2] is None  # not an ISO 639 code: left out of the header
    gutenberg = ("other", "public-domain", None, "extended|other-project-gutenberg")
    assert terms_of(BOOKS) == gutenberg
    plain = dataclasses.replace(BOOKS, counts={"documents": 2})
    assert terms_of(plain) == ("unknown", None, None, "extended|other-books")
    lines = dataclasses.replace(BOOKS, config={**BOOKS.config, "format": "lines"})
    assert terms_of(lines)[0] == "unknown"  # BookCorpus lines: not Project Gutenberg's
    corpus = documents_manifest(
        "corpus", ["c.jsonl.zst"], {"license": "CC-BY-4.0", "language": "fr"}
    )
    assert terms_of(corpus) == ("cc-by-4.0", None, "fr", "extended|other-corpus")
    own = documents_manifest("corpus", ["c.jsonl.zst"], {"license": "Acme Research Terms"})
    assert terms_of(own) == ("other", "Acme Research Terms", None, "extended|other-corpus")
    words = documents_manifest("corpus", ["c.jsonl.zst"], {"language": "English"})
    assert terms_of(words)[2] is None and "language English." in source_terms("d", words).note
    silent = documents_manifest("corpus", ["c.jsonl.zst"], {})
    assert terms_of(silent) == ("unknown", None, None, "extended|other-corpus")


def test_mixed_inputs_list_every_licence_and_language() -> None:
    corpus = documents_manifest("corpus", ["c.jsonl.zst"], {"license": "mit", "language": "de"})
    own = documents_manifest("corpus", ["d.jsonl.zst"], {"license": "Acme Terms"})
    documents = [("a", WIKIPEDIA), ("b", corpus), ("c", BOOKS), ("d", own)]
    header = header_of(dataset_card(shards_manifest(), documents, VOCAB, VERSIONS))
    assert header["license"] == ["cc-by-sa-3.0", "mit", "other"]
    assert header["license_name"] == "public-domain and Acme Terms"
    assert header["language"] == ["en", "de"]
    DatasetCardData(**header)
    alone = header_of(dataset_card(shards_manifest(), [("b", BOOKS)], VOCAB, VERSIONS))
    assert alone["license"] == ["other"] and "language" not in alone


def words_of(command: str, stage: str) -> list[str]:
    words = shlex.split(command.replace("\\\n", " "))
    assert words[:2] == ["bertkit", stage]
    return words[2:]


def parsed(config_class: type, command: str, stage: str):
    parser = flags.parser_for(config_class, f"bertkit {stage}", None)
    return flags.config_from(config_class, parser.parse_args(words_of(command, stage)))


def test_commands_parse_back_into_the_recorded_configs() -> None:
    wikipedia = documents_command("docs/wiki", WIKIPEDIA)
    assert (
        wikipedia
        == f"bertkit wikipedia --input {DUMP} \\\n    --output docs/wiki --min-paragraph-words 3"
    )
    assert parsed(WikipediaConfig, wikipedia, "wikipedia").recorded() == WIKIPEDIA.config
    books = documents_command("docs/books", BOOKS)
    assert parsed(BooksConfig, books, "books").recorded() == BOOKS.config
    assert "--file-mb 32" in books and "--unit-mb" not in books  # 64 MB is the default
    vocab = parsed(VocabConfig, vocab_command(VOCAB), "vocab")
    assert dataclasses.asdict(vocab) == {
        **VOCAB.config,
        "documents": ("docs/wiki", "docs/books"),
        "overwrite": False,
    }
    for kinds in ({}, {"sequences": "full-sentences", "masking": "none", "dupe_factor": 1}):
        manifest = shards_manifest(**kinds)
        config = parsed(ExamplesConfig, examples_command(manifest), "examples")
        recorded = {k: v for k, v in dataclasses.asdict(config).items() if _recorded(k, v)}
        assert json.loads(json.dumps(recorded)) == manifest.config
        assert config.output == "SHARDS_DIR"


def test_corpus_and_dedup_commands_parse_back() -> None:
    given = CorpusConfig(
        input=("c/*.jsonl.zst",), output="docs/c", license="MIT OR Apache-2.0", language="pt-BR",
        text_field="content", source="web", max_line_kb=64,
    )  # fmt: skip
    corpus = documents_manifest("corpus", ["c/a.jsonl.zst", "c/b.jsonl.zst"], given.recorded())
    command = documents_command("docs/c", corpus)
    assert "--license 'MIT OR Apache-2.0' --language pt-BR" in command
    assert parsed(CorpusConfig, command, "corpus").recorded() == given.recorded()
    assert terms_of(corpus) == ("other", "MIT OR Apache-2.0", "pt", "extended|other-corpus")
    assert source_terms("docs/c", corpus).name == "2 web documents"
    dedup_config = DedupConfig(
        documents=("docs/wiki", "docs/c"), output="docs/dedup", threshold=0.7
    )
    dedup = dataclasses.replace(
        documents_manifest("dedup", ["docs/wiki", "docs/c"], dedup_config.recorded()),
        # Recorded relative to the dedup directory, shown as its path is given.
        inputs=[{"path": "../wiki", "stage": "wikipedia"}, {"path": "../c", "stage": "corpus"}],
    )
    command = documents_command("docs/dedup", dedup)
    assert command == (
        "bertkit dedup --documents docs/wiki docs/c --output docs/dedup --threshold 0.7"
    )
    assert parsed(DedupConfig, command, "dedup").recorded() == dedup_config.recorded()
    assert terms_of(dedup)[0] == "unknown"
    assert source_terms("d", dedup).name == "2 documents deduplicated from wikipedia, corpus"


def test_many_input_files_are_named_by_their_folder_and_shared_ending() -> None:
    paths = [f"books/part-{i:03d}.txt" for i in range(25)]
    many = documents_manifest("books", paths, BOOKS.config)
    assert documents_command("docs/books", many).startswith(
        "bertkit books --input 'books/*.txt' --output docs/books"
    )
    assert documents_command("docs/books", many).endswith(
        "  # 25 files, each listed in docs/books/_manifest.json"
    )
    # Each folder its own ending, from a dot (part-001.txt and part-011.txt share "1.txt");
    # names with none in common take the whole folder.
    assert folder_globs(
        [
            "dumps/a.xml.bz2",
            "dumps/b.xml.bz2",
            "gs://b/x/part-001.txt",
            "gs://b/x/part-011.txt",
            "notes/a.md",
            "notes/b.txt",
            "top.jsonl",
        ]
    ) == ["./*.jsonl", "dumps/*.xml.bz2", "gs://b/x/*.txt", "notes/*"]


def test_full_sentences_without_masks() -> None:
    manifest = shards_manifest(sequences="full-sentences", masking="none", dupe_factor=1)
    card = dataset_card(manifest, [("docs/wiki", WIKIPEDIA)], VOCAB, VERSIONS)
    assert "Full-sentence sequences packed across documents (RoBERTa's FULL-SENTENCES), no " in card
    assert "| output | split | examples | shards | tokens |\n|---|---|---:|---:|---:|\n" in card
    assert "--sequences full-sentences --masking none" in card
    assert "NotNext" not in card and "masked-lm-prob" not in card


def test_overwrite_treats_the_card_as_the_stage_s_own_beside_its_manifest(tmp_path: Path) -> None:
    output = tmp_path / "shards"
    output.mkdir()
    clear = functools.partial(
        files.clear_earlier_run, str(output), examples_cli.EARLIER_RUN, vouched=examples_cli.VOUCHED
    )
    # A README.md of the user's, or a manifest.json that is not a shards manifest, is theirs.
    (output / DATASET_CARD_NAME).write_text("my notes\n")
    for manifest in (None, '{"my": "manifest"}'):
        if manifest is not None:
            (output / SHARDS_MANIFEST_NAME).write_text(manifest)
        with pytest.raises(files.OutputDirectoryError) as refused:
            clear(True, "examples")
        assert str(refused.value) == (
            f"{output} holds {DATASET_CARD_NAME}, which no manifest.json of a `bertkit examples` run beside "
            "it vouches for (a file of yours, or of a run killed before it finished): nothing "
            "was deleted. Choose a new or empty --output, or move it"
        )
    assert (output / DATASET_CARD_NAME).read_text() == "my notes\n"
    # Beside the shards manifest the stage wrote, the card is the stage's own.
    (output / SHARDS_MANIFEST_NAME).write_text(shards_manifest().to_json())
    (output / f"{DATASET_CARD_NAME}.tmp-{'0' * 32}").write_text("half")
    with pytest.raises(files.OutputDirectoryError, match="pass --overwrite"):
        clear(False, "examples")
    clear(True, "examples")
    assert list(output.iterdir()) == []
    assert examples_cli._TEMPORARY.fullmatch(f"{DATASET_CARD_NAME}.tmp-{'a' * 32}")
    (output / "README.txt").write_text("theirs\n")
    with pytest.raises(files.OutputDirectoryError, match="does not write: nothing was deleted"):
        files.clear_earlier_run(str(output), examples_cli.EARLIER_RUN, True, "examples")


def test_inspect_names_the_card(sample_shards: Path, capsys) -> None:
    capsys.readouterr()
    assert inspect_cli.run([str(sample_shards)]) == 0
    lines = capsys.readouterr().out.splitlines()
    card = sample_shards / DATASET_CARD_NAME
    assert f"dataset card: {card} (licence, counts, the commands that made it)" in lines
    assert inspect_cli.run([str(sample_shards / "seq128/train/shard-000000.tar")]) == 0
    assert "dataset card" not in capsys.readouterr().out  # one shard: its directory's summary


def test_the_card_of_the_real_sample(sample_shards: Path, sample_documents, sample_vocab) -> None:
    text = (sample_shards / DATASET_CARD_NAME).read_text()
    manifest_text = (sample_shards / "manifest.json").read_text()
    manifest = ShardsManifest.from_json(manifest_text)
    assert manifest.to_json() == manifest_text and "README" not in manifest_text
    # The card names the directories as the stage was given them; the manifest records
    # them relative to itself.
    given = [join_relative(str(sample_shards), i["path"]) for i in manifest.inputs]
    assert given == [str(d) for d in sample_documents]
    documents = [
        (path, DocumentsManifest.from_json((Path(path) / MANIFEST_NAME).read_text()))
        for path in given
    ]
    vocab = VocabMetadata.from_json((sample_vocab / VOCAB_METADATA_FILE).read_text())
    assert text == dataset_card(manifest, documents, vocab, run_versions(manifest.bertkit_version))
    data = DatasetCard(text, ignore_metadata_errors=False).data.to_dict()
    assert data["license"] == ["cc-by-sa-3.0", "other"] and data["language"] == ["en"]
    assert data["size_categories"] == ["10K<n<100K"]
    wiki, books = sample_documents
    commands = re.search(r"```bash\n(.*?)```", text, re.S).group(1).split("\nbertkit ")
    assert len(commands) == 4
    wikipedia = parsed(WikipediaConfig, commands[0], "wikipedia")
    assert wikipedia.output == str(wiki) and wikipedia.recorded() == documents[0][1].config
    books_config = parsed(BooksConfig, "bertkit " + commands[1], "books")
    assert books_config.output == str(books)
    assert books_config.recorded() == documents[1][1].config
    examples_config = parsed(ExamplesConfig, "bertkit " + commands[3], "examples")
    recorded = {k: v for k, v in dataclasses.asdict(examples_config).items() if _recorded(k, v)}
    assert json.loads(json.dumps(recorded)) == manifest.config


def test_the_same_run_elsewhere_writes_the_same_card(
    tmp_path: Path, sample_shards: Path, sample_documents, sample_vocab
) -> None:
    output = tmp_path / "again"
    flags_given = ["--max-seq-length", "128", "--dupe-factor", "2", "--heldout-fraction", "0.05"]
    argv = ["--documents", *map(str, sample_documents), "--vocab", str(sample_vocab)]
    assert (
        examples.run([*argv, "--output", str(output), *flags_given, "--samples-per-shard", "2000"])
        == 0
    )
    for name in (DATASET_CARD_NAME, "manifest.json"):
        assert (output / name).read_bytes() == (sample_shards / name).read_bytes()
    assert examples.run([*argv, "--output", str(output), *flags_given, "--overwrite",
                         "--samples-per-shard", "2000"]) == 0  # fmt: skip
    assert (output / DATASET_CARD_NAME).read_bytes() == (
        sample_shards / DATASET_CARD_NAME
    ).read_bytes()


def test_a_dedup_directory_takes_its_inputs_licences_languages_and_commands() -> None:
    """A card over `bertkit dedup` output lists the licences of what dedup read (it removes
    documents; their terms are the inputs'), and the commands that made those inputs."""
    dedup = dataclasses.replace(
        documents_manifest("dedup", ["docs/wiki", "docs/books"], {}),
        inputs=[
            {"path": "docs/wiki", "stage": "wikipedia"},
            {"path": "docs/books", "stage": "books"},
        ],
    )
    inputs = {"docs/dedup": [("docs/wiki", WIKIPEDIA), ("docs/books", BOOKS)]}
    card = dataset_card(shards_manifest(), [("docs/dedup", dedup)], VOCAB, VERSIONS, inputs)
    header = header_of(card)
    assert header["license"] == ["cc-by-sa-3.0", "other"]
    assert header["license_name"] == "public-domain"
    assert header["language"] == ["en"]
    assert header["source_datasets"] == ["extended|wikipedia", "extended|other-project-gutenberg"]
    DatasetCardData(**header)
    assert "| `docs/dedup` | dedup | 2 | 5,000 | cc-by-sa-3.0, public-domain | — |" in card
    commands = card.split("```bash\n")[1].split("```")[0].splitlines()
    assert [line.split()[1] for line in commands if line.startswith("bertkit")] == [
        "wikipedia",
        "books",
        "dedup",
        "vocab",
        "examples",
    ]
    # Without its inputs' manifests (unreadable now), the licence is unknown, as before.
    alone = header_of(dataset_card(shards_manifest(), [("docs/dedup", dedup)], VOCAB, VERSIONS))
    assert alone["license"] == ["unknown"]
