"""`bertkit chain` from the command line: parse, check every output, then run one job.

Its --help is the package docstring (pipelines/chain/__init__.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import uuid
from typing import Any

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import (
    DOCUMENTS_LISTING,
    DOCUMENTS_RUN_FILES,
    DOCUMENTS_STAGE_PATHS,
    WriteManifest,
    json_config,
    read_manifest,
)
from pipelines.beam.documents import report as report_documents
from pipelines.beam.empty_outputs import check_documents, check_examples
from pipelines.beam.inputs import InputsError
from pipelines.beam.planned import Planned
from pipelines.beam.progress import (
    DOCUMENTS_EXTRACTED,
    DOCUMENTS_PAIRED,
    DOCUMENTS_TOKENIZED,
    EXAMPLES_MADE,
    EXAMPLES_WRITTEN,
    INPUT_BYTES_READ,
    PIECES_LEARNED,
    SHARDS_WRITTEN,
    TEXT_BYTES_COUNTED,
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
from pipelines.beam.stage_paths import inner_output_problem
from pipelines.books import cli as books_cli
from pipelines.chain.config import (
    DOCUMENTS_STAGES,
    ChainConfig,
    ChainConfigError,
    check,
    documents_config,
    documents_dir,
    examples_config,
    stages_run,
    vocab_config,
)
from pipelines.command.progress import Phase
from pipelines.corpus import cli as corpus_cli
from pipelines.examples import cli as examples_cli
from pipelines.examples.config import WORK_DIR, ExamplesConfig, ExamplesConfigError
from pipelines.examples.stage_plan import ExamplesPlan, load_examples_plan
from pipelines.io import storage
from pipelines.io.vocabulary import VocabError, load_vocab
from pipelines.vocab import cli as vocab_cli
from pipelines.vocab.config import VocabConfig
from pipelines.vocab.counting import remove_work_dir
from pipelines.vocab.sample import SamplePlan
from pipelines.vocab.transforms import add_vocab_steps
from pipelines.wikipedia import cli as wikipedia_cli
from schemas import MANIFEST_NAME, REJECTS_DIR, SHARDS_MANIFEST_NAME
from schemas.shards import BLOCK_TABLE_SUFFIX, DATASET_CARD_NAME
from schemas.vocab import WORD_COUNTS_DIR

_EXTRACTION = {
    "wikipedia": wikipedia_cli.extraction,
    "books": books_cli.extraction,
    "corpus": corpus_cli.extraction,
}


def _chain_writes() -> tuple[str, ...]:
    """Examples of every name the chain writes below --output, each stage's in its own
    directory (documents/<stage>/, vocab/, shards/): an input glob that reaches any of
    them would read this run's output on the next run, and `--overwrite` would delete
    files that run lists as inputs."""
    documents = tuple(
        f"documents/{stage}/{name}"
        for stage in DOCUMENTS_STAGES
        for name in ("", *DOCUMENTS_STAGE_PATHS.writes)
    )
    vocab = (
        "",
        "vocab.txt",
        "tokenizer.json",
        "vocab.json",
        f"{WORD_COUNTS_DIR}/d000-f00000.parquet",
    )
    shards = (
        "",
        SHARDS_MANIFEST_NAME,
        DATASET_CARD_NAME,
        "seq128/train/shard-000000.tar",
        f"seq128/heldout/shard-000000.tar{BLOCK_TABLE_SUFFIX}",
        f"{REJECTS_DIR}/rejects-00000.jsonl",
        f"{WORK_DIR}/documents/00000/00000-00000.bin",
    )
    return (
        "documents",
        *(name.rstrip("/") for name in documents),
        *(f"vocab/{name}".rstrip("/") for name in vocab),
        *(f"shards/{name}".rstrip("/") for name in shards),
    )


_PATHS = StagePaths(
    input_files=("wikipedia", "books", "corpus"),
    # --vocab, where given: the workers read it (the examples' plan), so it is placed too.
    input_dirs=(("vocab", "vocabulary directory: `bertkit vocab`'s output or a released BERT's"),),
    writes=_chain_writes(),
    record=f"shards/{SHARDS_MANIFEST_NAME}",  # its last stage's
)


# Plans made by the workers, once per process and job (`run` names each job: a process that
# runs two chains, as tests do, plans each from its own files).
@functools.lru_cache(maxsize=4)
def _sample_plan(job: str, config: VocabConfig) -> SamplePlan:
    """The vocabulary's sample, from the documents' manifests once written."""
    return SamplePlan.open(config.documents, config.sample_mb, config.seed)


@functools.lru_cache(maxsize=4)
def _examples_plan(job: str, config: ExamplesConfig) -> ExamplesPlan:
    """The examples' plan, from the manifests and the vocabulary once written."""
    return load_examples_plan(config)


def _extractions(stages: dict[str, Any]) -> dict[str, tuple[list[dict[str, Any]], Any]]:
    """Each documents stage's inputs and extraction step; a refusal names the chain's flag."""
    extractions = {}
    for stage, config in stages.items():
        try:
            extractions[stage] = _EXTRACTION[stage](config)
        except InputsError as error:
            raise error.with_flag(f"--{stage}") from None
    return extractions


def run(argv: list[str] | None = None) -> int:
    """Check the flags, inputs and every output (exit 2 with the reason, nothing deleted),
    clear the earlier run's files, then run the one job."""
    description = sys.modules["pipelines.chain"].__doc__
    config, options = parse_stage(ChainConfig, argv, "bertkit chain", description, _PATHS)
    try:
        check(config)
        stages = {stage: documents_config(config, stage) for stage in stages_run(config)}
        vocab, examples = vocab_config(config), examples_config(config)
        # With --vocab DIR no vocabulary is trained: the one given is checked now, as
        # `bertkit examples` checks it, before any work.
        trained = None if config.vocab else vocab
        _check_written_folders(config.output, stages, trained, examples)
        if trained is None:
            load_vocab(examples.vocab, files.READER, examples.cased)
        else:
            trained.validate()
        examples.validate()
        extractions = _extractions(stages)
        earlier, stale = _earlier_run(config, stages, vocab, examples)
    except (ValueError, OSError) as error:  # ChainConfigError, VocabError, … are ValueErrors
        print(f"bertkit chain: error: {storage.redact(str(error))}", file=sys.stderr)
        return 2
    # Every output checked: only now is anything deleted (each stage's own earlier files).
    files.delete(earlier)
    remove_work_dir(vocab.output)  # a killed run's word counts: never read again
    for directory in stale:
        _remove_empty_folders(directory)
    input_bytes = sum(item["bytes"] for inputs, _ in extractions.values() for item in inputs)
    manifest_path = files.join(examples.output, SHARDS_MANIFEST_NAME)
    try:
        with (
            progress_shown(options, "chain", progress_phases(input_bytes, trained, examples)),
            make_pipeline(options) as pipeline,
        ):
            add_chain_steps(pipeline, stages, extractions, trained, examples)
    except Exception:  # VocabError, ExamplesConfigError, or its text from a worker process
        # The vocabulary (with --vocab DIR, the examples' plan) found no text: if the
        # documents steps kept none, their manifests (written before it) say why, on a
        # WARNING line each, and the chain stops there.
        code = _documents_kept_none(options, stages, trained is not None)
        if code is None:
            raise
        return code
    if submitted_only(options):
        return report_submission(pipeline, options, manifest_path, "bertkit chain")
    code = report(stages, trained, manifest_path)
    for stage, config in stages.items():
        code |= check_documents(options, stage, config.output)
    return code | check_examples(options, manifest_path, examples.output, examples.heldout_fraction)


def _check_written_folders(
    output: str, stages: dict[str, Any], trained: VocabConfig | None, examples: ExamplesConfig
) -> None:
    """Each directory this run writes below --output, checked as --output is: a file at
    `shards` (or `documents`) would otherwise stop the job only when it first writes there,
    after the extraction and the vocabulary."""
    written = {config.output: f"the {stage} documents" for stage, config in stages.items()}
    if trained is not None:
        written[trained.output] = "the vocabulary's files"
    written[examples.output] = "the shards"
    for directory, what in written.items():
        problem = inner_output_problem("--output", output, directory, what)
        if problem:
            raise ChainConfigError(problem)


def _earlier_run(
    config: Any, stages: dict[str, Any], vocab: VocabConfig, examples: ExamplesConfig
) -> tuple[list[str], list[str]]:
    """Every output of the chain's own steps, checked as its stage checks it (a file it
    does not write is refused; an earlier run's needs --overwrite): the files to delete,
    and the directories this run will not write again.

    Those are checked too, and their files deleted with --overwrite: a documents stage
    given no input this time, and the vocabulary where --vocab DIR replaces it. Left there,
    they would lie beside outputs made without them. The vocabulary is deleted before the
    job even where it is trained again (`bertkit vocab` alone keeps its old files until it
    replaces them): its documents are written anew first, and a rerun stopped in between
    would leave the old vocabulary looking complete beside documents it was not learned
    from.
    """
    found = []
    for stage in DOCUMENTS_STAGES:
        directory = stages[stage].output if stage in stages else documents_dir(config, stage)
        found += files.earlier_run_files(
            directory,
            DOCUMENTS_RUN_FILES,
            config.overwrite,
            stage,
            rewritten=stage in stages,
            listing=DOCUMENTS_LISTING,
        )
    found += files.earlier_run_files(
        vocab.output,
        vocab_cli.VOCAB_RUN_FILES,
        config.overwrite,
        "vocab",
        vouched=vocab_cli.VOUCHED,
        rewritten=not config.vocab,
    )
    found += files.earlier_run_files(
        examples.output,
        examples_cli.EARLIER_RUN,
        config.overwrite,
        "examples",
        vouched=examples_cli.VOUCHED,
        listing=examples_cli.LISTING,
    )
    stale = [documents_dir(config, stage) for stage in DOCUMENTS_STAGES if stage not in stages]
    return found, stale + ([vocab.output] if config.vocab else [])


def _remove_empty_folders(directory: str) -> None:
    """A directory this run does not write again, once its earlier files are deleted: the
    folders they leave empty go too (local disks; object stores have no folders)."""
    if storage.is_remote(directory) or not os.path.isdir(directory):
        return
    for folder, _, _ in os.walk(directory, topdown=False):
        with contextlib.suppress(OSError):  # not empty: it is left as it is
            os.rmdir(folder)


def _documents_kept_none(options, stages: dict[str, Any], trained: bool) -> int | None:
    """After the job failed (its vocabulary, or with --vocab DIR its examples, found no
    text): the exit code once each documents output has said why it holds no document (1
    where records were rejected), and one line that the chain stopped, which `trained` says
    (with --vocab DIR no vocabulary was to be learned); None if a documents output holds
    some (then the error is another)."""
    manifests = {stage: files.join(c.output, MANIFEST_NAME) for stage, c in stages.items()}
    if not all(files.exists(path) for path in manifests.values()):
        return None
    outputs = {stage: read_manifest(c.output) for stage, c in stages.items()}
    if any(manifest.counts.get("documents", 0) for manifest in outputs.values()):
        return None
    code = 0
    for stage, config in stages.items():
        report_documents(config.output)
        code |= check_documents(options, stage, config.output)
    logging.getLogger("bertkit.chain").warning(
        "the chain stopped after its documents: no document to learn a vocabulary from, so "
        "no vocabulary and no shards were written"
        if trained
        else "the chain stopped after its documents: no document to make examples from, so "
        "no shards were written"
    )
    return code


def add_chain_steps(
    pipeline: beam.Pipeline,
    stages: dict[str, Any],
    extractions: dict[str, tuple[list[dict[str, Any]], beam.PTransform]],
    vocab: VocabConfig | None,
    examples: ExamplesConfig,
) -> beam.PCollection:
    """documents stages ─► manifests ─► vocabulary (its sample planned by the workers once
    the manifests are written) ─► examples (planned once the vocabulary is written); with
    no `vocab` to train (--vocab DIR), examples planned once the manifests are written."""
    manifests = []
    for stage, config in stages.items():
        inputs, extract = extractions[stage]
        manifests.append(
            pipeline
            | f"Extract{stage.title()}" >> extract
            | f"Write{stage.title()}Manifest"
            >> WriteManifest(config.output, stage, inputs, json_config(config.recorded()))
        )
    documents_written = manifests | "DocumentsWritten" >> beam.Flatten()
    job = uuid.uuid4().hex
    ready = documents_written
    if vocab is not None:
        sample = functools.partial(_sample_plan, job, vocab)
        ready = add_vocab_steps(pipeline, Planned.later(sample, documents_written), vocab)
    planned = Planned.later(functools.partial(_examples_plan, job, examples), ready)
    return examples_cli.add_examples_steps(pipeline, examples, planned)


def progress_phases(
    input_bytes: int, vocab: VocabConfig | None, examples: ExamplesConfig
) -> list[Phase]:
    """The progress line's steps; what the documents will hold is known only as they are
    written, so later steps count against the documents extracted."""
    learning = (
        []
        if vocab is None
        else [
            Phase("count words", TEXT_BYTES_COUNTED, None, "read", in_bytes=True),
            Phase("learn pieces", PIECES_LEARNED, vocab.vocab_size, "tokens"),
        ]
    )
    return [
        Phase("extract", INPUT_BYTES_READ, input_bytes, "read", in_bytes=True),
        *learning,
        Phase("tokenize", DOCUMENTS_TOKENIZED, DOCUMENTS_EXTRACTED, "documents"),
        Phase(
            "make examples",
            DOCUMENTS_PAIRED,
            None,
            "document passes",
            rate=(EXAMPLES_MADE, "examples"),
        ),
        Phase(
            "write shards",
            EXAMPLES_WRITTEN,
            EXAMPLES_MADE,
            "examples",
            shown=((SHARDS_WRITTEN, "shards"),),
        ),
    ]


def report(stages: dict[str, Any], vocab: VocabConfig | None, manifest_path: str) -> int:
    """Each stage's line, as its own command prints it; 1 if an input was not read to its
    end (everything read before the fault is kept, and the chain went on with it)."""
    code = 0
    for config in stages.values():
        code |= report_documents(config.output)
    if vocab is not None:  # None: --vocab DIR, no vocabulary trained
        code |= vocab_cli.report(vocab)
    return code | examples_cli.report(manifest_path)


def main(argv: list[str] | None = None) -> None:
    # ExamplesConfigError: with --vocab DIR, the examples' plan is the first step to find
    # that no document was kept (`_documents_kept_none` says why, without Beam's traceback).
    stage_main(run, argv, "bertkit chain", (VocabError, ChainConfigError, ExamplesConfigError))
