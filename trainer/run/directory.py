"""A run directory as one object: `--output`, local or on s3:// / gs://.

`RunDirectory.open` checks where it may be (never inside the shards it reads), takes its
lock (rank 0, lock.py) before anything looks at what is there and, for a URL, opens the
local staging directory the trainer writes in (remote.py). `prepare` then checks whether it
holds an earlier run (--resume goes on with it, --overwrite deletes it, else a one-line
refusal), on the URL and in staging alike; `clear_earlier` deletes --overwrite's files once
every other check has passed (`deletes` tells whether a checkpoint is among them, as the
one --init-checkpoint names must not be: trainer/run/start.py). Its checkpoints: `latest`,
`mirror` after each write (to the bucket: checkpoint before `latest`), `push` at the end.
Under --compile, `open_compile_cache` points torch.compile's caches at its
`compile-cache/` (trainer/compiling.py): the run's own, kept by --overwrite, reused by a
--resume. `close` removes the staging directory, gives the lock back and the cache's
variables, whatever ended the run.

The rules themselves live in checkpoints.py, lock.py and remote.py; this object is the one
place the trainer asks, so set-up and the loop never hold a lock, a staging directory and
a URL side by side.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.io import storage
from schemas.checkpoint import CHECKPOINTS_DIR
from trainer.compiling import CompileCache
from trainer.run.checkpoints import (
    check_output_outside_shards,
    latest_checkpoint,
    prepare_run_directory,
)
from trainer.run.lock import RunLock
from trainer.run.remote import RemoteRun


@dataclass
class RunDirectory:
    output: str  # --output as given: a local path or an s3:// / gs:// URL
    path: Path  # where this process writes: --output, or its local staging for a URL
    keep: int  # --keep-checkpoints
    lock: RunLock | None = None  # rank 0's lock; None on the other ranks
    remote: RemoteRun | None = None  # the URL staging mirrors to; None for a local --output
    # What an earlier run left that --overwrite deletes once every check has passed: files
    # in `path`, object names on the URL.
    _earlier: list[Path] = field(default_factory=list)
    _earlier_objects: list[str] = field(default_factory=list)
    _compile_cache: CompileCache | None = None

    @classmethod
    def open(cls, output: str, shards: tuple[str, ...], keep: int, main: bool) -> RunDirectory:
        """Checked against every source's shards, locked (`main`: rank 0), staged for a URL.
        Nothing is left held if a step fails: the lock taken is given back."""
        for each in shards:
            check_output_outside_shards(output, each)
        # One trainer a run directory: rank 0 holds the lock before it looks at what is there.
        lock = RunLock.acquire(output) if main else None
        try:
            remote = None
            if storage.is_remote(output):
                guard = lock.check if lock is not None else None  # no write once it is lost
                remote = RemoteRun.open(output, keep, guard)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        path = remote.staging if remote is not None else Path(output)
        return cls(output, path, keep, lock=lock, remote=remote)

    def prepare(self, resume: bool, overwrite: bool, main: bool = True) -> None:
        """Check what an earlier run left (on the URL first, which --resume fetches into
        staging, then the local directory); refuse before any work if the flags do not say
        what to do with it. What it will replace is said by the `main` process alone."""
        if self.remote is not None:
            self._earlier_objects = self.remote.prepare(resume, overwrite)
        self._earlier = prepare_run_directory(self.path, resume, overwrite, main)

    def clear_earlier(self, main: bool) -> None:
        """Delete --overwrite's earlier run files, or the temporaries of a checkpoint write
        a kill cut short (rank 0 only; every check has passed by now)."""
        if not main:
            return
        for path in self._earlier:
            path.unlink()
        if self.remote is not None:
            self.remote.delete(self._earlier_objects)

    def deletes(self, checkpoint: str | Path) -> bool:
        """Whether `clear_earlier` will delete `checkpoint` (`prepare` has looked): a local
        file, compared by its real path (links and `..` resolved), or an object's URL on
        s3:// or gs://, compared with the run's objects by URL."""
        if storage.is_remote(str(checkpoint)):
            if self.remote is None:
                return False
            url = str(checkpoint).rstrip("/")
            return any(f"{self.remote.url}/{name}" == url for name in self._earlier_objects)
        real = os.path.realpath(checkpoint)
        return any(os.path.realpath(path) == real for path in self._earlier)

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS_DIR

    @property
    def checkpoints_url(self) -> str:
        """The checkpoints folder as --output names it (what a checkpoint records paths
        relative to, so a run's tree copied with its shards keeps its links)."""
        return storage.join(self.output, CHECKPOINTS_DIR)

    def latest(self) -> Path | None:
        """The checkpoint `latest` names, in `path` (staging holds the one --resume
        fetched); None if the run has none yet."""
        return latest_checkpoint(self.checkpoints)

    def shown(self, checkpoint: Path) -> str:
        """A checkpoint as the user knows it: the object's URL, not its staging copy."""
        if self.remote is None:
            return str(checkpoint)
        return f"{storage.redact(self.remote.url)}/{CHECKPOINTS_DIR}/{checkpoint.name}"

    def open_compile_cache(self, main: bool) -> CompileCache:
        """torch.compile's caches pointed at `compile-cache/` here, before the first
        compilation (a run on object storage: in staging, filled from and mirrored to the
        URL's archive)."""
        if self._compile_cache is None:
            mirror = self.remote.compile_cache_mirror if self.remote is not None else None
            self._compile_cache = CompileCache.open(self.path, main, mirror)
        return self._compile_cache

    def check_lock(self) -> None:
        """Raises RunLockLost if this process held the lock and no longer does."""
        if self.lock is not None:
            self.lock.check()

    def mirror(self, checkpoint: Path, before_push: Callable[[], None] | None = None) -> str:
        """After checkpoints.save_checkpoint wrote `checkpoint` here (atomic, `latest` after
        it, the oldest beyond --keep-checkpoints removed): mirror it to the bucket, the
        checkpoint before `latest`, then the logs (`before_push`, the metrics' flush, runs
        first); the name shown for it, the object's URL for a bucket."""
        if self.remote is None:
            return str(checkpoint)
        if before_push is not None:
            before_push()
        self.remote.push()
        return self.shown(checkpoint)

    def push(self) -> None:
        """The last mirror to the URL (the last metrics and events); nothing for a local
        --output."""
        if self.remote is not None:
            self.remote.push()

    def close(self) -> None:
        """The staging directory removed (nothing else would), the lock given back, the
        compile cache's variables as they were."""
        try:
            if self._compile_cache is not None:
                self._compile_cache.close()
            if self.remote is not None:
                self.remote.close()
        finally:
            if self.lock is not None:
                self.lock.release()
