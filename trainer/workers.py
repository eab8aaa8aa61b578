"""The loader's worker processes: started when the loader starts reading, ended when it stops,
whatever the way out. `PretrainingLoader.batches()` reads every epoch through one pool (its
workers go on from one epoch into the next, started once); `epoch()` through one per epoch.

A loader worker ignores the stop signals a scheduler sends to the whole job (SIGTERM,
SIGUSR1: SLURM's scancel, torchrun's process group), so that only the trainer decides when
to stop and writes its checkpoint first (trainer/preemption.py). Ignoring them for good made
every other way out hang: multiprocessing's exit handler ends daemonic children with SIGTERM
and then joins them without a timeout, and torch's DataLoader does the same after its own
joins time out; a worker that ignores SIGTERM is joined for ever. An error after the workers
started, a KeyboardInterrupt, or a program that simply returned while holding the loader's
generator, all left the trainer alive until something outside killed it.

Here a worker ignores a stop signal only while the trainer that started it still wants it:

- `WorkerPool.close()` raises a flag the workers share (a byte of shared memory, readable
  from a signal handler without a lock), then sends them SIGTERM: each exits at once with
  status 0 (torch's SIGCHLD check counts only a failure or a death by signal as an error).
  Then torch's own shutdown runs on dead processes (no 5 s join per worker), and anything
  still alive after `grace` seconds is killed.
- The folder for the sockets that pass tensors to the trainer is the trainer's, made before
  the first worker starts and removed by multiprocessing when the trainer exits: a worker
  that removed the folder it inherited (as one did) took it from every later pool, whose
  workers then could not send a batch.
- A batch a worker cannot send (multiprocessing prints the error in the queue's feeder
  thread and drops the batch) ends the worker, so the trainer stops with torch's "worker
  exited unexpectedly" instead of waiting for that batch for ever (as it did).
- A worker whose parent is gone exits on SIGTERM too, and on Linux it is killed when the
  parent dies however it died (PR_SET_PDEATHSIG): torch's watchdog notices a dead parent
  only between batches, not during a read that never returns.
- Every pool is closed by whichever comes first: the generator reading it (an epoch's, or
  `batches()`' over every epoch) ending, being closed or collected;
  `PretrainingLoader.close()`; or the interpreter's exit (an atexit hook registered after
  multiprocessing's own, so it runs before multiprocessing joins).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import logging
import multiprocessing
import multiprocessing.queues
import multiprocessing.util
import os
import shutil
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Iterator
from types import FrameType
from typing import Any

import torch
from torch.utils.data import DataLoader
from torch.utils.data._utils import signal_handling

from trainer.preemption import STOP_SIGNALS

_LOG = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
GRACE_SECONDS = 2.0  # how long a closing pool waits for its workers before killing them

_live_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
_exit_hook_lock = threading.Lock()
_exit_hook_installed = False


def _init_worker(closing: Any, parent_pid: int, parent_temp_dir: str, _worker_id: int) -> None:
    """In each worker, before it reads anything: die with the parent; leave a stop signal to
    the trainer unless the trainer is closing the pool or gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)

    def on_stop(number: int, frame: FrameType | None) -> None:
        if closing.value or os.getppid() != parent_pid:
            # Exit now, whatever we were doing: no exit handlers (multiprocessing's would join
            # a queue's feeder thread that nobody reads any more), so remove what they would:
            # the sockets' folder, if this worker made its own (one not forked: Python 3.14's
            # default start method); a forked worker's is the trainer's, which outlives it.
            temp_dir = multiprocessing.util.get_temp_dir()
            if temp_dir != parent_temp_dir:
                shutil.rmtree(temp_dir, ignore_errors=True)
            os._exit(0)
        # Otherwise a scheduler's signal to the whole job: the trainer stops after its step.

    for number in STOP_SIGNALS:
        signal.signal(number, on_stop)
    multiprocessing.queues.Queue._on_queue_feeder_error = staticmethod(_end_on_unsent_batch)


def _end_on_unsent_batch(error: BaseException, _batch: object) -> None:
    """In a worker, the queue's feeder thread could not send a batch (pickling it, or the
    socket that passes its tensors, failed): say why and end the worker, which torch's watch
    turns into the trainer's error. multiprocessing's own handler prints and drops the batch,
    and the trainer waits for it for ever."""
    traceback.print_exception(error)
    print(
        f"bertkit: loader worker {os.getpid()} could not send a batch to the trainer "
        f"({type(error).__name__}: {error}); the worker stops",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)


# Errors of these packages carry a message written for the user (the shard, the sample, the
# fix), and an OSError says what in the world failed (a file gone, a permission, a dropped
# connection): torch re-raises a worker's error as "Caught X in DataLoader worker process N"
# and the worker's whole traceback, which buries it. Anything else is a bug, whose traceback
# torch's message keeps.
_OUR_PACKAGES = ("pipelines.", "schemas.", "trainer.")


def _our_message(error: Exception) -> str | None:
    """The original message of one of our errors, or of an OSError, re-raised by torch from
    a worker; else None."""
    kind = type(error)
    if not (kind.__module__.startswith(_OUR_PACKAGES) or issubclass(kind, OSError)):
        return None
    text = str(error)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    marker = f"\n{name}: "
    if not text.startswith("Caught ") or marker not in text:
        return None
    return text[text.rindex(marker) + len(marker) :].rstrip("\n")


def _close_live_pools() -> None:
    for pool in list(_live_pools):
        pool.close()


def _install_exit_hook() -> None:
    """Registered when the first pool starts, so after multiprocessing's exit handler (which
    multiprocessing registers when it is first used): atexit runs the later one first."""
    global _exit_hook_installed
    with _exit_hook_lock:
        if not _exit_hook_installed:
            atexit.register(_close_live_pools)
            _exit_hook_installed = True


class WorkerPool:
    """A DataLoader's worker processes over `dataset`, and their batches; `close()` ends them.
    The processes live as long as the pool: over an endless `dataset` (every epoch, one
    stream), the same ones make every epoch's batches.

    pool = WorkerPool(dataset, workers=2, seed=1)
    for batch in pool: ...
    pool.close()          # idempotent; also done at exit and when the pool is collected
    """

    def __init__(
        self,
        dataset: Any,
        workers: int,
        seed: int,
        pin_memory: bool = False,
        prefetch_factor: int = 4,
    ) -> None:
        context = multiprocessing.get_context()
        self._closing = context.RawValue(ctypes.c_bool, False)
        # The folder for the sockets that pass tensors: made here, so that every worker shares
        # the trainer's (a forked worker inherits it) and multiprocessing removes it at exit.
        temp_dir = multiprocessing.util.get_temp_dir()
        loader = DataLoader(
            dataset,
            batch_size=None,
            num_workers=workers,
            pin_memory=pin_memory,
            prefetch_factor=prefetch_factor,
            # The DataLoader is iterated once: workers that outlive an epoch are an endless
            # dataset's (PretrainingLoader.batches), not torch's persistent ones.
            persistent_workers=False,
            multiprocessing_context=context,
            worker_init_fn=functools.partial(_init_worker, self._closing, os.getpid(), temp_dir),
            # Its own generator: a DataLoader draws a base seed when it starts, and from
            # the global generator that would shift dropout's draws after a resume.
            generator=torch.Generator().manual_seed(seed),
        )
        before = set(multiprocessing.active_children())
        self._iterator: Iterator[Any] | None = iter(loader)  # starts the workers
        self.processes = [p for p in multiprocessing.active_children() if p not in before]
        _install_exit_hook()
        _live_pools.add(self)

    def __iter__(self) -> WorkerPool:
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            raise StopIteration
        try:
            return next(self._iterator)
        except StopIteration:
            raise
        except Exception as error:
            message = _our_message(error)
            if message is None:
                raise  # a bug, not bad input: torch's message keeps the worker's traceback
            _LOG.debug("%s", error)  # the worker's traceback
            raise type(error)(message) from None

    @property
    def closed(self) -> bool:
        return self._iterator is None

    def close(self, grace: float = GRACE_SECONDS) -> None:
        """End every worker: ask, then torch's shutdown, then SIGKILL after `grace` s."""
        iterator, self._iterator = self._iterator, None
        if iterator is None:
            return
        _live_pools.discard(self)
        self._closing.value = True
        # torch's SIGCHLD watch raises in this process for a worker ended by a signal; a
        # worker still starting (torch's handlers not yet set up) dies of the SIGTERM below,
        # which is no failure: off the watch first, as torch's own shutdown does.
        if getattr(iterator, "_worker_pids_set", False):
            signal_handling._remove_worker_pids(id(iterator))
            iterator._worker_pids_set = False
        for process in self.processes:
            if process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)  # type: ignore[arg-type]
        deadline = time.monotonic() + grace
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        # A worker ended by the signal may have died inside torch's "workers done" event, its
        # lock held: a process-shared semaphore that nobody releases then, and torch's
        # shutdown sets that event first, so it would wait for the lock forever (it did, in a
        # full test run). Our workers leave on the signal, not on the event (one still in a
        # long C call runs the pending handler when the call returns), so nothing needs the
        # old event any more: torch sets a fresh one.
        if hasattr(iterator, "_workers_done_event"):
            iterator._workers_done_event = multiprocessing.get_context().Event()
        # torch's own clean-up (its queues, the pin-memory thread, its SIGCHLD watch list);
        # there is no public way to run it but dropping the last reference, and a traceback
        # may hold one.
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        for process in self.processes:
            if process.is_alive():
                _LOG.warning("loader worker %d did not exit in %.0f s: killed", process.pid, grace)
                process.kill()
                process.join(grace)

    def __del__(self) -> None:
        self.close()
