"""`bertkit vocab` from the command line: parse, check every input, then run the graph.

Its --help is the package docstring (pipelines/vocab/__init__.py).
"""

from __future__ import annotations

import hashlib
import logging
import sys

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import files
from pipelines.beam.documents import DOCUMENTS_DIRS, DocumentsInputError
from pipelines.beam.planned import Planned
from pipelines.beam.progress import (
    DOCUMENTS_COUNTED,
    PIECES_LEARNED,
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
from pipelines.command.progress import Phase
from pipelines.io.vocabulary import VocabError
from pipelines.vocab.config import VocabConfig
from pipelines.vocab.counting import remove_work_dir
from pipelines.vocab.sample import SamplePlan
from pipelines.vocab.transforms import add_vocab_steps
from schemas import MANIFEST_NAME
from schemas.checks import MAX_RECORD_BYTES
from schemas.vocab import (
    TOKENIZER_FILE,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    WORD_COUNTS_DIR,
    VocabMetadata,
)

_LOG = logging.getLogger(__name__)
# A vocabulary file larger than any vocabulary's (multilingual BERT's vocab.txt: 0.9 MB).
_LARGEST_VOCABULARY = 256 << 20
# Every name `bertkit vocab` writes, and their temporary names: nothing else may be in --output.
VOCAB_RUN_FILES = (
    r"(?:vocab\.txt|tokenizer\.json|vocab\.json)(?:\.tmp-[0-9a-f]{32})?"
    rf"|{WORD_COUNTS_DIR}/d[0-9]{{3}}-f[0-9]{{5}}\.parquet(?:\.tmp-[0-9a-f]{{32}})?"
)


def _vouched_by_metadata(output_dir: str) -> set[str]:
    """vocab.json where it is a vocabulary's record, and each file whose sha256 it records."""
    record = files.read_own_record(output_dir, VOCAB_METADATA_FILE, VocabMetadata.from_json)
    if record is None:  # absent, or not one: not ours
        return set()
    metadata = record[0]
    vouched = {VOCAB_METADATA_FILE}
    for name, sha256 in (
        (VOCAB_FILE, metadata.vocab_sha256),
        (TOKENIZER_FILE, metadata.tokenizer_sha256),
    ):
        try:
            data = files.read_file(files.join(output_dir, name), _LARGEST_VOCABULARY)
        except (OSError, ValueError):  # absent, or larger than a vocabulary: not this one
            continue
        if hashlib.sha256(data).hexdigest() == sha256:
            vouched.add(name)
    return vouched


# vocab.txt, tokenizer.json and vocab.json, names a user may give their own files, are this
# stage's only as vocab.json records them.
VOUCHED = files.Vouched(
    frozenset({VOCAB_FILE, TOKENIZER_FILE, VOCAB_METADATA_FILE}),
    VOCAB_METADATA_FILE,
    _vouched_by_metadata,
)
# --documents are read, --output written: checked before any work (runner.py).
_PATHS = StagePaths(input_dirs=(DOCUMENTS_DIRS,), record=VOCAB_METADATA_FILE)


def parse_config(argv: list[str] | None) -> tuple[VocabConfig, PipelineOptions]:
    """VocabConfig's flags; every other flag goes to Beam (runner, workers, s3, GCS)."""
    description = sys.modules["pipelines.vocab"].__doc__
    config, options = parse_stage(VocabConfig, argv, "bertkit vocab", description, _PATHS)
    config.validate()
    return config, options


def progress_phases(plan: SamplePlan, config: VocabConfig) -> list[Phase]:
    """Two steps: count words (sampled text read, of the sample's expected size), then
    learn pieces (tokens in the vocabulary, of --vocab-size)."""
    return [
        Phase(
            "count words",
            TEXT_BYTES_COUNTED,
            plan.expected_bytes,
            "read",
            True,
            rate=(DOCUMENTS_COUNTED, "documents"),
        ),
        Phase("learn pieces", PIECES_LEARNED, config.vocab_size, "tokens"),
    ]


def run(argv: list[str] | None = None) -> int:
    """Train and write the vocabulary; return the exit code. Raises VocabError on bad input."""
    config, options = parse_config(argv)
    plan = SamplePlan.open(config.documents, config.sample_mb, config.seed)
    if not plan.total_text_bytes:
        one = len(config.documents) == 1
        raise VocabError(
            f"--documents {' '.join(config.documents)} {'holds' if one else 'hold'} no text "
            f"(see {MANIFEST_NAME}): nothing to learn a vocabulary from; rerun the stage that "
            f"made {'it' if one else 'them'} (its WARNING says why it kept no document)"
        )
    files.clear_earlier_run(
        config.output, VOCAB_RUN_FILES, config.overwrite, "vocab", remove=False, vouched=VOUCHED
    )
    remove_work_dir(config.output)  # a killed run's word counts: never read again
    metadata_path = files.join(config.output, VOCAB_METADATA_FILE)
    with (
        progress_shown(options, "vocab", progress_phases(plan, config)),
        make_pipeline(options) as pipeline,
    ):
        add_vocab_steps(pipeline, Planned.now(plan), config)
    if submitted_only(options):
        return report_submission(pipeline, options, metadata_path, "bertkit vocab")
    return report(config)


def report(config: VocabConfig) -> int:
    """The finished vocabulary in one line (from vocab.json, as the job wrote it)."""
    metadata = VocabMetadata.from_json(
        files.read_file(files.join(config.output, VOCAB_METADATA_FILE), MAX_RECORD_BYTES).decode()
    )
    if metadata.vocab_size < config.vocab_size:
        _LOG.warning(
            "the sample ran out of pairs seen --min-frequency %d times: %d tokens, not %d",
            config.min_frequency,
            metadata.vocab_size,
            config.vocab_size,
        )
    drawn = metadata.sample
    print(
        f"{config.output}: {metadata.vocab_size} tokens ({drawn['alphabet']} characters, "
        f"{drawn['learned_tokens']} learned) from {drawn['documents']} documents, "
        f"{drawn['sentences']} sentences, {drawn['text_bytes']} bytes of text "
        f"(of {drawn['total_text_bytes']}); vocab.txt sha256 {metadata.vocab_sha256[:16]}…"
    )
    return 0


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit vocab", (VocabError, DocumentsInputError))
