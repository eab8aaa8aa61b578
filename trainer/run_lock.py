"""One run directory, one writer: the lock `bertkit train` holds on its --output.

Two trainers writing one run directory would interleave their metrics, mix their checkpoints
and rotate away each other's. Rank 0 takes the lock before it looks at what the directory
holds, and keeps it until it exits; a second trainer is refused before any work (exit 2),
told who holds it. A crashed run never leaves it held for ever:

- A local (or mounted) directory: `OUTPUT/run.lock`, locked with flock(2). The kernel
  releases the lock when the process ends, however it ends (`kill -9` too). The file says
  who holds it (host, pid, since) and is removed on a clean exit.
- s3:// and gs://: the object `OUTPUT/run.lock`, created only if no object is there (the
  storage decides between two racing runs), holding who holds it and when it was last
  renewed. A thread renews it every RENEW_SECONDS; one not renewed for LEASE_SECONDS (its
  run was killed before it could delete it) is stale, and the next run takes it over,
  saying so. A run of the same scheduler job (a SLURM requeue, a restarted Kubernetes pod
  of one Job: BERTKIT_JOB_ID, SLURM_JOB_ID or torchrun's --rdzv-id) takes over at once: the
  job's earlier attempt has ended, or it would not have been started again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from pipelines.io import objects, storage

LOCK_FILE = "run.lock"
LEASE_SECONDS = 120.0
RENEW_SECONDS = 30.0
_MAX_LOCK_BYTES = 4096
_JOB_VARIABLES = ("BERTKIT_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")

_LOG = logging.getLogger(__name__)


class RunLockedError(ValueError):
    """Another trainer holds the run directory."""


@dataclass
class Holder:
    host: str
    pid: int
    job: str  # the scheduler job it belongs to, or ""
    since: float  # time.time() when it took the lock
    renewed: float  # time.time() of the last renewal (object storage)
    token: str  # tells this holder from any other

    @classmethod
    def me(cls) -> Holder:
        job = next((os.environ[v] for v in _JOB_VARIABLES if os.environ.get(v)), "")
        now = time.time()
        return cls(
            socket.gethostname(),
            os.getpid(),
            "" if job == "none" else job,
            now,
            now,
            uuid.uuid4().hex,
        )

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode() + b"\n"

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        """The holder a lock file or object names; None if it names none (empty, cut short
        by a crash mid-write, or not ours)."""
        if len(data) > _MAX_LOCK_BYTES:
            return None
        try:
            raw = json.loads(data)
            return cls(
                str(raw["host"]),
                int(raw["pid"]),
                str(raw["job"]),
                float(raw["since"]),
                float(raw["renewed"]),
                str(raw["token"]),
            )
        except (ValueError, KeyError, TypeError, RecursionError):
            return None

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        job = f", job {self.job}" if self.job else ""
        return f"process {self.pid} on {self.host}{job}, since {since}"


class RunLock:
    """The lock on one run directory; `release()` (idempotent) gives it back."""

    def __init__(self, where: str) -> None:
        self.where = where

    @staticmethod
    def acquire(output: str) -> RunLock:
        if storage.is_remote(output):
            return _ObjectLock.acquire(output.rstrip("/"))
        return _FileLock.acquire(Path(output))

    def release(self) -> None:
        raise NotImplementedError


def _refusal(where: str, holder: Holder | None, detail: str = "") -> RunLockedError:
    who = holder.describe() if holder is not None else "another trainer"
    return RunLockedError(
        f"--output {storage.redact(where)} is being written by {who}{detail}: one run "
        "directory takes one trainer. Wait for it to end, or choose another --output"
    )


class _FileLock(RunLock):
    def __init__(self, path: Path, descriptor: int, created: list[Path]) -> None:
        super().__init__(str(path))
        self.path, self._descriptor, self._created = path, descriptor, created

    @classmethod
    def acquire(cls, output: Path) -> _FileLock:
        if output.exists() and not output.is_dir():
            raise ValueError(f"--output {output} is a file: give a run directory")
        created = [p for p in (output, *output.parents) if not p.exists()]
        output.mkdir(parents=True, exist_ok=True)
        path = output / LOCK_FILE
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise ValueError(
                f"{path} is not a regular file: bertkit keeps its run lock there; remove it"
            )
        while True:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.parse(os.pread(descriptor, _MAX_LOCK_BYTES + 1, 0))
                os.close(descriptor)
                raise _refusal(str(output), holder) from None
            except BaseException:
                os.close(descriptor)
                raise
            # The holder before us may have removed the file between our open and our lock:
            # then we hold a lock on a name nobody will look at again. Start over.
            try:
                same = os.stat(path).st_ino == os.fstat(descriptor).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(descriptor)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, Holder.me().to_bytes(), 0)
        return cls(path, descriptor, created)

    def release(self) -> None:
        if self._descriptor < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # while still holding it: nobody can take the old file
        os.close(self._descriptor)
        self._descriptor = -1
        # The folders taking the lock made, if the run wrote nothing in them (it was refused
        # before any work): a refusal leaves no run directory behind.
        for folder in self._created:
            try:
                folder.rmdir()
            except OSError:  # not empty: the run wrote there
                break


class _ObjectLock(RunLock):
    def __init__(self, url: str, holder: Holder) -> None:
        super().__init__(url)
        self.url, self.holder = url, holder
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, name="run-lock", daemon=True)
        self._renewer.start()

    @classmethod
    def acquire(cls, output: str) -> _ObjectLock:
        url = f"{output}/{LOCK_FILE}"
        me = Holder.me()
        if objects.create(url, me.to_bytes()):
            return cls(url, me)
        try:
            holder = Holder.parse(objects.get(url, _MAX_LOCK_BYTES))
        except FileNotFoundError:
            holder = None  # released between our two requests: try once more below
        else:
            if holder is None:
                raise ValueError(
                    f"{storage.redact(url)} is not a bertkit run lock: remove it if no trainer "
                    "writes this run directory"
                )
            age = time.time() - holder.renewed
            if age <= LEASE_SECONDS and not (me.job and holder.job == me.job):
                raise _refusal(
                    output,
                    holder,
                    f" (renewed {age:.0f} s ago; if that run is dead, its lock "
                    f"runs out {LEASE_SECONDS - age:.0f} s from now)",
                )
            reason = "of this same job" if me.job and holder.job == me.job else "stale"
            _LOG.warning(
                "%s: taking over the lock of %s (%s, renewed %.0f s ago)",
                storage.redact(url),
                holder.describe(),
                reason,
                age,
            )
            objects.delete(url)
        if not objects.create(url, me.to_bytes()):
            raise _refusal(output, None, " (it took the lock a moment ago)")
        return cls(url, me)

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            self.holder.renewed = time.time()
            try:
                objects.put(self.url, self.holder.to_bytes())
            except OSError as error:  # the next renewal tries again; the lease is 4 renewals
                _LOG.warning(
                    "%s: could not renew the run lock: %s", storage.redact(self.url), error
                )

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._renewer.join(RENEW_SECONDS / 6)  # a renewal in flight: not worth a hang
        try:
            current = Holder.parse(objects.get(self.url, _MAX_LOCK_BYTES))
            if current is not None and current.token == self.holder.token:
                objects.delete(self.url)
        except OSError as error:  # FileNotFoundError too: nothing to give back
            _LOG.warning("%s: could not remove the run lock: %s", storage.redact(self.url), error)
