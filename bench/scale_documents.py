"""Build large documents directories by repeating the documents of the real sample.

    python -m bench.scale_documents --target-mb 50 --workdir bench/.work
    python -m bench.scale_documents --target-mb 12 --workdir bench/.work --google-text
    python -m bench.scale_documents --demo --workdir bench/.work --google-text

The sample (97 Wikipedia articles and 4 books, 3.6 MB of sentence text: `bertkit demo`'s
output, taken from WORKDIR/demo/documents, else out/demo/documents, else made with `python
-m bertkit.demo --output WORKDIR/demo --train-steps 0`) is far too small to time the example
stage or to see whether its memory grows with input, so the benchmark scales it up.
Documents are copied in rounds, the whole sample per round (Wikipedia first, then the
books), until the copies hold --target-mb MB (10^6 bytes) of UTF-8 sentence text; copy r > 0
of a document gets the id `<id>~r<r>` (enwiki/12~r3) and the title `<title> (copy r)`, so
every copy is a document of its own to the stage (its held-out hash, partner group and
random draws all key on the id).

The result is two real documents directories under WORKDIR/documents/<N>mb/ (wikipedia/,
books/), each with the Document schema (schemas/documents.py), the writers' row-group policy
and a valid _manifest.json (schemas/manifest.py). A file rolls over at 8 MB of text, so the
example stage gets several units of work, as it would from a real extraction. Directories
are cached: a second call with the same source and target does nothing.

--google-text also writes the same documents in google-research/bert's input format (one
sentence per line, a blank line after each document) to WORKDIR/documents/<N>mb/google.txt.

--demo describes the demo's own documents instead, unscaled (the small input, where start-up
weighs most): their directories are WORKDIR/demo/documents/{wikipedia,books} (made as above
if missing; never out/demo, which `bertkit demo` may be rewriting), the info and google.txt
go to WORKDIR/documents/demo/.

Run from the repository root. bench.examples runs exactly this in a child process
(bench.runs.build_in_child: reading Parquet would raise the benchmark's own high-water RSS)
and then reads the info with load_scaled_info.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.measure import DEFAULT_WORKDIR, DEMO_OUTPUT, MB, REPO_ROOT, argument_parser

if TYPE_CHECKING:
    from schemas.documents import Document
    from schemas.manifest import DocumentsManifest, OutputFile

# pyarrow, `schemas` and `pipelines` are imported inside the functions that build: the
# benchmark imports this module for its paths and ScaledDocumentsInfo, and its own
# high-water RSS must stay low (every child it starts inherits it in ru_maxrss).
MANIFEST_NAME = "_manifest.json"  # = schemas.manifest.MANIFEST_NAME (checked when building)
SOURCES = ("wikipedia", "books")  # the sample's two documents directories, in copy order
DEMO_DOCUMENTS = DEMO_OUTPUT / "documents"
FILE_TEXT_BYTES = 8 * MB  # ~1.5 files per round of copies at 12 MB; 5 units at 50 MB
INFO_NAME = "scaled.json"
GOOGLE_TEXT_NAME = "google.txt"
DEMO_SIZE = 0.0  # the target_mb of the demo's own documents (--demo): not scaled
# Bump when the layout of the scaled directories changes, so stale caches are rebuilt.
FORMAT_VERSION = 1


@dataclass(frozen=True)
class ScaledDocumentsInfo:
    """What was built, and from what: the cache key and the benchmark's input description."""

    target_mb: float
    path: str  # WORKDIR/documents/<N>mb
    directories: list[str]  # the documents directories to pass to --documents
    source: dict[str, str]  # source directory → sha256 of its _manifest.json
    documents: int
    sentences: int
    text_bytes: int
    copies: int  # rounds started: the last one may be partial
    files: int
    format_version: int = FORMAT_VERSION

    @property
    def text_mb(self) -> float:
        return self.text_bytes / MB


def scaled_path(workdir: Path, target_mb: float) -> Path:
    if target_mb == DEMO_SIZE:
        return workdir / "documents" / "demo"
    return workdir / "documents" / f"{target_mb:g}mb"


def find_sample_documents(workdir: Path, own_copy: bool = False) -> dict[str, Path]:
    """The demo's documents directories: the benchmark's own copy, WORKDIR/demo, else
    out/demo's (unless `own_copy`); made with `bertkit.demo` (no training) if neither has
    them."""
    bases = [workdir / "demo" / "documents", *([] if own_copy else [DEMO_DOCUMENTS])]
    for base in bases:
        if all((base / source / MANIFEST_NAME).exists() for source in SOURCES):
            return {source: base / source for source in SOURCES}
    output = workdir / "demo"
    command = ["-m", "bertkit.demo", "--output", str(output), "--train-steps", "0"]
    print(f"making the sample documents: python {' '.join(command)}", flush=True)
    subprocess.run([sys.executable, *command], cwd=REPO_ROOT, check=True)
    return {source: output / "documents" / source for source in SOURCES}


def read_documents(directory: Path) -> list[Document]:
    """Every document of a (small) documents directory, in manifest file order."""
    import pyarrow.parquet as pq

    from schemas.documents import documents_from_table
    from schemas.manifest import DocumentsManifest

    manifest = DocumentsManifest.from_json((directory / MANIFEST_NAME).read_text())
    documents: list[Document] = []
    for output in manifest.files:
        documents.extend(documents_from_table(pq.read_table(directory / output.name)))
    return documents


def copy_of(document: Document, copy: int) -> Document:
    if copy == 0:
        return document  # the first round is the real sample, untouched
    return replace(document, id=f"{document.id}~r{copy}", title=f"{document.title} (copy {copy})")


def scaled_documents(
    sample: dict[str, list[Document]], target_bytes: int
) -> Iterator[tuple[str, Document, int]]:
    """(source, document, round) until the documents hold ``target_bytes`` of text."""
    sizes = {id(doc): doc.text_bytes() for docs in sample.values() for doc in docs}
    total, copy = 0, 0
    while True:
        for source in SOURCES:
            for document in sample[source]:
                if total >= target_bytes:
                    return
                total += sizes[id(document)]
                yield source, copy_of(document, copy), copy
        copy += 1


class DocumentsDirectoryWriter:
    """Writes one documents directory: Parquet files of ≤ FILE_TEXT_BYTES of text, then the
    manifest. Row groups follow pipelines/beam/documents.py (≤ 1000 documents or 8 MiB of
    text), so the example stage reads these files exactly as it reads extracted ones."""

    def __init__(self, directory: Path) -> None:
        from pipelines.beam.documents import ROW_GROUP_TEXT_BYTES, ROWS_PER_GROUP

        self.directory = directory
        self.files: list[OutputFile] = []
        self._rows_per_group, self._row_group_text_bytes = ROWS_PER_GROUP, ROW_GROUP_TEXT_BYTES
        self._writer: Any = None  # a pyarrow.parquet.ParquetWriter while a file is open
        self._rows: list[Document] = []
        self._row_bytes = 0
        self._file_docs = self._file_sentences = self._file_bytes = 0

    def add(self, document: Document) -> None:
        size = document.text_bytes()
        self._rows.append(document)
        self._row_bytes += size
        self._file_docs += 1
        self._file_sentences += len(document.sentences)
        self._file_bytes += size
        full = len(self._rows) >= self._rows_per_group
        if full or self._row_bytes >= self._row_group_text_bytes:
            self._flush_rows()
        if self._file_bytes >= FILE_TEXT_BYTES:
            self._close_file()

    def _file_path(self) -> Path:
        # documents-<unit>-<part>.parquet, as the documents stages name theirs.
        return self.directory / f"documents-00000-{len(self.files):04d}.parquet"

    def _flush_rows(self) -> None:
        import pyarrow.parquet as pq

        from schemas.documents import DOCUMENT_SCHEMA, documents_table

        if not self._rows:
            return
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._file_path(), DOCUMENT_SCHEMA, compression="zstd")
        table = documents_table(self._rows)
        self._writer.write_table(table, row_group_size=self._rows_per_group)
        self._rows, self._row_bytes = [], 0

    def _close_file(self) -> None:
        from schemas.manifest import OutputFile

        self._flush_rows()
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        path = self._file_path()
        data = path.read_bytes()
        self.files.append(
            OutputFile(
                name=path.name,
                documents=self._file_docs,
                sentences=self._file_sentences,
                text_bytes=self._file_bytes,
                bytes=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        )
        self._file_docs = self._file_sentences = self._file_bytes = 0

    def close(self, source: Path, copies: int, target_mb: float) -> DocumentsManifest:
        """Finish the last file and write the manifest, last, as the real stages do."""
        from schemas.manifest import DocumentsManifest

        self._close_file()
        source_manifest = DocumentsManifest.from_json((source / MANIFEST_NAME).read_text())
        manifest = DocumentsManifest(
            stage=source_manifest.stage,
            inputs=[{"path": str(source), "bytes": sum(f.bytes for f in source_manifest.files)}],
            config={"scaled_by": "bench/scale_documents.py", "target_mb": target_mb},
            counts={
                "documents": sum(f.documents for f in self.files),
                "sentences": sum(f.sentences for f in self.files),
                "text_bytes": sum(f.text_bytes for f in self.files),
                "files": len(self.files),
                "units": len(self.files),
                "copies": copies,
            },
            dropped={},
            rejected={},
            failed_inputs=[],
            files=self.files,
        )
        (self.directory / MANIFEST_NAME).write_text(manifest.to_json())
        return manifest


def source_fingerprint(sample_dirs: dict[str, Path]) -> dict[str, str]:
    return {
        str(path): hashlib.sha256((path / MANIFEST_NAME).read_bytes()).hexdigest()
        for path in sample_dirs.values()
    }


def load_cached_info(path: Path, fingerprint: dict[str, str]) -> ScaledDocumentsInfo | None:
    info_path = path / INFO_NAME
    if not info_path.exists():
        return None
    try:
        info = ScaledDocumentsInfo(**json.loads(info_path.read_text()))
    except (TypeError, ValueError):
        return None
    complete = all((Path(d) / MANIFEST_NAME).exists() for d in info.directories)
    if info.format_version != FORMAT_VERSION or info.source != fingerprint or not complete:
        return None
    return info


def build_scaled_documents(target_mb: float, workdir: Path) -> ScaledDocumentsInfo:
    """Build (or reuse) WORKDIR/documents/<N>mb/{wikipedia,books}."""
    from schemas import manifest

    if manifest.MANIFEST_NAME != MANIFEST_NAME:
        raise RuntimeError(f"schemas names the manifest {manifest.MANIFEST_NAME}: update me")
    sample_dirs = find_sample_documents(workdir)
    fingerprint = source_fingerprint(sample_dirs)
    path = scaled_path(workdir, target_mb)
    if (cached := load_cached_info(path, fingerprint)) is not None:
        return cached
    shutil.rmtree(path, ignore_errors=True)
    sample = {source: read_documents(directory) for source, directory in sample_dirs.items()}
    writers = {}
    for source in SOURCES:
        (path / source).mkdir(parents=True)
        writers[source] = DocumentsDirectoryWriter(path / source)
    copies = 0
    for source, document, copy in scaled_documents(sample, int(target_mb * MB)):
        writers[source].add(document)
        copies = copy + 1
    manifests = [
        writers[source].close(sample_dirs[source], copies, target_mb) for source in SOURCES
    ]
    info = ScaledDocumentsInfo(
        target_mb=target_mb,
        path=str(path),
        directories=[str(path / source) for source in SOURCES],
        source=fingerprint,
        documents=sum(m.counts["documents"] for m in manifests),
        sentences=sum(m.counts["sentences"] for m in manifests),
        text_bytes=sum(m.counts["text_bytes"] for m in manifests),
        copies=copies,
        files=sum(len(m.files) for m in manifests),
    )
    (path / INFO_NAME).write_text(json.dumps(asdict(info), indent=2) + "\n")
    return info


def demo_documents_info(workdir: Path) -> ScaledDocumentsInfo:
    """The demo's own documents, unscaled, described as a ScaledDocumentsInfo (target_mb
    DEMO_SIZE, one round); WORKDIR/documents/demo/ holds the info and google.txt."""
    from schemas.manifest import DocumentsManifest

    sample_dirs = find_sample_documents(workdir, own_copy=True)
    fingerprint = source_fingerprint(sample_dirs)
    path = scaled_path(workdir, DEMO_SIZE)
    if (cached := load_cached_info(path, fingerprint)) is not None:
        return cached
    shutil.rmtree(path, ignore_errors=True)  # google.txt of other documents, if any
    path.mkdir(parents=True)
    manifests = [
        DocumentsManifest.from_json((directory / MANIFEST_NAME).read_text())
        for directory in sample_dirs.values()
    ]
    info = ScaledDocumentsInfo(
        target_mb=DEMO_SIZE,
        path=str(path),
        directories=[str(sample_dirs[source]) for source in SOURCES],
        source=fingerprint,
        documents=sum(f.documents for m in manifests for f in m.files),
        sentences=sum(f.sentences for m in manifests for f in m.files),
        text_bytes=sum(f.text_bytes for m in manifests for f in m.files),
        copies=1,
        files=sum(len(m.files) for m in manifests),
    )
    (path / INFO_NAME).write_text(json.dumps(asdict(info), indent=2) + "\n")
    return info


def load_scaled_info(target_mb: float, workdir: Path) -> ScaledDocumentsInfo:
    """The info of directories built earlier (by a child process running this script)."""
    path = scaled_path(workdir, target_mb)
    return ScaledDocumentsInfo(**json.loads((path / INFO_NAME).read_text()))


def write_google_text(info: ScaledDocumentsInfo) -> Path:
    """The documents as google-research/bert's input: one sentence per line, blank line after
    each document. A line break inside a sentence becomes a space (the script reads line by
    line, so it would split the sentence); a blank sentence is left out (the script would
    take it for the end of the document). Both are whitespace to Google's tokenizer."""
    import pyarrow.parquet as pq

    from schemas.documents import DOCUMENTS_FILE_GLOB

    path = Path(info.path) / GOOGLE_TEXT_NAME
    if path.exists():
        return path
    temporary = path.with_suffix(".tmp")
    with temporary.open("w", encoding="utf-8") as out:
        for directory in info.directories:
            for file in sorted(Path(directory).glob(DOCUMENTS_FILE_GLOB)):
                parquet = pq.ParquetFile(file)
                for group in range(parquet.num_row_groups):
                    column = parquet.read_row_group(group, columns=["sentences"]).column(0)
                    for sentences in column.to_pylist():
                        for sentence in sentences:
                            if sentence.strip():
                                out.write(sentence.replace("\n", " ").replace("\r", " ") + "\n")
                        out.write("\n")
    temporary.rename(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.scale_documents", __doc__)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--target-mb", type=float, help="MB of sentence text")
    target.add_argument("--demo", action="store_true", help="the demo's documents, unscaled")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--google-text", action="store_true", help=f"also write {GOOGLE_TEXT_NAME}")
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    if args.demo:
        info = demo_documents_info(workdir)
    elif args.target_mb <= 0:
        parser.error("--target-mb must be above 0")
    else:
        info = build_scaled_documents(args.target_mb, workdir)
    print(
        f"{info.path}: {info.documents} documents, {info.sentences} sentences, "
        f"{info.text_mb:.1f} MB of text in {info.files} files ({info.copies} rounds of copies)",
        flush=True,
    )
    if args.google_text:
        print(f"{write_google_text(info)}: Google's text format", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
