"""Stopping at a step boundary when the scheduler asks: SIGTERM and SIGUSR1.

Kubernetes sends SIGTERM to a pod it evicts (then SIGKILL after terminationGracePeriodSeconds),
SLURM sends SIGTERM on `scancel` or at the time limit (then SIGKILL after KillWait) and, with
`#SBATCH --signal=USR1@120`, SIGUSR1 two minutes ahead; `torchrun` passes a SIGTERM it gets on
to its workers. A handler only notes the signal. After every optimizer step the ranks agree
(one all-reduce of a number, on a CPU process group: no GPU synchronisation) whether any of
them got one, so they all stop after the same step; the run then writes a checkpoint at that
step, if it has not just written one, and exits with PREEMPTED_EXIT_CODE. `--resume` continues
from there exactly, as from any checkpoint.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

from trainer import distributed

# sysexits.h EX_TEMPFAIL, "try again later": a scheduler can requeue on it (SLURM's
# --requeue, a Kubernetes podFailurePolicy rule) and tell it from a failure.
PREEMPTED_EXIT_CODE = 75
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)

_LOG = logging.getLogger(__name__)


class StopRequest:
    """Notes the first stop signal this process gets, while installed; and Ctrl-C.

    SIGINT still raises KeyboardInterrupt at once, as Python's own handler does, but it is
    noted too: Python swallows an exception raised in a finalizer (`__del__`, a weakref
    callback: "Exception ignored in …"), so a KeyboardInterrupt that lands in one would be
    lost and the run would go on. The loop checks `interrupted` after every step and raises
    it again there (tests/test_preemption.py).
    """

    def __init__(self) -> None:
        self.signal: int | None = None
        self.interrupted = False
        self._previous: dict[int, Any] = {}

    def install(self) -> StopRequest:
        for number in STOP_SIGNALS:
            self._previous[number] = signal.signal(number, self._note)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not if ignored
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def __enter__(self) -> StopRequest:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def _interrupt(self, number: int, frame: FrameType | None) -> None:
        self.interrupted = True
        raise KeyboardInterrupt

    def check_interrupted(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C came and its exception was swallowed."""
        if self.interrupted:
            raise KeyboardInterrupt

    def _note(self, number: int, frame: FrameType | None) -> None:
        if self.signal is None:
            self.signal = number
            # Logging from a handler is safe enough here: the handler runs between bytecodes
            # of the main thread, and a stop is rare.
            _LOG.warning("got %s: stopping after this step", signal.Signals(number).name)

    def agreed(self, env: distributed.Distributed) -> int | None:
        """The stop signal if any rank got one (every rank calls this after each step)."""
        got = distributed.agree_max(env, self.signal or 0)
        return got or None


def signal_name(number: int) -> str:
    return signal.Signals(number).name
