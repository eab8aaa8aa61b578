"""Ctrl-C (SIGINT) and SIGTERM in a Beam stage: one line, exit 128 + the signal's number.

A stage writes its manifest last, after every unit of work has finished, and the next stage
reads nothing without it; so a stage stopped part-way has lost nothing, and what it wrote
is untrusted by construction. What a stop needs is a clear end:

- the first signal is noted and raised in the main thread as KeyboardInterrupt, which
  unwinds Beam's runner (it wraps the exception in its own, "KeyboardInterrupt [while
  running …]", and logs it), so `stage_main` knows from the note, not from the exception,
  that the run was stopped; its worker processes (those of
  `--direct_running_mode multi_processing`) are sent SIGTERM at once, so none of them
  finishes its bundle first;
- from then on nothing else is said: Beam's logged tracebacks, and the errors of its
  threads that lose their worker or connection, are held back, also once the stage has
  ended (a thread that was running at the stop and notices it late, as Beam's thread of a
  worker process that SIGTERM ended does); a thread started later is heard. Another signal raises
  KeyboardInterrupt again (an exception raised in a finalizer is swallowed, and the first
  one could be lost there), until `stage_main` has caught one and is saying its line;
- the stage ends with one line ("bertkit books: interrupted (SIGINT): --output DIR is
  incomplete and has no manifest, so no stage reads it: rerun with --overwrite") and exit
  130 for SIGINT, 143 for SIGTERM, the status a shell gives a process the signal ended.

SIGINT is handled only where Python's own handler is installed: a stage started in the
background (`cmd &` in a script) ignores Ctrl-C, as every program does there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_code(number: int) -> int:
    """The exit status of a process ended by signal `number`, as a shell reports it."""
    return 128 + number


class StageStop:
    """Notes the first stop signal a stage gets, while installed (the module docstring)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.ending = False  # set by stage_main once it has caught the interruption
        self._previous: dict[int, Any] = {}
        self._excepthook = threading.excepthook
        self._stopped_threads: frozenset[threading.Thread] = frozenset()

    def install(self) -> StageStop:
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread may set handlers (a caller's own thread)
        for number in STOP_SIGNALS:
            current = signal.getsignal(number)
            if number == signal.SIGINT and current is not signal.default_int_handler:
                continue  # ignored (a background job), or someone else's handler
            if number == signal.SIGTERM and current is not signal.SIG_DFL:
                continue
            self._previous[number] = signal.signal(number, self._stop)
        return self

    def restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()
        if self.signal is None:
            threading.excepthook = self._excepthook
        else:  # the threads the stop caught may still raise: quiet for them, as it was
            threading.excepthook = _QuietFor(self._stopped_threads, self._excepthook)

    def __enter__(self) -> StageStop:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    @property
    def name(self) -> str:
        return signal.Signals(self.signal).name if self.signal else ""

    def _stop(self, number: int, frame: FrameType | None) -> None:
        if self.signal is None:  # the first signal decides the exit code
            self.signal = number
            main = threading.main_thread()
            self._stopped_threads = frozenset(t for t in threading.enumerate() if t is not main)
            threading.excepthook = _quiet_excepthook
            end_children()
        if not self.ending:
            raise KeyboardInterrupt


def _quiet_excepthook(args: threading.ExceptHookArgs) -> None:
    """A thread's error once the stage is stopping (a worker that ended, a closed
    connection) is a consequence of the stop, not news: nothing printed."""


class _QuietFor:
    """After a stopped stage: the errors of the threads the stop caught say nothing; any
    other thread's go to the hook there was before the stage."""

    def __init__(self, threads: frozenset[threading.Thread], otherwise: Any) -> None:
        self.threads, self.otherwise = threads, otherwise

    def __call__(self, args: threading.ExceptHookArgs) -> None:
        if args.thread not in self.threads:
            self.otherwise(args)


# What the command line of a stage's worker process holds (pipelines/beam/worker.py).
WORKER_MODULE = b"pipelines.beam.worker"


def end_children() -> None:
    """SIGTERM to this process's worker processes (children of any of its threads: Beam
    starts each worker from a thread of its own). Other children are not the stage's to
    end: a program that runs a stage inside its own process keeps its own."""
    for number in _children():
        try:
            command = Path(f"/proc/{number}/cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        if WORKER_MODULE in command.split(b"\0"):
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.kill(number, signal.SIGTERM)


def _children() -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:  # the thread ended meanwhile, or no /proc (not Linux)
            continue
    return found
