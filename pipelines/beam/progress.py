"""What a stage is doing while it runs: Beam counters in the DoFns, a line on stderr locally.

Inside a DoFn, a `StageCounters` (made in `setup()`) counts the work: input bytes read, pages,
documents, examples. It adds its counts to Beam counters in the "bertkit" namespace (what
Dataflow shows as the step's custom counters, and `PipelineResult.metrics()` returns at the
end) at most once a second and at the end of every element, and, in a local run, writes its
running totals to the folder the driver named (`pipelines.command.progress.publish_totals`).

In the driver, `progress_shown` wraps a local run: it names that folder through the
environment (so the `--direct_running_mode multi_processing` workers, which Beam starts with
the driver's environment, find it too), and a thread sums the folder and prints the line
(`pipelines.command.progress.progress_printed`). Why not poll Beam's metrics instead: the
FnApiRunner returns them only when the pipeline has finished (`run()` blocks until then, and
the progress reports it can request from its workers are dropped inside the runner).

On Beam's portable runner the line needs the workers in this process: `--environment_type
LOOPBACK`, where the SDK workers are threads of the driver and find the folder as local ones
do. With an external worker pool (`worker_pool_main`, the cluster-shaped check before
Dataflow) or Docker workers, neither way reaches the driver while the job runs:
- the job service's metrics come from that FnApiRunner: `GetJobMetrics` answers from its
  result, which exists only once the whole pipeline has run (polled once a second, an 8 s
  job answered no counter while RUNNING and all of them at DONE; the driver's
  `PipelineResult.metrics()` also keeps its first answer);
- the pool's workers are threads of a process started before the run, with its own
  environment and no pipeline options, so they cannot learn this run's folder.
Such a run prints one line saying so when it starts.

Counting never touches the data: it only adds numbers, and a failure to publish (a full
disk, a folder removed) turns publishing off rather than failing the bundle.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import BinaryIO, TextIO

from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions, StandardOptions

from pipelines.beam.runner import is_local, submitted_only
from pipelines.command.progress import (
    PROGRESS_DIR_ENV,
    Phase,
    progress_enabled,
    progress_printed,
    publish_totals,
    read_totals,
)
from pipelines.io.storage import Reader

NAMESPACE = "bertkit"  # the namespace of every bertkit Beam counter (drops and rejects too)
PUBLISH_INTERVAL_S = 1.0  # how often a DoFn hands its counts to Beam and to the driver

# The counters, by stage (each a Beam counter in NAMESPACE).
INPUT_BYTES_READ = "input_bytes_read"  # stored (compressed) input bytes read
PAGES_READ = "pages_read"  # wikipedia: <page> elements parsed
INPUT_FILES_READ = "input_files_read"  # books: files opened
DOCUMENTS_EXTRACTED = "documents_extracted"  # wikipedia, books: documents handed to a writer
DOCUMENTS_TOKENIZED = "documents_tokenized"  # examples, step 1
DOCUMENTS_PAIRED = "documents_paired"  # examples, step 2: documents × dupe passes
EXAMPLES_MADE = "examples_made"  # examples, step 2
EXAMPLES_WRITTEN = "examples_written"  # examples, step 3: samples in written shards
SHARDS_WRITTEN = "shards_written"  # examples, step 3
TEXT_BYTES_COUNTED = "text_bytes_counted"  # vocab, step 1: sampled text, UTF-8 bytes
DOCUMENTS_COUNTED = "documents_counted"  # vocab, step 1: sampled documents
PIECES_LEARNED = "pieces_learned"  # vocab, step 2: tokens in the vocabulary so far


class StageCounters:
    """A DoFn's counts of its work, as Beam counters and (locally) for the progress line.

    `add` is cheap (a dict update and a clock read); every `interval` seconds, and at each
    `flush()` (call it at the end of every element), the counts go to Beam and to the
    driver. Make it in `DoFn.setup()`: it must read the worker's environment.
    """

    def __init__(
        self,
        names: Sequence[str],
        interval: float = PUBLISH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pending = dict.fromkeys(names, 0)
        self._totals = dict.fromkeys(names, 0)
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name in names}
        self._interval = interval
        self._clock = clock
        self._next = clock() + interval
        self._directory = os.environ.get(PROGRESS_DIR_ENV) or None
        self._name = f"{os.getpid()}-{uuid.uuid4().hex}"

    def add(self, name: str, amount: int = 1) -> None:
        self._pending[name] += amount
        if self._clock() >= self._next:
            self.flush()

    def flush(self) -> None:
        for name, amount in self._pending.items():
            if amount:
                self._counters[name].inc(amount)
                self._totals[name] += amount
                self._pending[name] = 0
        self._next = self._clock() + self._interval
        if self._directory is not None:
            try:
                publish_totals(self._directory, self._name, self._totals)
            except OSError:
                self._directory = None  # the driver has gone or its folder with it


class _CountingHandle:
    """A file handle that adds the bytes read through it to a counter, each byte of the file
    once, in whatever order it is read: bytes read again after a seek back (the bz2 reader's
    second pass over a damaged split) are not counted again, and a Parquet file's footer,
    read first, does not hide the row groups before it. So the progress line never reads
    past the input's size."""

    def __init__(self, handle: BinaryIO, counters: StageCounters, name: str) -> None:
        self._handle = handle
        self._counters = counters
        self._name = name
        self._at = 0  # where the next read starts
        self._starts: list[int] = []  # the byte ranges counted so far, sorted, disjoint,
        self._ends: list[int] = []  # none touching the next (reads are mostly sequential)

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        start, end = self._at, self._at + len(data)
        self._at = end
        if end > start:
            self._counters.add(self._name, self._count_new(start, end))
        return data

    def _count_new(self, start: int, end: int) -> int:
        """Merge [start, end) into the counted ranges; return how many of its bytes are new."""
        first = bisect.bisect_left(self._ends, start)  # the first range ending at or after start
        last = bisect.bisect_right(self._starts, end)  # past the last range starting by end
        covered = sum(
            max(0, min(end, self._ends[i]) - max(start, self._starts[i]))
            for i in range(first, last)
        )
        new = (end - start) - covered
        if first < last:
            start, end = min(start, self._starts[first]), max(end, self._ends[last - 1])
        self._starts[first:last], self._ends[first:last] = [start], [end]
        return new

    def seek(self, offset: int, whence: int = 0) -> int:
        self._at = self._handle.seek(offset, whence)
        return self._at

    def __getattr__(self, attribute: str):
        return getattr(self._handle, attribute)

    def __enter__(self) -> _CountingHandle:
        self._handle.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._handle.__exit__(*exc_info)


def counting_reader(reader: Reader, counters: StageCounters, name: str) -> Reader:
    """`reader` whose opened files count the bytes read from them under `name`."""
    return reader._replace(open=lambda path: _CountingHandle(reader.open(path), counters, name))


_LOG = logging.getLogger(__name__)
_PROGRESS_DIR_PREFIX = "bertkit-progress-"
_PROGRESS_DIR = re.compile(rf"{_PROGRESS_DIR_PREFIX}(\d+)-[A-Za-z0-9_]+")


def remove_stale_progress_dirs(root: str) -> list[str]:
    """Delete the progress folders of runs that died without removing theirs (a kill -9):
    only names this module makes (`bertkit-progress-<pid>-<random>`), only when that pid is
    no longer running. Returns what was deleted."""
    removed = []
    for name in sorted(os.listdir(root)):
        match = _PROGRESS_DIR.fullmatch(name)
        if match is None or _running(int(match.group(1))):
            continue
        try:
            shutil.rmtree(os.path.join(root, name))
        except OSError as error:  # another user's, or going away by itself: not ours to force
            _LOG.debug("left %s in place: %s", name, error)
            continue
        removed.append(name)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def workers_in_this_process(options: PipelineOptions) -> bool:
    """Whether the stage's workers run in this process or its children, and so see the
    environment variable naming the progress folder: a local run, or a portable runner's
    with `--environment_type LOOPBACK` that waits for its job."""
    if is_local(options):
        return True
    loopback = str(options.view_as(PortableOptions).environment_type or "").upper() == "LOOPBACK"
    return loopback and not submitted_only(options)


def _unshown_note(options: PipelineOptions, stage: str) -> str | None:
    """The line that says why a portable run that waits for its job shows no progress
    (see the module's docstring); None on Dataflow, whose UI shows the counters."""
    runner = str(options.view_as(StandardOptions).runner)
    if "dataflow" in runner.lower() or submitted_only(options):
        return None
    return (
        f"{stage} | no progress line on {runner} with workers outside this process: its job "
        "service reports counters only when the job has ended (--environment_type LOOPBACK "
        "runs the workers here and shows it)"
    )


@contextmanager
def progress_shown(
    options: PipelineOptions,
    stage: str,
    phases: Sequence[Phase],
    stream: TextIO | None = None,
    tty: bool | None = None,
    interval: float | None = None,
) -> Iterator[None]:
    """Print the stage's progress on `stream` (stderr) while the body runs a pipeline whose
    workers run here (`workers_in_this_process`).

    Nothing happens on Dataflow (its counts are Beam counters in the job's UI), with
    BERTKIT_PROGRESS=0, or without `phases`; other remote workers get one line saying why.
    The last line is printed when the body ends ("done in …" when it returned, the state it
    reached when it raised).
    """
    if not phases or not progress_enabled():
        yield
        return
    if not workers_in_this_process(options):
        note = _unshown_note(options, stage)
        if note:
            print(note, file=stream or sys.stderr, flush=True)
        yield
        return
    remove_stale_progress_dirs(tempfile.gettempdir())
    directory = tempfile.mkdtemp(prefix=f"{_PROGRESS_DIR_PREFIX}{os.getpid()}-")
    previous = os.environ.get(PROGRESS_DIR_ENV)
    os.environ[PROGRESS_DIR_ENV] = directory
    try:
        with progress_printed(stage, phases, lambda: read_totals(directory), stream, tty, interval):
            yield
    finally:
        if previous is None:
            os.environ.pop(PROGRESS_DIR_ENV, None)
        else:
            os.environ[PROGRESS_DIR_ENV] = previous
        shutil.rmtree(directory, ignore_errors=True)
