"""`python -m pipelines.beam.worker`: a worker process of a local run with
`--direct_running_mode multi_processing`, started by the driver in place of Beam's own
`apache_beam.runners.worker.sdk_worker_main`, which it then runs as it is.

Two differences, both in what reaches the terminal:
- Beam is imported as a stage's process imports it (pipelines/command/startup.py). Without
  the gcp extra, importing Beam logs a notice about BigQuery through `logging.warning`,
  which gives the root logger a handler onto stderr; the harness then sets the root logger
  to INFO, and every worker printed its start-up and shut-down (about twenty INFO lines
  each) around the stage's progress line. Imported this way, the notice is dropped and no
  such handler exists: the worker's records go only to the driver over Beam's logging
  channel, where the stage's logging shows warnings and errors and nothing below
  (pipelines/beam/worker_processes.py).
- When a bundle fails, the harness prints its traceback to stderr and logs the same text;
  the printed copy is dropped (`_Stderr`), so the driver shows it once, or says it in one
  line where it is a write failure or one of the stage's refusals. Everything else written
  to stderr passes as it is.

And one in how it ends: the driver decides. Ctrl-C reaches every process of the terminal's
job, the workers too; a worker ignores it, and the driver, which says the one line of a
stopped stage, sends each worker SIGTERM, which ends it at once and silently
(pipelines/command/interruption.py). A worker whose driver died without a word (SIGKILL, a
crash) is sent SIGTERM by the kernel (`PR_SET_PDEATHSIG`), rather than running on to fail
on its closed connections.
"""

from __future__ import annotations

import ctypes
import signal
import sys
from typing import TextIO

from pipelines.command.startup import import_command

HARNESS = "apache_beam.runners.worker.sdk_worker_main"
# The harness's function that prints a failed instruction's traceback, then logs it.
_PRINTS_AND_LOGS = ("apache_beam.runners.worker.sdk_worker", "_execute")


class _Stderr:
    """The worker's sys.stderr: what `_PRINTS_AND_LOGS` prints is dropped, the rest written."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        caller = sys._getframe(1)  # print() is C: the frame that called it
        if (caller.f_globals.get("__name__"), caller.f_code.co_name) == _PRINTS_AND_LOGS:
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


# prctl(2): the signal this process gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1


def end_with_the_driver() -> None:
    """SIGINT ignored, SIGTERM when the driver ends (the module docstring); Linux only."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


if __name__ == "__main__":
    end_with_the_driver()
    sys.stderr = _Stderr(sys.stderr)
    # Ended by its driver while it starts: the driver says why; this process says nothing.
    import_command(HARNESS, quiet=True).main(sys.argv)
