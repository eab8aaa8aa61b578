"""`bertkit examples` from the command line: parse, check every input, then run the graph.

Its --help is the package docstring (pipelines/examples/__init__.py).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import files
from pipelines.beam.documents import (
    DOCUMENTS_DIRS,
    DocumentsInput,
    DocumentsInputError,
    read_documents_input,
)
from pipelines.beam.empty_outputs import check_examples
from pipelines.beam.planned import Planned
from pipelines.beam.progress import (
    DOCUMENTS_PAIRED,
    DOCUMENTS_TOKENIZED,
    EXAMPLES_MADE,
    EXAMPLES_WRITTEN,
    SHARDS_WRITTEN,
    progress_shown,
)
from pipelines.beam.runner import (
    StagePaths,
    make_pipeline,
    parse_stage,
    report_submission,
    stage_main,
    submitted_only,
)
from pipelines.command.progress import Phase
from pipelines.examples.card import dataset_card, run_versions
from pipelines.examples.config import WORK_DIR, ExamplesConfig
from pipelines.examples.manifest import build_manifest, report
from pipelines.examples.plan import read_documents_inputs
from pipelines.examples.stage_plan import ExamplesPlan, make_examples_plan
from pipelines.examples.transforms import CreateExamples, WriteShards
from pipelines.io import storage
from pipelines.io.recorded_paths import resolve_path
from pipelines.io.vocabulary import Vocabulary, load_vocab
from schemas import REJECTS_DIR, SHARDS_MANIFEST_NAME
from schemas.manifest import MANIFEST_NAME, DocumentsManifest
from schemas.shards import (
    BLOCK_TABLE_SUFFIX,
    DATASET_CARD_NAME,
    PAIRS,
    ShardsManifest,
    block_table_path,
)

# A shard and its block table (schemas/shards.py), as named in their directory.
_SHARD_FILE = rf"shard-[0-9]{{6}}\.tar(?:{re.escape(BLOCK_TABLE_SUFFIX)})?"
_SHARD_PATH = rf"seq[0-9]+/(?:train|heldout)/{_SHARD_FILE}"
_REJECTS_FILE = rf"{REJECTS_DIR}/rejects-[A-Za-z0-9_-]+\.jsonl"

# Every name this stage writes in --output: the manifest, the dataset card, shards and their
# block tables (and their temporary names), rejects and the spill files under _work.
# `--overwrite` deletes these, and nothing else.
_TOP_FILE = rf"(?:{re.escape(SHARDS_MANIFEST_NAME)}|{re.escape(DATASET_CARD_NAME)})"
EARLIER_RUN = (
    rf"{_TOP_FILE}(?:\.tmp-[0-9a-f]{{32}})?"
    rf"|{_SHARD_PATH}(?:\.tmp-[0-9a-f]{{32}})?"
    rf"|{_REJECTS_FILE}|{WORK_DIR}/(?:documents|examples|pieces)/.+"
)


def _vouched_by_manifest(output_dir: str) -> set[str]:
    """The card and the manifest, where manifest.json is a shards manifest."""
    if files.read_own_record(output_dir, SHARDS_MANIFEST_NAME, ShardsManifest.from_json):
        return {SHARDS_MANIFEST_NAME, DATASET_CARD_NAME}
    return set()


# A README.md or manifest.json is this stage's only beside the shards manifest it wrote.
VOUCHED = files.Vouched(
    frozenset({SHARDS_MANIFEST_NAME, DATASET_CARD_NAME}),
    SHARDS_MANIFEST_NAME,
    _vouched_by_manifest,
)


def _shards_listed(output_dir: str) -> files.Listed | None:
    """The shards, block tables and rejects the shards manifest in `output_dir` lists; None
    where there is none, or it is not a shards manifest."""
    record = files.read_own_record(output_dir, SHARDS_MANIFEST_NAME, ShardsManifest.from_json)
    if record is None:
        return None
    manifest, fields = record
    names = set()
    for output in manifest.outputs.values():
        for split in output.splits.values():
            for info in split.shards:
                names.add(info.path)
                if info.block_table is not None:
                    names.add(block_table_path(info.path))
    kinds = f"(?:{_SHARD_PATH})"
    if "rejects_files" in fields:
        kinds += f"|(?:{_REJECTS_FILE})"
        names.update(manifest.rejects_files)
    return files.Listed(kinds, frozenset(names))


# The shards manifest's record of the stage's outputs (`files.earlier_run_files`).
LISTING = files.Listing(SHARDS_MANIFEST_NAME, _shards_listed)

# The temporary names of a shard, a block table, the card and the manifest
# (`files.write_atomically`).
_TEMPORARY = re.compile(rf"(?:{_SHARD_FILE}|{_TOP_FILE})\.tmp-[0-9a-f]{{32}}")

# --documents and --vocab are read, --output written: checked before any work (runner.py).
_PATHS = StagePaths(
    input_dirs=(
        DOCUMENTS_DIRS,
        ("vocab", "vocabulary directory: `bertkit vocab`'s output or a released BERT's"),
    ),
    record=SHARDS_MANIFEST_NAME,
)

_LOG = logging.getLogger(__name__)


def run(argv: list[str] | None = None) -> int:
    """Check the flags and inputs (exit 2 with the reason), then make the shards."""
    description = sys.modules["pipelines.examples"].__doc__
    config, options = parse_stage(ExamplesConfig, argv, "bertkit examples", description, _PATHS)
    try:
        config.validate()
        vocab = load_vocab(config.vocab, files.READER, config.cased)
        inputs = read_documents_inputs(config.documents)
        files.clear_earlier_run(
            config.output,
            EARLIER_RUN,
            config.overwrite,
            "examples",
            vouched=VOUCHED,
            listing=LISTING,
        )
    except (ValueError, OSError) as error:  # ExamplesConfigError, VocabError, … are ValueErrors
        print(f"bertkit examples: {storage.redact(str(error))}", file=sys.stderr)
        return 2
    return run_examples(options, config, vocab, inputs)


def dedup_input_manifests(
    inputs: list[DocumentsInput],
) -> dict[str, list[tuple[str, DocumentsManifest]]]:
    """For each `bertkit dedup` input, the directories it read and their manifests (for the
    dataset card's licences); one that cannot be read now is left out, and the card says
    the licence is unknown."""
    found: dict[str, list[tuple[str, DocumentsManifest]]] = {}
    for item in inputs:
        if item.manifest.stage != "dedup":
            continue
        found[item.directory] = []
        for source in item.manifest.inputs:
            # Recorded relative to the dedup directory (pipelines/io/recorded_paths.py).
            path = resolve_path(
                str(source.get("path", "")), item.directory, MANIFEST_NAME, files.exists
            )
            try:
                read = read_documents_input(path)
            except (DocumentsInputError, OSError) as error:
                _LOG.warning("dataset card: %s: %s", source.get("path"), error)
                continue
            found[item.directory].append((read.directory, read.manifest))
    return found


def run_examples(
    options: PipelineOptions,
    config: ExamplesConfig,
    vocab: Vocabulary,
    inputs: list[DocumentsInput],
) -> int:
    """The graph, with its plan made now from the manifests read; then the report."""
    manifest_path = files.join(config.output, SHARDS_MANIFEST_NAME)
    progress = progress_phases(config, inputs)
    with progress_shown(options, "examples", progress), make_pipeline(options) as pipeline:
        add_examples_steps(pipeline, config, Planned.now(make_examples_plan(config, vocab, inputs)))
    if submitted_only(options):
        return report_submission(pipeline, options, manifest_path, "bertkit examples")
    code = report(manifest_path)
    return code | check_examples(options, manifest_path, config.output, config.heldout_fraction)


def add_examples_steps(
    pipeline: beam.Pipeline, config: ExamplesConfig, planned: Planned[ExamplesPlan]
) -> beam.PCollection:
    """The graph (pipelines/examples/transforms.py), then the dataset card and the manifest,
    written last (a directory with a manifest is complete, its card included); returns the
    manifest's path once written."""
    spills, bucket_counts, summaries = pipeline | "CreateExamples" >> CreateExamples(
        config, planned
    )
    shards = (spills, bucket_counts) | "WriteShards" >> WriteShards(config, planned)
    return (
        pipeline
        | "ManifestTrigger" >> beam.Create([None])
        | "WriteManifest"
        >> planned.pardo(
            lambda plan: _WriteManifestFn(config, plan),
            beam.pvalue.AsList(shards),
            beam.pvalue.AsList(summaries),
        )
    )


class _WriteManifestFn(beam.DoFn):
    """Every shard and unit summary → the dataset card, then the manifest; `_work` deleted."""

    def __init__(self, config: ExamplesConfig, plan: ExamplesPlan) -> None:
        self._config = config
        self._plan = plan

    def process(
        self, _: Any, shards: list[dict[str, Any]], summaries: list[dict[str, Any]]
    ) -> Iterator[str]:
        config, plan = self._config, self._plan
        inputs = list(plan.inputs)
        manifest = build_manifest(config, plan.layout, plan.vocab, inputs, shards, summaries)
        remove_stage_leftovers(config)
        documents = [(i.directory, i.manifest) for i in inputs]
        versions = run_versions(manifest.bertkit_version)
        card = dataset_card(
            manifest, documents, plan.vocab.metadata, versions, dedup_input_manifests(inputs)
        )
        manifest_path = files.join(config.output, SHARDS_MANIFEST_NAME)
        files.write_atomically(files.join(config.output, DATASET_CARD_NAME), card.encode("utf-8"))
        files.write_atomically(manifest_path, manifest.to_json().encode("utf-8"))
        remove_work_dir(config)
        yield manifest_path


def progress_phases(config: ExamplesConfig, inputs: list[DocumentsInput]) -> list[Phase]:
    """The progress line's three steps: documents tokenized of the manifests' count; each
    document paired (or packed) once per dupe pass; examples written of those made (known
    by then)."""
    documents = sum(i.manifest.counts["documents"] for i in inputs)
    return [
        Phase(
            "tokenize",
            DOCUMENTS_TOKENIZED,
            documents,
            "documents",
            rate=(DOCUMENTS_TOKENIZED, "documents"),
        ),
        Phase(
            "pair and mask" if config.sequences == PAIRS else "pack sentences",
            DOCUMENTS_PAIRED,
            documents * config.dupe_factor,
            "document passes",
            rate=(EXAMPLES_MADE, "examples"),
            shown=((EXAMPLES_MADE, "examples"),),
        ),
        Phase(
            "write shards",
            EXAMPLES_WRITTEN,
            EXAMPLES_MADE,
            "examples",
            rate=(EXAMPLES_WRITTEN, "examples"),
            shown=((SHARDS_WRITTEN, "shards"),),
        ),
    ]


def remove_stage_leftovers(config: ExamplesConfig) -> None:
    """Delete the temporary files of attempts that died mid-write, before the manifest.

    A runner retries a failed bundle: the retry writes every shard again, under a new
    temporary name, but a worker that died while writing one left that file behind
    (`shard-NNNNNN.tar.tmp-<hex>`, `shard-NNNNNN.tar.blocks.json.tmp-<hex>`, or an earlier
    attempt's `manifest.json.tmp-<hex>` or `README.md.tmp-<hex>`). Every shard is written by
    now, so no temporary name is still in use.
    """
    patterns = (
        "seq*/*/shard-*.tar.tmp-*",
        f"seq*/*/shard-*.tar{BLOCK_TABLE_SUFFIX}.tmp-*",
        f"{SHARDS_MANIFEST_NAME}.tmp-*",
        f"{DATASET_CARD_NAME}.tmp-*",
    )
    leftovers = [
        path
        for pattern in patterns
        for path in files.match(files.join(config.output, pattern))
        if _TEMPORARY.fullmatch(path.rsplit("/", 1)[-1])
    ]
    files.delete(leftovers)


def remove_work_dir(config: ExamplesConfig) -> None:
    files.delete(files.match(files.join(config.work_dir, "**")))
    if files.exists(config.work_dir):
        files.delete([config.work_dir])


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit examples")
