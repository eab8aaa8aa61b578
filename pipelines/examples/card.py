"""The dataset card: `README.md` beside a shards directory's manifest, in the Hugging Face
dataset-card format (a YAML header, then Markdown), made from the records alone.

The header says what the Hub indexes: `license` and `language` from the inputs (a Wikipedia
dump's dbname, `enwiki` → en, CC BY-SA 3.0; Project Gutenberg books, public domain:
`license: other` with `license_name`; a documents stage that recorded `license` or
`language` in its config), `size_categories` from the examples made, `source_datasets`,
`task_categories: [fill-mask]` and `pretty_name`. The body gives the counts (examples per
length and split, tokens, documents, the NotNext share, the recipe), each input's terms,
the commands that made the data, rebuilt from what each stage recorded (the documents
manifests, vocab.json, manifest.json) with the flag names of their config dataclasses, and
the versions.

Like the manifest, the card holds no timestamps, host names or --output: the same inputs
and flags give the same bytes, wherever they are written.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import platform
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.books.config import BooksConfig
from pipelines.command.flags import flag_name
from pipelines.corpus.config import CorpusConfig
from pipelines.dedup.config import DedupConfig
from pipelines.examples.config import ExamplesConfig
from pipelines.io import storage
from pipelines.io.recorded_paths import resolve_path
from pipelines.vocab.config import VocabConfig
from pipelines.wikipedia.config import WikipediaConfig
from schemas.manifest import MANIFEST_NAME, DocumentsManifest
from schemas.shards import PAIRS, STATIC, ShardsManifest
from schemas.vocab import VocabMetadata

# The Hub's size categories, smallest first: each is below the next power of ten.
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
    (10_000_000_000, "1B<n<10B"),
    (100_000_000_000, "10B<n<100B"),
    (1_000_000_000_000, "100B<n<1T"),
)
# Licence ids the Hub knows (https://huggingface.co/docs/hub/repositories-licenses) that a
# corpus is likely to be given under; any other name becomes `other` with `license_name`.
HUB_LICENSES = frozenset(
    ("apache-2.0", "mit", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-2.0", "cc-by-3.0",
     "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0",
     "cc-by-nd-4.0", "cc-by-nc-nd-4.0", "gfdl", "gpl-2.0", "gpl-3.0", "lgpl-3.0", "odc-by",
     "odbl", "pddl", "unlicense", "openrail")
)  # fmt: skip
WIKIPEDIA_LICENSE = "cc-by-sa-3.0"
PUBLIC_DOMAIN = "public-domain"
# The stages whose flags the card can name from their config dataclasses; another stage's
# recorded config is written as `--key value`, the convention every bertkit command keeps.
STAGE_CONFIGS: dict[str, type] = {
    "wikipedia": WikipediaConfig,
    "books": BooksConfig,
    "corpus": CorpusConfig,
    "dedup": DedupConfig,
}
# Fields a documents manifest records in bytes (`recorded()`): the flag, its unit.
SCALED_FIELDS = {
    "split_mb": ("split_bytes", 1 << 20),
    "file_mb": ("max_file_text_bytes", 1 << 20),
    "unit_mb": ("unit_bytes", 1 << 20),
    "max_line_kb": ("max_line_bytes", 1 << 10),
}
NOT_SHOWN = ("overwrite",)  # how to write, not what: left out of every command
MAX_LISTED_INPUTS = 20  # more input files are named by their folder (the manifest lists them)
OUTPUT_PLACEHOLDER = "SHARDS_DIR"
WRAP = 88
_DBNAME = re.compile(r"([a-z][a-z0-9_]*?)wiki-")
_LANGUAGE = re.compile(r"[a-z]{2,3}")
VERSIONED = ("apache-beam", "tokenizers", "pyarrow", "numpy")


@dataclasses.dataclass(frozen=True, slots=True)
class SourceTerms:
    """What the card says of one documents directory: its licence, language and origin."""

    license: str  # a Hub licence id, "other" or "unknown"
    license_name: str | None  # with "other": the licence's name
    language: str | None  # an ISO 639 code, None when not known
    source: str  # a source_datasets entry
    name: str  # for pretty_name: "enwiki", "4 books"
    note: str  # a sentence for the body
    # A `bertkit dedup` directory: the terms of the directories it was made from, which the
    # header lists in its place (dedup removes documents; their licences are the inputs').
    parts: tuple[SourceTerms, ...] = ()

    def header_terms(self) -> tuple[SourceTerms, ...]:
        return self.parts or (self,)


def run_versions(bertkit_version: str) -> dict[str, str]:
    """The versions this run of the stage used: bertkit's, the libraries', Python's."""
    versions = {"bertkit": bertkit_version}
    for package in VERSIONED:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    versions["python"] = platform.python_version()
    return versions


def dataset_card(
    manifest: ShardsManifest,
    documents: Sequence[tuple[str, DocumentsManifest]],
    vocab: VocabMetadata,
    versions: Mapping[str, str],
    dedup_inputs: Mapping[str, Sequence[tuple[str, DocumentsManifest]]] | None = None,
) -> str:
    """README.md for a shards directory: `documents` are its inputs (directory, manifest) in
    the manifest's order, `vocab` the vocabulary's vocab.json, `versions` run_versions();
    `dedup_inputs` maps a `bertkit dedup` directory to the (directory, manifest) it read, for
    the licences and languages it inherits."""
    inherited = dedup_inputs or {}
    terms = [
        source_terms(path, docs, [source_terms(*item) for item in inherited.get(path, ())])
        for path, docs in documents
    ]
    examples = sum(s.samples for out in manifest.outputs.values() for s in out.splits.values())
    lengths = ", ".join(sorted(manifest.outputs, key=lambda n: manifest.outputs[n].max_seq_length))
    sources = " and ".join(dict.fromkeys(t.name for t in terms)) or "documents"
    pretty_name = f"BERT pre-training examples of {sources} ({lengths})"
    lines = ["---", *card_header(terms, examples, pretty_name), "---", "", f"# {pretty_name}", ""]
    lines += _summary(manifest, examples)
    lines += _contents(manifest)
    lines += _sources(documents, terms)
    lines += _commands(manifest, documents, vocab, inherited)
    lines += _versions(manifest, documents, vocab, versions)
    lines += [
        "## Reading it",
        "",
        "```bash",
        f"bertkit inspect {OUTPUT_PLACEHOLDER} --stats            # every shard read and checked",
        f"bertkit inspect {OUTPUT_PLACEHOLDER} --show 2           # examples with their tokens",
        f"bertkit inspect {OUTPUT_PLACEHOLDER} --parquet examples.parquet --limit 10000",
        "```",
    ]
    return "\n".join(lines) + "\n"


def card_header(terms: Sequence[SourceTerms], examples: int, pretty_name: str) -> list[str]:
    """The YAML header's lines (without the `---` fences), keys in the Hub's usual order."""
    terms = [part for term in terms for part in term.header_terms()]
    licenses = list(dict.fromkeys(t.license for t in terms)) or ["unknown"]
    names = list(dict.fromkeys(t.license_name for t in terms if t.license_name))
    languages = list(dict.fromkeys(t.language for t in terms if t.language))
    lines = _yaml_list("license", licenses)
    if names:
        lines.append(f"license_name: {_yaml_scalar(' and '.join(names))}")
    if languages:
        lines += _yaml_list("language", languages)
    lines += _yaml_list("size_categories", [size_category(examples)])
    lines += _yaml_list("source_datasets", list(dict.fromkeys(t.source for t in terms)))
    lines += _yaml_list("task_categories", ["fill-mask"])
    lines += _yaml_list("task_ids", ["masked-language-modeling"])
    lines.append(f"pretty_name: {_yaml_scalar(pretty_name)}")
    lines += _yaml_list("tags", ["bertkit", "bert", "webdataset"])
    return lines


def size_category(examples: int) -> str:
    for below, name in SIZE_CATEGORIES:
        if examples < below:
            return name
    return "n>1T"


def source_terms(
    path: str, manifest: DocumentsManifest, parts: Sequence[SourceTerms] = ()
) -> SourceTerms:
    """The licence, language and origin of one documents directory, from its manifest; a
    `bertkit dedup` directory's from `parts`, the terms of the directories it read."""
    stage, config, counts = manifest.stage, manifest.config, manifest.counts
    documents = counts.get("documents", 0)
    path = storage.redact(path)
    if stage == "dedup" and parts:
        licences = ", ".join(dict.fromkeys(_licence_shown(part) for part in parts))
        name = f"{documents:,} documents deduplicated from " + ", ".join(p.name for p in parts)
        note = f"{path}: {name}; the terms of the directories it was made from apply:"
        note += "".join(f"\n  - {part.note}" for part in parts)
        source = parts[0].source if len({p.source for p in parts}) == 1 else "extended|other"
        languages = {part.language for part in parts}
        language = languages.pop() if len(languages) == 1 else None
        return SourceTerms(licences, None, language, source, name, note, tuple(parts))
    if stage == "wikipedia":
        dbname = dump_dbname([str(i.get("path", "")) for i in manifest.inputs])
        language = dbname if dbname and _LANGUAGE.fullmatch(dbname) else None
        language = "en" if dbname == "simple" else language
        name = f"{dbname}wiki" if dbname else "Wikipedia"
        note = (
            f"{path}: Wikipedia ({name}), {documents:,} articles. Wikipedia's text is licensed "
            "under the Creative Commons Attribution-ShareAlike 3.0 licence (CC BY-SA 3.0) and "
            "the GNU Free Documentation License (GFDL): reuse must credit the authors and "
            "share alike."
        )
        return SourceTerms(WIKIPEDIA_LICENSE, None, language, "extended|wikipedia", name, note)
    given_license, given_language = config.get("license"), config.get("language")
    if given_license or given_language or stage != "books":
        name = f"{documents:,} {config.get('source') or stage} documents"
        if stage == "dedup":  # the licences are those of its inputs, in their manifests
            stages = ", ".join(dict.fromkeys(str(i.get("stage")) for i in manifest.inputs))
            name = f"{documents:,} documents deduplicated from {stages or 'documents'}"
        return _recorded_terms(path, stage, name, given_license, given_language)
    gutenberg = counts.get("gutenberg_boilerplate_removed", 0)
    files = counts.get("input_files", len(manifest.inputs))
    name = f"{documents:,} books"
    if config.get("format", "files") == "files" and gutenberg:
        note = (
            f"{path}: {name}; Project Gutenberg's header and licence were found (and removed) "
            f"in {gutenberg:,} of its {files:,} files. Project Gutenberg's books are in the "
            "public domain in the United States; check the law where you use them."
        )
        source = "extended|other-project-gutenberg"
        return SourceTerms("other", PUBLIC_DOMAIN, None, source, name, note)
    note = f"{path}: {name} of unknown licence: check each book's terms before you publish."
    return SourceTerms("unknown", None, None, "extended|other-books", name, note)


def _recorded_terms(
    path: str, stage: str, name: str, license_given: Any, language_given: Any
) -> SourceTerms:
    """A stage that recorded the licence (SPDX) and language (BCP-47) it was given (`bertkit
    corpus --license --language`), or that did not: unknown."""
    license_id, license_name = "unknown", None
    if license_given:
        given = str(license_given).strip(" ")  # spaces only: a control character is kept, quoted
        license_id = given.lower() if given.lower() in HUB_LICENSES else "other"
        license_name = None if license_id != "other" else given
    language = str(language_given).strip() if language_given else None
    said = f"licence {license_given}" if license_given else "licence not recorded"
    note = f"{path}: {name}, {said}" + (f", language {language}." if language else ".")
    # The header takes an ISO 639 code: a tag's language (pt-BR → pt); the tag is in the body.
    primary = language.split("-")[0].lower() if language else ""
    language = primary if _LANGUAGE.fullmatch(primary) else None
    if not license_given:
        note += " Check the source's terms before you publish."
    return SourceTerms(license_id, license_name, language, f"extended|other-{stage}", name, note)


def dump_dbname(paths: Sequence[str]) -> str | None:
    """The wiki's dbname prefix from dump file names (`enwiki-latest-…` → "en"), when every
    input names the same one; else None."""
    found = [_DBNAME.match(storage.basename(path)) for path in paths]
    prefixes = {match.group(1) for match in found if match}
    if not paths or None in found or len(prefixes) != 1:
        return None
    return prefixes.pop().replace("_", "-")


# --------------------------------------------------------------------------- the body


def _summary(manifest: ShardsManifest, examples: int) -> list[str]:
    kind = (
        "Sentence pairs with a next-sentence label (Google's BERT)"
        if manifest.sequences == PAIRS
        else "Full-sentence sequences packed across documents (RoBERTa's FULL-SENTENCES)"
    )
    masks = (
        "static masks drawn once and stored"
        if manifest.masking == STATIC
        else "no masks stored (the trainer draws them)"
    )
    shards = len(manifest.all_shards())
    return [
        f"{kind}, {masks}, made by `bertkit examples`: {examples:,} examples in {shards:,} "
        f"WebDataset shards of `{manifest.record}` records (schema {manifest.schema_version}), "
        "each listed with its size and sha256 in `manifest.json` beside this card.",
        "",
    ]


def _contents(manifest: ShardsManifest) -> list[str]:
    pairs, masked = manifest.sequences == PAIRS, manifest.masking == STATIC
    head = "| output | split | examples | shards | tokens |"
    rule = "|---|---|---:|---:|---:|"
    if masked:
        head, rule = head + " predictions |", rule + "---:|"
    if pairs:
        head, rule = head + " NotNext |", rule + "---:|"
    lines = ["## Contents", "", head, rule]
    for name, output in sorted(manifest.outputs.items(), key=lambda o: o[1].max_seq_length):
        for split in sorted(output.splits, key=lambda s: (s != "train", s)):
            shards = output.splits[split]
            row = f"| {name} | {split} | {shards.samples:,} | {len(shards.shards):,} | "
            row += f"{shards.tokens:,} |"
            if masked:
                row += f" {shards.predictions:,} |"
            if pairs:
                share = shards.not_next / shards.samples if shards.samples else 0.0
                row += f" {share:.3f} |"
            lines.append(row)
    counts, config = manifest.counts, manifest.config
    lines += [
        "",
        f"From {counts.get('documents', 0):,} documents ({counts.get('documents_train', 0):,} "
        f"train, {counts.get('documents_heldout', 0):,} held out by a hash of their id), "
        f"{counts.get('sentences', 0):,} sentences, {counts.get('tokens', 0):,} tokens.",
        "",
        f"Recipe: sequences {manifest.sequences}, masking {manifest.masking}"
        + _masking_recipe(manifest)
        + f", dupe factor {config.get('dupe_factor')}, held-out fraction "
        f"{config.get('heldout_fraction')}, seed {config.get('seed')}. Vocabulary: "
        f"{manifest.vocab.get('size', 0):,} WordPiece tokens, "
        f"{'cased' if manifest.vocab.get('cased') else 'uncased'}, vocab.txt sha256 "
        f"`{manifest.vocab.get('sha256')}`.",
        "",
    ]
    if manifest.deviations:
        lines += ["Where the algorithm differs from Google's (or RoBERTa's):", ""]
        lines += [f"- {deviation}" for deviation in manifest.deviations] + [""]
    return lines


def _masking_recipe(manifest: ShardsManifest) -> str:
    if manifest.masking != STATIC:
        return ""
    config = manifest.config
    most = ", ".join(
        f"{out.max_predictions_per_seq} predictions at length {out.max_seq_length}"
        for out in sorted(manifest.outputs.values(), key=lambda o: o.max_seq_length)
    )
    whole = "on" if config.get("whole_word_mask") else "off"
    return (
        f" (masked-lm-prob {config.get('masked_lm_prob')}, at most {most}, "
        f"whole-word masking {whole})"
    )


def _sources(documents: Sequence[tuple[str, DocumentsManifest]], terms: list[SourceTerms]) -> list:
    lines = ["## Sources and licences", ""]
    lines += ["| documents | stage | documents | text bytes | licence | language |"]
    lines += ["|---|---|---:|---:|---|---|"]
    for (path, manifest), term in zip(documents, terms, strict=True):
        licence = _licence_shown(term)
        lines.append(
            f"| {_cell(path)} | {manifest.stage} | {manifest.counts.get('documents', 0):,} | "
            f"{manifest.counts.get('text_bytes', 0):,} | {licence} | {term.language or '—'} |"
        )
    lines += [""] + [f"- {term.note}" for term in terms] + [""]
    return lines


def _licence_shown(term: SourceTerms) -> str:
    return (term.license_name or "other") if term.license == "other" else term.license


def _cell(text: str) -> str:
    return f"`{storage.redact(text)}`".replace("|", "\\|")


def _commands(
    manifest: ShardsManifest,
    documents: Sequence[tuple[str, DocumentsManifest]],
    vocab: VocabMetadata,
    inherited: Mapping[str, Sequence[tuple[str, DocumentsManifest]]],
) -> list[str]:
    lines = ["## How it was made", "", "```bash"]
    made = set()  # a directory two dedup runs read is made once
    for path, docs in documents:
        for source, source_docs in inherited.get(path, ()):
            if source not in made:
                lines.append(documents_command(source, source_docs))
                made.add(source)
        lines.append(documents_command(path, docs))
    if "origin" in manifest.vocab:  # a released BERT's vocabulary, used as it was shipped
        lines.append("# the vocabulary: a released BERT's, not made by `bertkit vocab`")
    else:
        lines.append(vocab_command(vocab))
    lines.append(examples_command(manifest))
    lines += [
        "```",
        "",
        "Each command is rebuilt from what its stage recorded (the documents manifests, "
        "vocab.json, manifest.json): flags at their defaults are left out, and so are "
        "`--overwrite` and the runner's flags (`--runner`, `--direct_num_workers`, …), which "
        f"change where and how the work ran, not its bytes. {OUTPUT_PLACEHOLDER} is the "
        "directory of this card: the manifest records no output path, so the same run "
        "anywhere gives the same bytes.",
        "",
    ]
    return lines


def documents_command(path: str, manifest: DocumentsManifest) -> str:
    """`bertkit STAGE --input … --output PATH …` from a documents manifest. A dedup
    manifest's documents directories are recorded relative to it: shown as `PATH` is given."""
    files = [str(i.get("path", "")) for i in manifest.inputs]
    if manifest.stage == "dedup":
        files = [resolve_path(f, path, MANIFEST_NAME) for f in files]
    inputs: list[str] = files
    comment = ""
    if len(files) > MAX_LISTED_INPUTS:
        inputs = folder_globs(files)
        comment = f"  # {len(files):,} files, each listed in {path}/_manifest.json"
    given = {"input": inputs, "documents": inputs, "output": path}  # files, or directories
    config_class = STAGE_CONFIGS.get(manifest.stage)
    if config_class is None:
        flags = [*_flag_words("input", inputs), *_flag_words("output", path)]
        for key, value in sorted(manifest.config.items()):
            flags += _flag_words(key, value)
        return _wrap(["bertkit", manifest.stage, *flags]) + comment
    values = {}
    for spec in dataclasses.fields(config_class):
        if spec.name in SCALED_FIELDS and SCALED_FIELDS[spec.name][0] in manifest.config:
            key, unit = SCALED_FIELDS[spec.name]
            scaled = manifest.config[key] / unit
            values[spec.name] = int(scaled) if scaled == int(scaled) else scaled
        elif spec.name in manifest.config:
            values[spec.name] = manifest.config[spec.name]
    return _wrap(["bertkit", manifest.stage, *_config_flags(config_class, given, values)]) + comment


def _folder(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else "."


def folder_globs(files: Sequence[str]) -> list[str]:
    """A glob per folder of `files`, keeping the file-name ending they all share there
    (`books/*.txt`, `dumps/*.xml.bz2`): a glob over the whole folder would take in what the
    run did not read. An ending is a whole extension (from a dot), so `*.txt` never becomes
    `*1.txt`; files with none in common get `folder/*`."""
    names: dict[str, list[str]] = {}
    for file in files:
        folder = storage.parent(file) if storage.is_remote(file) else _folder(file)
        names.setdefault(folder, []).append(file.rsplit("/", 1)[-1])
    return [f"{folder}/*{_shared_ending(names[folder])}" for folder in sorted(names)]


def _shared_ending(names: Sequence[str]) -> str:
    """The longest ending from a dot that every name has after at least one character."""
    first, *others = names
    for start in range(1, len(first)):
        ending = first[start:]
        if ending[0] == "." and all(
            len(name) > len(ending) and name.endswith(ending) for name in others
        ):
            return ending
    return ""


def vocab_command(vocab: VocabMetadata) -> str:
    """`bertkit vocab …` from vocab.json's config (every flag, as parsed)."""
    return _wrap(["bertkit", "vocab", *_config_flags(VocabConfig, {}, vocab.config)])


def examples_command(manifest: ShardsManifest) -> str:
    """`bertkit examples …` from the shards manifest's config (every flag that shapes the
    output; the masks' count only where it is not the one derived from the probability)."""
    config = dict(manifest.config)
    derived = [round(n * config.get("masked_lm_prob", 0.15)) for n in config["max_seq_lengths"]]
    if manifest.masking == STATIC and list(config.get("max_predictions_per_seq", [])) == derived:
        del config["max_predictions_per_seq"]
    given = {"output": OUTPUT_PLACEHOLDER}
    return _wrap(["bertkit", "examples", *_config_flags(ExamplesConfig, given, config)])


def _config_flags(
    config_class: type, given: Mapping[str, Any], recorded: Mapping[str, Any]
) -> list[str]:
    """The flags of `config_class` whose values differ from its defaults, in field order:
    required fields always, `given` values as they are."""
    words: list[str] = []
    for spec in dataclasses.fields(config_class):
        if spec.name in NOT_SHOWN:
            continue
        if spec.name in given:
            words += _flag_words(spec.name, given[spec.name], spec)
            continue
        if spec.name not in recorded:
            continue
        value = recorded[spec.name]
        required = spec.default is dataclasses.MISSING
        default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        if required or value != default:
            words += _flag_words(spec.name, value, spec)
    return words


def _flag_words(name: str, value: Any, spec: dataclasses.Field | None = None) -> list[str]:
    """One flag as shell words: `--name value`, `--name a b` for a list (comma-joined where
    the flag parses a comma list), `--name` / `--no-name` for a bool."""
    metadata = spec.metadata if spec is not None else {}
    flag = flag_name(metadata.get("flag") or name)
    if isinstance(value, bool):
        if metadata.get("switch"):
            return [flag]
        return [flag if value else "--no-" + flag[2:]]
    if isinstance(value, list | tuple):
        if metadata.get("parse"):
            return [f"{flag} " + ",".join(str(v) for v in value)]
        quoted = [_quote(str(v)) for v in value]
        return [f"{flag} {quoted[0]}", *quoted[1:]] if quoted else []
    return [f"{flag} {_quote(str(value))}"]


def _quote(word: str) -> str:
    return shlex.quote(storage.redact(word))


def _wrap(words: list[str]) -> str:
    """Words joined by spaces, broken with ` \\` where a line would pass WRAP characters."""
    lines, line = [], ""
    for word in words:
        if line.strip() and len(line) + 1 + len(word) > WRAP:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def _versions(
    manifest: ShardsManifest,
    documents: Sequence[tuple[str, DocumentsManifest]],
    vocab: VocabMetadata,
    versions: Mapping[str, str],
) -> list[str]:
    lines = ["## Versions", "", "| stage | bertkit |", "|---|---|"]
    for path, docs in documents:
        lines.append(f"| {docs.stage} ({_cell(path)}) | {docs.bertkit_version} |")
    if "origin" not in manifest.vocab:  # a released vocabulary: no bertkit made it
        lines.append(f"| vocab | {vocab.bertkit_version} |")
    lines.append(f"| examples | {manifest.bertkit_version} |")
    libraries = ", ".join(f"{name} {version}" for name, version in versions.items())
    lines += ["", f"The examples stage ran with {libraries}.", ""]
    return lines


def _yaml_list(key: str, values: Sequence[str]) -> list[str]:
    return [f"{key}:", *(f"- {_yaml_scalar(v)}" for v in values)]


def _yaml_scalar(value: str) -> str:
    """A YAML string that `yaml.safe_load` (the Hub's card parser) reads back as this very string:
    plain only where no YAML 1.1 rule can read it as anything else (it starts with a letter,
    holds no indicator, is no boolean or null word) or it is one of the size categories
    written here; else double-quoted, every character a parser could fold, strip or refuse
    written as an escape."""
    plain = _PLAIN.fullmatch(value) and not value.endswith(" ")
    if (plain and value.lower() not in _YAML_WORDS) or value in _SIZE_NAMES:
        return value
    return '"' + "".join(_yaml_escaped(c) for c in value) + '"'


# Letters first, so no number, date or `.inf` rule applies; no ':', '#', quote or other indicator.
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9 ._()/+<>|-]*")
# YAML 1.1 words that a plain scalar turns into a boolean or null.
_YAML_WORDS = frozenset(("y", "n", "yes", "no", "on", "off", "true", "false", "null"))
_SIZE_NAMES = frozenset([name for _, name in SIZE_CATEGORIES] + ["n>1T"])
# Characters kept as they are inside double quotes: printable ASCII but the two that need a
# backslash, and printable non-ASCII but the line and paragraph separators (YAML folds them
# as line breaks) and the byte-order mark.
_UNESCAPED = re.compile(
    r"[ !#-\[\]-~\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


def _yaml_escaped(char: str) -> str:
    if _UNESCAPED.fullmatch(char):
        return char
    if char in '"\\':
        return "\\" + char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
