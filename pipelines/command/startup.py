"""A command's start-up when it is the whole process: its modules imported once, with the
cyclic garbage collector paused, then frozen out of the collector's view.

Importing Beam makes about a million objects that live as long as the process; the
collector walked all of them at each full collection, several times while they were
imported and once more at exit (counted with gc.callbacks). `import_command` is for a
process's entry point only (`bertkit COMMAND`, `python -m pipelines.STAGE`): a caller that
runs a command inside its own process (the tests) keeps its collector as it is. The
collector still collects what the run makes.

A Beam stage does no linear algebra, but importing Beam imports numpy, and numpy's
OpenBLAS starts a pool of threads as it loads (one per core but one), which wait for work
by spinning before they sleep: CPU time of every stage process, and of every worker process
Beam starts (docs/benchmarks.md, Extraction). A stage's process therefore asks
for one BLAS thread (`OPENBLAS_NUM_THREADS=1`, which the worker processes it starts inherit)
unless the user set the variable; `bertkit train` keeps the default.

Without the `gcp` extra (bertkit's core install, the README's), importing Beam logs "apitools
not found, and bigquery client libraries are not available …" through the root logger: a
warning about BigQuery, which no stage uses, on every run, and one that sets up the root
logger's format before the stage does. While the command's modules are imported, the root
logger has a handler of ours that drops that one message and passes any other to Python's
last-resort handler, as it would have gone with no handler at all.

A command's output may go to a reader that stops early (`bertkit --help | head -3`,
`bertkit inspect … --show 50 | less`, quit at once). `exit_quietly_on_broken_pipe` ends
the command then as `head`'s other writers end (`cat`, `grep`): quietly, with the exit
status of a process ended by SIGPIPE (141), not a BrokenPipeError traceback. Only a broken
stdout ends it so; a broken connection elsewhere is an error as before. Python ignores
SIGPIPE, and bertkit keeps it that way: its default would end the process on any socket
whose peer went away.

For `python -m pipelines.STAGE` to get there, the package must not import Beam itself:
Python imports a package before its __main__. `lazy_exports` makes a package's names
import on first use (PEP 562), so importing the package costs nothing.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import os
import select
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

# Read by OpenBLAS when it loads: set before anything imports numpy.
BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"
# What Beam logs at import where its BigQuery client's dependencies are not installed.
BEAM_BIGQUERY_NOTICE = "apitools not found, and bigquery client libraries are not available"


class _ImportLogHandler(logging.Handler):
    """The root logger's handler while a command is imported (see the module docstring)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(BEAM_BIGQUERY_NOTICE):
            return
        last_resort = logging.lastResort
        if last_resort is not None and record.levelno >= last_resort.level:
            last_resort.handle(record)


class _StoppedWhileImporting(BaseException):
    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def _stop_import(number: int, frame: object) -> None:
    raise _StoppedWhileImporting(number)


@contextmanager
def starting(quiet: bool = False) -> Iterator[None]:
    """While a command starts (its modules imported, its extras checked), Ctrl-C or SIGTERM
    ends the process with one line and the shell's status for the signal (130, 143), not a
    traceback from inside an import; nothing has been read or written yet. `quiet`: the
    status alone (a stage's worker process, which its driver ends so, says nothing). Only
    where the default handlers are in place: an ignored Ctrl-C (a background job) stays so,
    and an enclosing `starting` keeps its own."""
    previous = {
        number: signal.signal(number, _stop_import)
        for number in (signal.SIGINT, signal.SIGTERM)
        if signal.getsignal(number) in (signal.default_int_handler, signal.SIG_DFL)
    }
    try:
        yield
    except _StoppedWhileImporting as stopped:
        if not previous:  # an enclosing `starting` says it
            raise
        if not quiet:
            name = signal.Signals(stopped.number).name
            print(
                f"bertkit: interrupted ({name}) while starting; nothing was done", file=sys.stderr
            )
        sys.exit(128 + stopped.number)
    finally:
        for number, earlier in previous.items():
            signal.signal(number, earlier)


def import_command(module: str, *, one_blas_thread: bool = True, quiet: bool = False) -> ModuleType:
    """Import a command's module (and Beam with it) for a process that runs only it.

    `one_blas_thread`: a Beam stage's process (see the module docstring); False for the
    trainer, whose process keeps whatever BLAS threads its libraries choose.

    Importing takes seconds, and Ctrl-C or SIGTERM in them is common (a typo seen late):
    `starting` ends the process with one line (`quiet`: none). The command installs its own
    handlers once imported (pipelines/command/interruption.py, trainer/preemption.py)."""
    if one_blas_thread:
        os.environ.setdefault(BLAS_THREADS_VARIABLE, "1")
    collecting = gc.isenabled()
    gc.disable()
    root, handler = logging.getLogger(), _ImportLogHandler()
    root.addHandler(handler)
    try:
        with starting(quiet):
            return importlib.import_module(module)
    finally:
        root.removeHandler(handler)
        gc.freeze()
        if collecting:
            gc.enable()


# The exit status of a command whose stdout's reader went away: a process ended by SIGPIPE's,
# as a shell reports it.
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


@contextmanager
def exit_quietly_on_broken_pipe() -> Iterator[None]:
    """Run a command's `main` in the body; if its stdout is a pipe whose reader has gone,
    end with BROKEN_PIPE_EXIT and nothing on stderr (the module docstring). What is still
    buffered is flushed inside, so a write that fails at exit is caught here too."""
    try:
        try:
            yield
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        if not stdout_reader_gone():
            raise  # a connection of the command's own, not its output
        # Python flushes stdout again as it exits: give it somewhere to write.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        sys.exit(BROKEN_PIPE_EXIT)


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe with no reader left: poll reports an error on the writing
    end of such a pipe (and on nothing else a command writes to)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # no stdout, or one without a file descriptor
        return False


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module `__getattr__`: each exported name from the submodule `exports`
    names, imported when first asked for; a submodule's own name gives the submodule, as
    it does once imported (`books.transforms`)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is not None:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
