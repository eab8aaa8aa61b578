"""A run directory on object storage: `bertkit train --output s3://…` or `gs://…`.

The trainer works in a local staging directory, exactly as with a local --output (atomic
checkpoint writes, `latest`, rotation, metrics.jsonl, TensorBoard events), and rank 0
mirrors it to the URL after every checkpoint and at the end: the checkpoint first, `latest`
only once that upload has completed (an object appears whole or not at all), then the
metrics and event files; checkpoints rotated out locally are deleted remotely. So a reader
of the URL (`--resume`, `--init-checkpoint`, `bertkit export-hf`) never finds a `latest`
that names a partial checkpoint.

Before any work the URL's listing is checked by the local rules (trainer/run/checkpoints.py): an
earlier run there needs --resume or --overwrite, and --overwrite refuses a prefix holding
anything no run writes. --resume first downloads `latest`, the checkpoint it names and the
metrics into staging (every rank: each reads the checkpoint).

Under --compile, torch.compile's caches (trainer/compiling.py) go where a local run keeps
them, staging's `compile-cache/`, and the URL keeps them as one archive,
`compile-cache.tar`: each rank unpacks it there before the first compilation (a requeued
job on a fresh machine loads what the first one compiled and tuned, instead of tuning
again), and rank 0 uploads it again at each mirror where its files changed. Like the local
folder it is the run's own, yet not a run file: --overwrite keeps it. An archive that
cannot be unpacked is said in one line and replaced: a cache only ever saves time.

Every write to the URL (an upload, a delete) is preceded by `guard`, the run lock's check
(trainer/run/lock.py): a trainer that lost its lock while it stalled writes nothing more.
A stall can come between the check and the write, so `latest` is also written only over
the `latest` this run last wrote or read (S3's If-Match, GCS's if_generation_match; created
only if absent, If-None-Match, where there was none): a trainer whose upload arrives after
another run wrote `latest` raises RunLockLost instead of moving `latest` back.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.io import objects, storage
from schemas.checkpoint import (
    CHECKPOINT_GLOB,
    CHECKPOINTS_DIR,
    LATEST_FILE,
    LATEST_MAX_BYTES,
    parse_latest,
)
from trainer.metrics import METRICS_FILE
from trainer.run.checkpoints import (
    COMPILE_CACHE_ARCHIVE,
    CheckpointError,
    is_checkpoint_file,
    is_run_file,
)
from trainer.run.leftovers import foreign_problem, leftovers_problem
from trainer.run.lock import LOCK_FILE, RunLockLost

_LOG = logging.getLogger(__name__)
# A file of the compile cache as a mirror compares it: (path in the cache, bytes, mtime).
_CacheFile = tuple[str, int, int]


def _latest_name(pointer: Path, where: str) -> str:
    with pointer.open("rb") as source:
        data = source.read(LATEST_MAX_BYTES + 1)
    try:
        return parse_latest(data, storage.redact(where))
    except ValueError as error:
        raise CheckpointError(str(error)) from error


def _is_run_file(name: str) -> bool:
    return is_run_file(name, local=False)


def _cache_files(directory: Path) -> tuple[_CacheFile, ...]:
    found = []
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with contextlib.suppress(FileNotFoundError):  # renamed away since the listing
                status = path.stat()
                found.append(
                    (path.relative_to(directory).as_posix(), status.st_size, status.st_mtime_ns)
                )
    return tuple(sorted(found))


def _is_mirrored(name: str) -> bool:
    """A run file staging mirrors: each but the run lock, which only trainer/run/lock.py
    reads and writes (a compare-and-swap). A copy of it uploaded with the logs would put an
    old renewal time back, so that another trainer could take a live run's lock over."""
    return _is_run_file(name) and name != LOCK_FILE


@dataclass
class RemoteRun:
    url: str
    staging: Path
    keep: int  # --keep-checkpoints: the URL keeps as many as a local run directory would
    uploaded: set[str] = field(default_factory=set)  # checkpoint names on the URL
    # The staging checkpoints the URL holds as staging does: this run's uploads and the one
    # --resume fetched. Any other the run writes is uploaded, even over a name the URL has.
    _same_on_url: set[str] = field(default_factory=set)
    guard: Callable[[], None] | None = None  # raises if this run may no longer write
    compile_cache: Path | None = None  # staging's compile-cache/, mirrored as one archive
    _cache_files: tuple[_CacheFile, ...] = ()  # its files when last unpacked or uploaded
    # The version of `latest` on the URL as this run last wrote or read it; None: none there
    # (not yet, or deleted by --overwrite): the next write of `latest` replaces only that.
    _latest_version: str | None = None
    _latest_written: bytes | None = None  # what this run last wrote there

    @classmethod
    def open(cls, url: str, keep: int, guard: Callable[[], None] | None = None) -> RemoteRun:
        objects.split(url)  # only s3:// and gs://
        staging = Path(tempfile.mkdtemp(prefix="bertkit-run-"))
        return cls(url.rstrip("/"), staging, keep, guard=guard)

    def _may_write(self) -> None:
        if self.guard is not None:
            self.guard()

    def _url(self, name: str) -> str:
        return f"{self.url}/{name}"

    def prepare(self, resume: bool, overwrite: bool) -> list[str]:
        """Check the URL's listing before any work; with --resume, fetch what resuming reads.
        Returns the earlier run's objects to delete (--overwrite) once every check passed."""
        problem = objects.object_problem(self.url, "--output")
        if problem:
            raise CheckpointError(problem)
        # A name ending in / is a zero-byte folder marker (consoles make them), not a file.
        names = [n for n in objects.list_names(self.url) if n and not n.endswith("/")]
        earlier = [n for n in names if _is_mirrored(n)]
        where = storage.redact(self.url)
        latest = f"{CHECKPOINTS_DIR}/{LATEST_FILE}"
        foreign = [n for n in names if not _is_run_file(n) and n != COMPILE_CACHE_ARCHIVE]
        if not any(is_checkpoint_file(n) or n == latest for n in earlier):
            # A run that stopped before its first checkpoint left only metrics and events,
            # which nothing can continue: a rerun with the same flags replaces them, where
            # nothing else is there and its metrics.jsonl is a run's (as in a local one).
            if earlier and foreign:
                raise CheckpointError(foreign_problem(where, foreign[0], overwrite))
            if earlier and not overwrite:
                metrics = self.staging / METRICS_FILE
                if METRICS_FILE in names:
                    objects.download(self._url(METRICS_FILE), metrics)
                problem = leftovers_problem(where, earlier, metrics, overwrite)
                if problem:
                    raise CheckpointError(problem)
            return earlier
        if resume:
            self._fetch_for_resume(names)
            return []
        if not overwrite:
            raise CheckpointError(
                f"{where} holds an earlier run ({earlier[0]}, …): pass --resume to continue "
                "it, or --overwrite to start over (deletes only its checkpoints, metrics and "
                "event files)"
            )
        if foreign:
            raise CheckpointError(foreign_problem(where, foreign[0], overwrite=True))
        return earlier

    def _fetch_for_resume(self, names: list[str]) -> None:
        latest = f"{CHECKPOINTS_DIR}/{LATEST_FILE}"
        if latest not in names:
            found = sorted(n.split("/", 1)[1] for n in names if is_checkpoint_file(n))
            raise CheckpointError(
                f"{storage.redact(self._url(latest))} is missing, but the run holds "
                f"{', '.join(found)}: `latest` names the newest complete one, and nothing "
                f"else says which that is. Upload a `latest` holding its name ({found[-1]}) "
                "to resume from it, or pass --overwrite to start over"
            )
        found = objects.get_versioned(self._url(latest), LATEST_MAX_BYTES)
        pointer = self.staging / latest
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.write_bytes(found.data)
        self._latest_version = found.version
        name = _latest_name(pointer, self._url(latest))
        checkpoint = f"{CHECKPOINTS_DIR}/{name}"
        if checkpoint not in names:
            raise CheckpointError(
                f"{storage.redact(self._url(latest))} names {name!r}, which is not on the "
                "storage: it was deleted after the trainer wrote it"
            )
        objects.download(self._url(checkpoint), self.staging / checkpoint)
        # Every checkpoint already there counts against --keep-checkpoints, as in a local
        # run directory; only the one `latest` names was downloaded. One newer than it was
        # uploaded by a run that stopped before its `latest` named it (killed, or a stale
        # writer's upload landing late): when this run reaches that step, its own replaces it.
        self.uploaded = {n.split("/", 1)[1] for n in names if _is_run_file(n) and n.endswith(".pt")}
        self._same_on_url = {name}
        for other in names:  # the metrics and event files the run appends to
            if _is_mirrored(other) and not other.startswith(f"{CHECKPOINTS_DIR}/"):
                objects.download(self._url(other), self.staging / other)

    def delete(self, names: list[str]) -> None:
        for name in names:
            self._may_write()
            objects.delete(self._url(name))
            if name == f"{CHECKPOINTS_DIR}/{LATEST_FILE}":
                self._latest_version = self._latest_written = None

    def push(self) -> None:
        """Mirror staging to the URL: new checkpoints, then `latest`, then the logs; then
        rotate: the URL keeps the checkpoints staging holds and, like a local run directory,
        the newest of the others up to --keep-checkpoints in all."""
        directory = self.staging / CHECKPOINTS_DIR
        local = {p.name for p in directory.glob(CHECKPOINT_GLOB)} if directory.is_dir() else set()
        for name in sorted(local - self._same_on_url):
            self._may_write()
            objects.upload(directory / name, self._url(f"{CHECKPOINTS_DIR}/{name}"))
            self.uploaded.add(name)
            self._same_on_url.add(name)
        if (directory / LATEST_FILE).is_file():
            self._may_write()
            self._put_latest((directory / LATEST_FILE).read_bytes())
        for path in sorted(self.staging.iterdir()):
            if path.is_file() and _is_mirrored(path.name):  # metrics.jsonl, event files
                self._may_write()
                objects.upload(path, self._url(path.name))
        others = sorted(self.uploaded - local)
        for name in others[: max(0, len(others) - max(self.keep - len(local), 0))]:
            self._may_write()
            objects.delete(self._url(f"{CHECKPOINTS_DIR}/{name}"))
            self.uploaded.discard(name)
            self._same_on_url.discard(name)
        self._push_compile_cache()

    def _put_latest(self, data: bytes) -> None:
        """Write `latest` only over the version this run last wrote or read (created only
        if absent where it had none); RunLockLost if another trainer wrote it since."""
        url = self._url(f"{CHECKPOINTS_DIR}/{LATEST_FILE}")
        if data == self._latest_written and self._latest_version is not None:
            return  # the end of a run mirrors once more: `latest` as this run wrote it
        if self._latest_version is None:
            version = objects.create(url, data)
        else:
            version = objects.replace(url, data, self._latest_version)
        if version is None:  # a retry of a write whose answer was lost finds its own write
            with contextlib.suppress(FileNotFoundError):
                found = objects.get_versioned(url, LATEST_MAX_BYTES)
                version = found.version if found.data == data else None
        if version is None:
            raise RunLockLost(
                f"{storage.redact(url)}: another trainer wrote it after this run last wrote or "
                "read it, and this run's write would have replaced what that one points to; "
                "this run stopped before writing anything more. Two trainers may be writing "
                "this run directory: rerun with --resume once only one runs"
            )
        self._latest_version, self._latest_written = version, data

    @property
    def compile_cache_mirror(self) -> tuple[str, Callable[[Path], None]]:
        """CompileCache.open's `mirror`: where the URL keeps the compile cache, as the log
        shows it, and what fills a cache folder from there."""
        return storage.redact(self._url(COMPILE_CACHE_ARCHIVE)), self.fetch_compile_cache

    def fetch_compile_cache(self, directory: Path) -> None:
        """Unpack the URL's compile-cache archive into `directory` (none there: it stays as
        it is), and mirror `directory` from now on."""
        self.compile_cache = directory
        url = self._url(COMPILE_CACHE_ARCHIVE)
        with tempfile.TemporaryDirectory(dir=self.staging) as scratch:
            archive, unpacked = Path(scratch, COMPILE_CACHE_ARCHIVE), Path(scratch, "unpacked")
            try:
                objects.download(url, archive)
            except FileNotFoundError:
                return
            try:
                with tarfile.open(archive) as tar:
                    tar.extractall(unpacked, filter="data")  # nothing outside, no devices
            except tarfile.TarError as error:
                _LOG.warning(
                    "%s: not a compile cache this trainer can unpack (%s): the run compiles "
                    "from scratch and replaces it",
                    storage.redact(url),
                    error,
                )
                return
            shutil.copytree(unpacked, directory, dirs_exist_ok=True)
        self._cache_files = _cache_files(directory)

    def _push_compile_cache(self) -> None:
        """Upload the compile cache as one archive if its files changed since it was
        unpacked or last uploaded (the first steps compile, the first evaluation too)."""
        if self.compile_cache is None:
            return
        files = _cache_files(self.compile_cache)
        if files == self._cache_files:
            return
        with tempfile.TemporaryDirectory(dir=self.staging) as scratch:
            archive = Path(scratch, COMPILE_CACHE_ARCHIVE)
            with tarfile.open(archive, "w") as tar:
                for name, _, _ in files:
                    # Inductor renames its temporaries into place: one may be gone already.
                    with contextlib.suppress(FileNotFoundError):
                        tar.add(self.compile_cache / name, arcname=name, recursive=False)
            self._may_write()
            objects.upload(archive, self._url(COMPILE_CACHE_ARCHIVE))
        self._cache_files = files

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def fetch_checkpoint(url: str) -> tuple[Path, Path, str]:
    """A checkpoint file or directory on s3:// or gs:// (--init-checkpoint, export-hf's
    --checkpoint), or a run directory (its checkpoint directory), downloaded: (the local
    checkpoint file, the folder to remove after, the URL of the directory it was in)."""
    folder = Path(tempfile.mkdtemp(prefix="bertkit-checkpoint-"))
    url = url.rstrip("/")
    try:
        if url.endswith(".pt"):
            target = folder / url.rsplit("/", 1)[1]
            objects.download(url, target)
            return target, folder, storage.parent(url)
        try:
            objects.download(f"{url}/{LATEST_FILE}", folder / LATEST_FILE)
        except FileNotFoundError as missing:
            try:  # a run directory: its checkpoints' `latest`
                objects.download(f"{url}/{CHECKPOINTS_DIR}/{LATEST_FILE}", folder / LATEST_FILE)
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"{missing}; nor is there {CHECKPOINTS_DIR}/{LATEST_FILE} under it, as in a "
                    "run directory: pass a checkpoint file (…/step-NNNNNNNN.pt), a checkpoint "
                    "directory or a run directory"
                ) from missing
            url = f"{url}/{CHECKPOINTS_DIR}"
        name = _latest_name(folder / LATEST_FILE, f"{url}/{LATEST_FILE}")
        objects.download(f"{url}/{name}", folder / name)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder / name, folder, url
