"""`bertkit chain`'s flags, made from the five stages' own flag dataclasses (so a flag's
type, default, bounds and help are written once, in its stage), and the stage configs a
chain's flags give.

- `--wikipedia`, `--books`, `--corpus`: each stage's --input (one or more, at least one
  stage); `--output DIR` holds every output, named as `bertkit demo` names them
  (`DIR/documents/<stage>`, `DIR/vocab`, `DIR/shards`); `--overwrite` is every stage's, and
  deletes those of an earlier chain this run does not write again.
- A documents stage's other flags take its name: `--wikipedia-split-mb`, `--books-format`,
  `--corpus-text-field`, `--books-min-paragraph-words` (their defaults differ by stage).
- The vocabulary's flags keep their names (`--vocab-size`, `--sample-mb`, …) but its
  `--seed`, which is `--vocab-seed` here; the examples' flags keep theirs (`--seed`,
  `--max-seq-length`, `--dupe-factor`, …).
- `--vocab DIR` uses a vocabulary instead of training one (a `bertkit vocab` output or a
  released BERT's): the chain then runs no vocabulary step, and the vocabulary's flags are
  refused. `--cased` / `--no-cased` is the trained vocabulary's casing, or with --vocab the
  released one's where its directory does not say.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pipelines.beam import files
from pipelines.books.config import BooksConfig
from pipelines.command.flags import option
from pipelines.corpus.config import CorpusConfig
from pipelines.examples.config import ExamplesConfig
from pipelines.vocab.config import VocabConfig
from pipelines.wikipedia.config import WikipediaConfig

# The documents stages, in the order their directories are read by vocab and examples.
DOCUMENTS_STAGES: dict[str, type] = {
    "wikipedia": WikipediaConfig,
    "books": BooksConfig,
    "corpus": CorpusConfig,
}
# Fields the chain sets itself: the paths that join the stages, --overwrite, and the one
# casing flag the vocabulary and the examples share.
_WIRED = {"input", "output", "overwrite", "documents", "vocab", "cased"}
_RENAMED_VOCAB = {"seed": "vocab_seed"}
_INPUT_HELP = {
    "wikipedia": "Wikipedia XML dumps (files or globs, repeatable) for `bertkit wikipedia`",
    "books": "book files (files or globs, repeatable) for `bertkit books`",
    "corpus": "JSON lines or Parquet files (files or globs, repeatable) for `bertkit corpus`",
}


class ChainConfigError(ValueError):
    """Flags that cannot make a chain (no input at all)."""


def _copied(spec: dataclasses.Field, name: str, help_prefix: str, stage: str = "") -> tuple:
    """A stage's field as the chain's: `stage` prefixes its name and flag."""
    metadata = dict(spec.metadata)
    if metadata.get("flag") and stage:
        metadata["flag"] = f"{stage}-{metadata['flag']}"
    metadata["help"] = help_prefix + metadata.get("help", "")
    kept = dataclasses.field(default=spec.default, metadata=metadata)
    return (name, spec.type, kept)


def _chain_fields() -> list[tuple]:
    fields: list[tuple] = [
        ("output", "str", option(help="output directory: documents/, vocab/ and shards/ in it")),
        (
            "overwrite",
            "bool",
            option(
                False,
                help="replace every stage's earlier run in --output (one this run does not "
                "write again, such as vocab/ with --vocab DIR, is deleted)",
            ),
        ),
        (
            "vocab",
            "str | None",
            option(
                None,
                metavar="DIR",
                help="use this vocabulary (a `bertkit vocab` output, or a released BERT's "
                "directory with its vocab.txt or tokenizer.json) instead of training one: no "
                "vocabulary step runs",
            ),
        ),
        (
            "cased",
            "bool | None",
            option(
                None,
                help="keep case and accents (default: lower-case and strip accents); with "
                "--vocab, a released vocabulary's casing where its directory does not say it",
            ),
        ),
    ]
    for stage in DOCUMENTS_STAGES:
        spec = option((), help=_INPUT_HELP[stage], metavar="PATH")
        fields.append((stage, "tuple[str, ...]", spec))
    for stage, config_class in DOCUMENTS_STAGES.items():
        for spec in dataclasses.fields(config_class):
            if spec.name not in _WIRED:
                fields.append(_copied(spec, f"{stage}_{spec.name}", f"{stage}: ", stage))
    for spec in dataclasses.fields(VocabConfig):
        if spec.name not in _WIRED:
            name = _RENAMED_VOCAB.get(spec.name, spec.name)
            fields.append(_copied(spec, name, "vocabulary: "))
    for spec in dataclasses.fields(ExamplesConfig):
        if spec.name not in _WIRED:
            fields.append(_copied(spec, spec.name, "examples: "))
    return fields


ChainConfig = dataclasses.make_dataclass(
    "ChainConfig",
    _chain_fields(),
    frozen=True,
    namespace={"__doc__": "Every flag of `bertkit chain` (see pipelines/chain/config.py)."},
)
ChainConfig.__module__ = __name__


def documents_dir(config: Any, stage: str) -> str:
    return files.join(config.output, "documents", stage)


def stages_run(config: Any) -> list[str]:
    """The documents stages given inputs, in their order."""
    return [stage for stage in DOCUMENTS_STAGES if getattr(config, stage)]


def documents_config(config: Any, stage: str) -> Any:
    """A documents stage's config, as `bertkit <stage>` would parse it from the same flags."""
    config_class = DOCUMENTS_STAGES[stage]
    values = {
        spec.name: getattr(config, f"{stage}_{spec.name}")
        for spec in dataclasses.fields(config_class)
        if spec.name not in _WIRED
    }
    return config_class(
        input=getattr(config, stage),
        output=documents_dir(config, stage),
        overwrite=config.overwrite,
        **values,
    )


def vocab_config(config: Any) -> VocabConfig:
    values = {
        spec.name: getattr(config, _RENAMED_VOCAB.get(spec.name, spec.name))
        for spec in dataclasses.fields(VocabConfig)
        if spec.name not in _WIRED
    }
    documents = tuple(documents_dir(config, stage) for stage in stages_run(config))
    return VocabConfig(
        documents=documents,
        output=files.join(config.output, "vocab"),
        overwrite=config.overwrite,
        cased=bool(config.cased),
        **values,
    )


def examples_config(config: Any) -> ExamplesConfig:
    values = {
        spec.name: getattr(config, spec.name)
        for spec in dataclasses.fields(ExamplesConfig)
        if spec.name not in _WIRED
    }
    documents = tuple(documents_dir(config, stage) for stage in stages_run(config))
    return ExamplesConfig(
        documents=documents,
        vocab=config.vocab or files.join(config.output, "vocab"),
        output=files.join(config.output, "shards"),
        overwrite=config.overwrite,
        # A trained vocabulary's vocab.json says its casing: the examples' own flag stays
        # unset, so their manifest is the one `bertkit examples` writes for that vocabulary.
        cased=config.cased if config.vocab else None,
        **values,
    )


def check(config: Any) -> None:
    if not stages_run(config):
        raise ChainConfigError(
            "no input: pass --wikipedia DUMP, --books 'DIR/*.txt' and/or --corpus "
            "'DIR/*.jsonl.zst' (each one or more files or globs)"
        )
    for stage, config_class in DOCUMENTS_STAGES.items():
        if getattr(config, stage):
            continue
        for spec in dataclasses.fields(config_class):
            name = f"{stage}_{spec.name}"
            if spec.name not in _WIRED and getattr(config, name) != spec.default:
                raise ChainConfigError(
                    f"--{name.replace('_', '-')} shapes the {stage} stage, which runs only "
                    f"with --{stage} inputs, and none are given: drop it or give --{stage}"
                )
    if config.vocab is None:
        return
    for spec in dataclasses.fields(VocabConfig):
        name = _RENAMED_VOCAB.get(spec.name, spec.name)
        if spec.name not in _WIRED and getattr(config, name) != spec.default:
            raise ChainConfigError(
                f"--{name.replace('_', '-')} shapes the vocabulary the chain trains, and with "
                f"--vocab {config.vocab} it trains none: drop one of them"
            )
