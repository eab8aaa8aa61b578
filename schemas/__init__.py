"""Record layouts of every bertkit artifact: the single source of truth.

Writers and readers import these names; nobody re-types a column name. Each layout carries a
schema version that the next stage checks before it starts.
"""

from schemas.documents import (
    DOCUMENT_SCHEMA,
    DOCUMENT_SCHEMA_VERSION,
    DOCUMENTS_FILE_GLOB,
    Document,
    DocumentColumn,
    documents_table,
)
from schemas.examples import (
    EXAMPLE_MEMBER,
    EXAMPLES_SCHEMA_VERSION,
    PRETRAINING_EXAMPLE_SCHEMA,
    SAMPLES_MEMBER,
    SHARDS_MANIFEST_NAME,
    ExampleColumn,
    PretrainingExample,
    examples_table,
    pack_samples,
    unpack_samples,
)
from schemas.manifest import MANIFEST_NAME, DocumentsManifest, OutputFile
from schemas.rejects import REJECT_SCHEMA, REJECTS_DIR, Reject
from schemas.shards import SequenceOutput, ShardInfo, ShardsManifest, SplitShards
from schemas.vocab import TOKENIZER_FILE, VOCAB_FILE, VOCAB_METADATA_FILE, VocabMetadata

__all__ = [
    "DOCUMENTS_FILE_GLOB",
    "DOCUMENT_SCHEMA",
    "DOCUMENT_SCHEMA_VERSION",
    "EXAMPLES_SCHEMA_VERSION",
    "EXAMPLE_MEMBER",
    "MANIFEST_NAME",
    "PRETRAINING_EXAMPLE_SCHEMA",
    "REJECTS_DIR",
    "REJECT_SCHEMA",
    "SAMPLES_MEMBER",
    "SHARDS_MANIFEST_NAME",
    "TOKENIZER_FILE",
    "VOCAB_FILE",
    "VOCAB_METADATA_FILE",
    "Document",
    "DocumentColumn",
    "DocumentsManifest",
    "ExampleColumn",
    "OutputFile",
    "PretrainingExample",
    "Reject",
    "SequenceOutput",
    "ShardInfo",
    "ShardsManifest",
    "SplitShards",
    "VocabMetadata",
    "documents_table",
    "examples_table",
    "pack_samples",
    "unpack_samples",
]
