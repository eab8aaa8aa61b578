"""A documents directory of many one-word documents, for measuring `bertkit dedup`'s memory
against the number of documents (tests/test_dedup_memory.py, bench/dedup_memory.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pipelines.beam.documents import DocumentFileWriter, UnitTally, build_manifest, finish_unit
from schemas import MANIFEST_NAME
from schemas.documents import Document

# A unit's documents per file: several files, as a real documents directory has.
DOCUMENTS_PER_FILE = 50_000

# Runs a command and prints the peak RSS (KiB) of its process tree's largest process: the
# wrapper's RUSAGE_CHILDREN sees only that command, whatever ran before in the caller.
_PEAK_RSS = (
    "import resource, subprocess, sys; "
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def write_one_word_documents(directory: Path, count: int) -> Path:
    """`count` one-word documents (`w0` … ), all distinct, in files of DOCUMENTS_PER_FILE,
    with the manifest; kept if a complete one is there already."""
    if (directory / MANIFEST_NAME).exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    summaries = []
    for unit, start in enumerate(range(0, count, DOCUMENTS_PER_FILE)):
        writer = DocumentFileWriter(str(directory), f"{unit:05d}")
        for number in range(start, min(count, start + DOCUMENTS_PER_FILE)):
            writer.add(Document(f"d{number}", "test", f"d{number}", (f"w{number}",)))
        summaries.append(finish_unit(str(directory), UnitTally(f"{unit:05d}"), writer.close()))
    manifest = build_manifest("corpus", [], {}, summaries)
    (directory / MANIFEST_NAME).write_text(manifest.to_json())
    return directory


def dedup_peak_rss_mib(documents: Path, output: Path) -> float:
    """The peak RSS (MiB) of `python -m pipelines.dedup` on `documents`, in a fresh process
    (the local runner, its defaults); a failed run raises with its stderr."""
    shutil.rmtree(output, ignore_errors=True)
    command = [sys.executable, "-m", "pipelines.dedup", "--documents", str(documents)]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *command, "--output", str(output)],
        capture_output=True,
        text=True,
        check=True,
    )
    code, kib = done.stdout.split()
    if code != "0":
        raise RuntimeError(f"bertkit dedup exited {code}: {done.stderr[-2000:]}")
    return int(kib) / 1024
