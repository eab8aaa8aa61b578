"""Dataflow Flex Templates for the Beam stages: their parameters, and the launcher's entry.

A Flex Template is a container image plus a JSON spec. Dataflow starts the image's launcher,
which runs `infra/dataflow/main.py` with the template's parameters as `--name=value` flags
(plus Dataflow's own: `--runner`, `--project`, `--region`, `--temp_location`, …); that program
builds the pipeline, submits the job and returns without waiting for it
(`--no_wait_until_finish`). One image serves every stage: each template names a tag of it
that sets `BERTKIT_STAGE` (infra/dataflow/build.sh; `gcloud dataflow flex-template build
--env` cannot, as it sets variables only in an image gcloud builds itself), and `launch`
runs that stage's command.

The parameters each template declares (`metadata/<stage>.json`) are generated here from the
stage's flag dataclass, so they cannot drift from the command line; `tests/test_infra.py`
checks the committed files against this module:

    python -m pipelines.dataflow infra/dataflow/metadata     # rewrite metadata/*.json

Flex Templates pass every value as a string after `=`. A yes/no flag (`--overwrite`) arrives
as `--overwrite=true`, which `launch` turns into the `--overwrite` / `--no-overwrite` that the
command takes; a repeatable flag (`--input`, `--documents`) takes a comma list, which `launch`
turns into the flag once per item (`documents=gs://b/enwiki,gs://b/books` → `--documents
gs://b/enwiki --documents gs://b/books`), so a path holding a comma cannot be given there. A
flag with its own comma parser (`max_seq_length=128,512`) passes whole.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipelines import books, chain, corpus, dedup, vocab, wikipedia
from pipelines.examples import cli as examples
from pipelines.examples.config import ExamplesConfig

STAGE_ENV = "BERTKIT_STAGE"
# The image the launcher runs in, set beside STAGE_ENV in each stage's tag by build.sh: the
# workers' image too, unless the launch names another.
IMAGE_ENV = "BERTKIT_IMAGE"
# The flags that ship bertkit to the workers (pipelines/beam/shipping.py): without one, a
# stage would build a wheel from a source tree the launcher image does not have.
_SHIPPING_FLAGS = ("sdk_container_image", "worker_harness_container_image", "setup_file")
_PACKAGE_FLAGS = ("extra_package", "extra_packages")


@dataclasses.dataclass(frozen=True)
class TemplateStage:
    name: str
    flags: type  # the stage's flag dataclass (pipelines.command.flags)
    run: Callable[[list[str] | None], int]
    description: str
    # The command's entry point (its run through stage_main: one line for a refusal).
    main: Callable[[list[str] | None], None]


# The Beam stages, in the chain's order, then the chain itself (all of them in one job).
STAGES = {
    stage.name: stage
    for stage in (
        TemplateStage(
            "wikipedia",
            wikipedia.WikipediaConfig,
            wikipedia.run,
            "bertkit wikipedia: sentence-split articles from a pages-articles dump",
            wikipedia.main,
        ),
        TemplateStage(
            "books",
            books.BooksConfig,
            books.run,
            "bertkit books: sentence-split paragraphs from plain-text books",
            books.main,
        ),
        TemplateStage(
            "corpus",
            corpus.CorpusConfig,
            corpus.run,
            "bertkit corpus: sentence-split documents from JSON lines or Parquet records",
            corpus.main,
        ),
        TemplateStage(
            "dedup",
            dedup.DedupConfig,
            dedup.run,
            "bertkit dedup: documents without exact and near (MinHash) duplicates",
            dedup.main,
        ),
        TemplateStage(
            "vocab",
            vocab.VocabConfig,
            vocab.run,
            "bertkit vocab: a WordPiece vocabulary from a sample of documents",
            vocab.main,
        ),
        TemplateStage(
            "examples",
            ExamplesConfig,
            examples.run,
            "bertkit examples: documents to BERT pre-training shards (sentence pairs or full "
            "sentences, masked or not)",
            examples.main,
        ),
        TemplateStage(
            "chain",
            chain.ChainConfig,
            chain.run,
            "bertkit chain: dumps, books and/or JSON lines to pre-training shards in one job "
            "(documents, vocabulary, examples)",
            chain.main,
        ),
    )
}


def _flag_of(spec: dataclasses.Field) -> str:
    """The parameter's name: the flag in its `--a_b` spelling, which every command takes."""
    return (spec.metadata.get("flag") or spec.name).replace("-", "_")


def _type_of(spec: dataclasses.Field) -> str:
    return str(spec.type).replace(" ", "")


def _is_bool(spec: dataclasses.Field) -> bool:
    """A yes/no flag; `bool | None` (unset: the input decides, e.g. examples' --cased) too."""
    return _type_of(spec) in ("bool", "bool|None")


def _is_list(spec: dataclasses.Field) -> bool:
    """A repeatable flag (`--input a --input b`); one with its own parser takes a comma
    list already (`--max_seq_length 128,512`)."""
    return _type_of(spec).startswith("tuple[") and not spec.metadata.get("parse")


def template_metadata(stage: TemplateStage) -> dict[str, Any]:
    """The Flex Template `metadata.json` of a stage: one parameter per flag of its command."""
    parameters = []
    for spec in dataclasses.fields(stage.flags):
        required = spec.default is dataclasses.MISSING
        help_text = spec.metadata.get("help", "")
        if _is_list(spec):
            help_text += "; several as a comma list"
        if not required and spec.default not in (None, False, ()):
            default = spec.default
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else str(default)
            help_text += f" (default {shown})"
        parameter: dict[str, Any] = {
            "name": _flag_of(spec),
            "label": _flag_of(spec).replace("_", " ").capitalize(),
            "helpText": help_text,
            "isOptional": not required,
        }
        if _is_bool(spec):
            parameter["regexes"] = ["^(true|false)$"]
        elif spec.metadata.get("choices"):
            parameter["regexes"] = ["^(" + "|".join(map(str, spec.metadata["choices"])) + ")$"]
        parameters.append(parameter)
    return {
        "name": f"bertkit-{stage.name}",
        "description": stage.description,
        "parameters": parameters,
    }


def template_argv(stage: TemplateStage, argv: Sequence[str]) -> list[str]:
    """Flex Template flags → the command's: `--overwrite=true` → `--overwrite`, `=false` →
    `--no-overwrite`; a comma list for a repeatable flag → the flag once per value; every
    other flag (Dataflow's included) passes unchanged."""
    fields = {_flag_of(spec): spec for spec in dataclasses.fields(stage.flags)}
    result = []
    for arg in argv:
        name, equals, value = arg.removeprefix("--").partition("=")
        spec = fields.get(name.replace("-", "_")) if arg.startswith("--") and equals else None
        if spec is not None and _is_bool(spec):
            if value.lower() not in ("true", "false"):
                raise SystemExit(f"--{name}={value}: a yes/no parameter takes true or false")
            result.append(f"--{name}" if value.lower() == "true" else f"--no-{name}")
        elif spec is not None and _is_list(spec):
            result.extend(f"--{name}={item}" for item in value.split(",") if item)
        else:
            result.append(arg)
    return result


def launch(stage_name: str, argv: Sequence[str]) -> int:
    """What the template launcher runs: the stage's command on the template's flags."""
    if stage_name not in STAGES:
        raise SystemExit(
            f"{STAGE_ENV}={stage_name!r}: not a Beam stage; one of {', '.join(STAGES)} (set "
            "in the image of each stage's template by infra/dataflow/build.sh)"
        )
    stage = STAGES[stage_name]
    flags = template_argv(stage, argv)
    if not _needs_no_image(flags):
        image = os.environ.get(IMAGE_ENV)
        if not image:
            print(
                f"bertkit {stage.name}: error: the template launcher needs "
                "--sdk_container_image=IMAGE (a template parameter), the image the template "
                "was built from: infra/dataflow/run.sh passes it",
                file=sys.stderr,
            )
            return 2
        flags.append(f"--sdk_container_image={image}")
    # The launcher's job is to submit: the job runs on without it, and the stage returns
    # with the job's id (pipelines.beam.runner.report_submission). Through the command's
    # main, so that a refusal or a failure is its one line, not a traceback.
    try:
        stage.main([*flags, "--no_wait_until_finish"])
    except SystemExit as exited:
        return exited.code if isinstance(exited.code, int) else 1
    return 0


def _needs_no_image(flags: Sequence[str]) -> bool:
    """Whether the flags run the job on a runner other than Dataflow, or ship bertkit to
    Dataflow's workers themselves (an image, a setup file, a package)."""
    options = PipelineOptions(list(flags))
    if "dataflow" not in str(options.view_as(StandardOptions).runner).lower():
        return True
    given = options.get_all_options(retain_unknown_options=True)
    return any(given.get(name) for name in (*_SHIPPING_FLAGS, *_PACKAGE_FLAGS))


def write_metadata(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for stage in STAGES.values():
        path = directory / f"{stage.name}.json"
        path.write_text(json.dumps(template_metadata(stage), indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("directory", type=Path, help="where to write <stage>.json")
    args = parser.parse_args(argv)
    for path in write_metadata(args.directory):
        print(path)


if __name__ == "__main__":
    sys.exit(main())
