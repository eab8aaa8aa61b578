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
from schemas.manifest import MANIFEST_NAME, DocumentsManifest, OutputFile
from schemas.rejects import REJECT_SCHEMA, REJECTS_DIR, Reject

__all__ = [
    "DOCUMENTS_FILE_GLOB",
    "DOCUMENT_SCHEMA",
    "DOCUMENT_SCHEMA_VERSION",
    "MANIFEST_NAME",
    "REJECTS_DIR",
    "REJECT_SCHEMA",
    "Document",
    "DocumentColumn",
    "DocumentsManifest",
    "OutputFile",
    "Reject",
    "documents_table",
]
