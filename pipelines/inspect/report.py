"""`bertkit inspect PATH --report OUT.html`: one self-contained HTML page of plots of the data.

PATH is a documents directory, a shards directory (its manifest, or one shard) or both at
once: a shards directory brings the documents directories its manifest names (as recorded,
else relative to the manifest), and the page says which could not be read. For a documents
directory alone, `--vocab DIR` adds tokens per sentence. Every plot stands beside the figure
Google's create_pretraining_data.py gives for the same settings (from the flags the manifest
records), with one line on what it means.

OUT.html is a local path, s3:// or gs://. It is replaced only if an earlier report wrote it
(the page carries `<meta name="generator" content="bertkit inspect --report">`); any other
file there is refused before anything is read. The modules: report_data.py (statistics and
Google's figures), report_plots.py (matplotlib, imported only here), report_sections.py (the
panels) and report_html.py (the page).
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from pipelines.inspect.output_place import check_output_place
from pipelines.inspect.report_html import GENERATOR_META, render
from pipelines.inspect.targets import InspectError, Target
from pipelines.io import storage

_HEAD_BYTES = 4096  # the generator mark is in the page's first few hundred bytes


def check_output(out: str, target: Target, vocab_dir: str | None) -> None:
    """Refuse, before any work, an OUT.html that bertkit did not write (or cannot write)."""
    if storage.is_remote(out) and storage.scheme(out) not in ("s3", "gs"):
        raise InspectError(f"--report {storage.redact(out)}: write to a local path, s3:// or gs://")
    check_output_place("report", out, target, vocab_dir)  # a directory, a FIFO, read-only, …
    if not storage.is_remote(out):
        if not os.path.exists(out):
            return
        with open(out, "rb") as existing:
            head = existing.read(_HEAD_BYTES)
    else:
        if not storage.exists(out):
            return
        with storage.open_binary(out) as existing:
            head = existing.read(_HEAD_BYTES)
    if GENERATOR_META.encode("ascii") not in head:
        raise InspectError(
            f"--report {storage.redact(out)}: a file is there that `bertkit inspect --report` "
            "did not write, and bertkit replaces only its own; move it away or name another "
            "OUT.html"
        )


def write_output(out: str, page: bytes) -> None:
    """The page written whole: a local file renamed into place, or one object upload."""
    if storage.is_remote(out):
        from pipelines.io import objects

        objects.put(out, page)
        return
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".report-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(page)
        storage.give_default_mode(temporary)  # mkstemp's 0600 would hide it from others
        os.replace(temporary, out)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def report_html(target: Target, vocab: str | None = None, verify: bool = True) -> str:
    """The report's page for `target` (an `open_target` result), as a string."""
    from pipelines.inspect.report_data import check_readable, collect
    from pipelines.inspect.report_sections import build_page

    check_readable(target)
    return render(build_page(collect(target, vocab, verify)))


def write_report(target: Target, args: Any) -> int:
    """Write args.report for `target`; print its path. Returns the exit code."""
    out = str(args.report)
    check_output(out, target, args.vocab)
    if args.max_seq_length is not None or args.split is not None:
        raise InspectError("--report shows every length and split: run it without --seq, --split")
    page = report_html(target, args.vocab, args.verify).encode("utf-8")
    write_output(out, page)
    print(f"report: {storage.redact(out)} ({len(page) / 1e3:,.0f} kB, one self-contained page)")
    sys.stdout.flush()
    return 0
