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
  saying so. Its age is the storage's: the time the storage says the object was last
  written (S3's LastModified, GCS's `updated`) against the clock of the run that looks, so
  a live holder whose clock runs behind is not taken for a dead one; the renewal time the
  holder wrote in it is for people, and counts only where the storage gives no time (then
  one that is not a number, or lies in the future, is not trusted as fresh). A renewal
  replaces the object only if it is still the one this run wrote (S3's If-Match on its
  ETag, GCS's if_generation_match), a takeover replaces only the stale object it read, and
  a clean exit deletes only the object this run last wrote: of a holder waking from a stall
  and the run taking over from it, exactly one wins. A run of the same scheduler job (a
  SLURM requeue, a restarted Kubernetes pod of one Job: BERTKIT_JOB_ID, SLURM_JOB_ID or
  torchrun's --rdzv-id) takes over at once: the job's earlier attempt has ended, or it
  would not have been started again.

A holder can lose its lock without dying: paused (SIGSTOP, a frozen VM) past its lease, or
its `run.lock` deleted or replaced under it. Before each checkpoint and each upload the
trainer calls `check()`, which raises RunLockLost when the lock is no longer this run's; the
trainer then writes nothing more and exits 75 (trainer/preemption.py), so that a scheduler
requeues it and the requeued run finds out who holds the directory now.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
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
# The lease in seconds instead of LEASE_SECONDS (tests shorten it; renewals come 4 a lease).
LEASE_VARIABLE = "BERTKIT_RUN_LOCK_LEASE_SECONDS"
# How far in the future a holder's clock may put its renewal and still count as fresh.
_CLOCK_SKEW_SECONDS = 5.0
_MAX_LOCK_BYTES = 4096
_JOB_VARIABLES = ("BERTKIT_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")

_LOG = logging.getLogger(__name__)


class RunLockedError(ValueError):
    """Another trainer holds the run directory."""


class RunLockLost(Exception):
    """This trainer no longer holds its run directory's lock: it must write nothing more.
    Not a ValueError or OSError, so the trainer never takes it for a failed run."""


def lease_seconds() -> float:
    """The lease: LEASE_SECONDS, or BERTKIT_RUN_LOCK_LEASE_SECONDS when set."""
    value = os.environ.get(LEASE_VARIABLE)
    if value is None:
        return LEASE_SECONDS
    try:
        lease = float(value)
    except ValueError:
        lease = math.nan
    if not (math.isfinite(lease) and lease > 0):
        raise ValueError(
            f"{LEASE_VARIABLE}={shown(value)}: give the run lock's lease in seconds, a number "
            f"above 0 (unset, it is {LEASE_SECONDS:.0f})"
        )
    return lease


def shown(text: str) -> str:
    """`text` with its control and other unprintable characters escaped as repr() does: what
    a lock object says is printed, never sent raw to a terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _number(value: object) -> float:
    """A time field of a lock: NaN unless a JSON number (a string or true is not a time)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:  # an integer too large for a float
        return math.inf


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
                _number(raw["since"]),
                _number(raw["renewed"]),
                str(raw["token"]),
            )
        except (ValueError, KeyError, TypeError, RecursionError):
            return None

    def age(self, now: float) -> float:
        """Seconds since the last renewal; NaN when `renewed` is not a time."""
        return now - self.renewed if math.isfinite(self.renewed) else math.nan

    def fresh(self, now: float, lease: float) -> bool:
        """Renewed within the lease. A renewal time that is not a number, or lies further in
        the future than clocks drift apart, proves nothing: such a lock is not fresh."""
        return -_CLOCK_SKEW_SECONDS <= self.age(now) <= lease

    def describe(self) -> str:
        try:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        except (OverflowError, OSError, ValueError):  # NaN, infinite or out of range
            since = f"{self.since!r} (not a time)"
        job = f", job {shown(self.job)}" if self.job else ""
        return f"process {self.pid} on {shown(self.host)}{job}, since {since}"


class RunLock:
    """The lock on one run directory; `release()` (idempotent) gives it back."""

    def __init__(self, where: str) -> None:
        self.where = where

    @staticmethod
    def acquire(output: str) -> RunLock:
        if storage.is_remote(output):
            return _ObjectLock.acquire(output.rstrip("/"))
        return _FileLock.acquire(Path(output))

    def check(self) -> None:
        """Raise RunLockLost if this run no longer holds the lock (before every write)."""
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


def _lost(where: str, why: str) -> RunLockLost:
    return RunLockLost(
        f"{storage.redact(where)}: this trainer no longer holds the run lock ({why}); it "
        "stopped before writing anything more. Another trainer may be writing this run "
        "directory now: rerun with --resume once only one runs"
    )


def _replace(url: str, data: bytes, version: str) -> str | None:
    """`objects.replace`, and if it answers that the object changed, whether it changed to
    `data`: a client retries a request whose answer was lost (a timeout, a dropped
    connection), and the retry of a write that did land finds its own write, not the
    version it names. Only this holder writes its token and renewal time."""
    written = objects.replace(url, data, version)
    if written is not None:
        return written
    try:
        now = objects.get_versioned(url, _MAX_LOCK_BYTES)
    except FileNotFoundError:
        return None
    return now.version if now.data == data else None


def _judged(found: objects.Versioned, holder: Holder, lease: float) -> tuple[bool, float, str]:
    """(fresh, age in seconds, what makes it stale) of a lock object as read: its age by the
    storage's time of its last write where the storage gives one (a write the storage timed
    in our future is fresh: our clock is behind), else by the renewal time it records."""
    now = time.time()
    if found.modified is not None:
        age = now - found.modified
        return age <= lease, age, f"stale, last written {age:.0f} s ago by the storage's clock"
    age = holder.age(now)
    if math.isnan(age):
        why = f"its renewal time {holder.renewed!r} is not a time"
    elif age < 0:
        why = f"renewed {-age:.0f} s in the future: not trusted"
    else:
        why = f"stale, renewed {age:.0f} s ago"
    return holder.fresh(now, lease), age, why


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
        self._lost = False

    def _still_the_lock(self) -> str | None:
        """None if `run.lock` is still the file this process locked; else what became of it.
        flock locks a file, not a name: a file deleted or replaced under the holder leaves
        it holding a lock nobody else looks at, and the next trainer locks the new one."""
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            return "it was deleted"
        held = os.fstat(self._descriptor)
        if (now.st_ino, now.st_dev) != (held.st_ino, held.st_dev):
            return "it was replaced by another file"
        return None

    def check(self) -> None:
        if self._lost:
            raise _lost(str(self.path), "it was deleted or replaced")
        why = self._still_the_lock()
        if why is not None:
            self._lost = True
            raise _lost(str(self.path), why)

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
        if not self._lost and self._still_the_lock() is None:
            # Removed while still held: nobody can take the old file. A name that is no
            # longer ours may be another trainer's lock now, and stays.
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
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
    def __init__(self, url: str, holder: Holder, version: str, lease: float) -> None:
        super().__init__(url)
        self.url, self.holder, self.lease = url, holder, lease
        self._renew_every = min(RENEW_SECONDS, lease / 4)
        self._version = version  # what this run last wrote: a renewal replaces only that
        self._confirmed = time.monotonic()  # when the last renewal that held began
        self._lost: str | None = None  # why this run no longer holds the lock
        self._mutex = threading.Lock()  # the renewer thread and check() take turns
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, name="run-lock", daemon=True)
        self._renewer.start()

    @classmethod
    def acquire(cls, output: str) -> _ObjectLock:
        lease = lease_seconds()
        url = f"{output}/{LOCK_FILE}"
        me = Holder.me()
        version = objects.create(url, me.to_bytes())
        if version is not None:
            return cls(url, me, version, lease)
        try:
            found = objects.get_versioned(url, _MAX_LOCK_BYTES)
        except FileNotFoundError:  # released between our two requests: try once more
            version = objects.create(url, me.to_bytes())
        else:
            holder = Holder.parse(found.data)
            if holder is None:
                raise ValueError(
                    f"{storage.redact(url)} is not a bertkit run lock: remove it if no trainer "
                    "writes this run directory"
                )
            fresh, age, reason = _judged(found, holder, lease)
            same_job = bool(me.job) and holder.job == me.job
            if fresh and not same_job:
                age = max(age, 0.0)
                raise _refusal(
                    output,
                    holder,
                    f" (renewed {age:.0f} s ago; if that run is dead, its lock "
                    f"runs out {lease - age:.0f} s from now)",
                )
            if same_job:
                reason = "of this same job"
            _LOG.warning(
                "%s: taking over the lock of %s (%s)",
                storage.redact(url),
                holder.describe(),
                reason,
            )
            # Only the stale object read above: if its holder renewed it meanwhile, it lives.
            version = _replace(url, me.to_bytes(), found.version)
        if version is None:
            raise _refusal(output, None, " (it took the lock a moment ago)")
        return cls(url, me, version, lease)

    def _renew_once(self) -> None:
        """Renew the lease if the lock is still this run's; else note why it is not."""
        with self._mutex:
            if self._lost is not None:
                return
            # Past the lease less one renewal, another run may have judged the lock stale
            # (a stall: SIGSTOP, a frozen VM, a storage outage): it is no longer trusted.
            silent = time.monotonic() - self._confirmed
            if silent > self.lease - self._renew_every:
                self._lost = f"not renewed for {silent:.0f} s, and its lease is {self.lease:g} s"
                return
            started = time.monotonic()
            try:
                found = objects.get_versioned(self.url, _MAX_LOCK_BYTES)
                current = Holder.parse(found.data)
                if current is None or current.token != self.holder.token:
                    who = current.describe() if current is not None else "something else"
                    self._lost = f"the lock now names {who}"
                    return
                self.holder.renewed = time.time()
                renewed = _replace(self.url, self.holder.to_bytes(), found.version)
            except FileNotFoundError:
                self._lost = "the lock was deleted"
                return
            except OSError as error:  # tried again at the next renewal, within the lease
                _LOG.warning(
                    "%s: could not renew the run lock: %s", storage.redact(self.url), error
                )
                return
            if renewed is None:
                self._lost = "another trainer replaced the lock while it was being renewed"
                return
            self._version, self._confirmed = renewed, started

    def _renew(self) -> None:
        while not self._stop.wait(self._renew_every) and self._lost is None:
            self._renew_once()

    def check(self) -> None:
        self._renew_once()
        if self._lost is not None:
            raise _lost(self.url, self._lost)

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._renewer.join(self._renew_every / 6)  # a renewal in flight: not worth a hang
        # A renewal still in flight would change the version under the delete: wait for it
        # a little more, then delete what this run last wrote all the same.
        held = self._mutex.acquire(timeout=self._renew_every / 6)
        try:
            if self._lost is not None:
                return  # the lock is another run's now, or nobody's: not ours to delete
            # Only the object this run last wrote: a lock taken over since (its token or not)
            # is another run's, and stays, however late this delete arrives.
            if not objects.delete_if(self.url, self._version):
                _LOG.warning(
                    "%s: not removed: it is no longer the lock this run wrote (another trainer "
                    "took it over, or a renewal was cut short; then it runs out after %g s)",
                    storage.redact(self.url),
                    self.lease,
                )
        except OSError as error:
            _LOG.warning("%s: could not remove the run lock: %s", storage.redact(self.url), error)
        finally:
            if held:
                self._mutex.release()
