"""torch.compile as the trainer runs it (`bertkit train --compile`): `--compile-mode`, and
inductor's caches in the run directory, `OUTPUT/compile-cache`.

    forward = compiled(model, "max-autotune", dynamic=None)  # marks each step for CUDA graphs
    cache = CompileCache.open(run_directory, main=True)       # before the first compilation

Inductor keeps what it compiled (the FX graph and AOT autograd caches, the C++ and Triton
kernels, max-autotune's choices) where TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR say, by
default /tmp/torchinductor_USER on each machine. A requeued job lands on another machine, or
on one whose /tmp was cleared, and compiles again (and, with --compile-mode max-autotune,
tunes again: minutes for BERT-base). Pointed at the run directory, the cache goes where the
run goes, and a --resume in the same directory loads what the first job compiled.

Inductor's cache keys hash the graph, the shapes, the settings and the versions of torch
and the compiler, so an entry is loaded only where it was made for: a later run in the
directory (after --overwrite too) shares the cache, and nothing deletes it.

Every rank of a torchrun job shares the one directory, as every rank of a node shares
inductor's default directory: inductor writes each entry to a temporary file named by its
process and thread and renames it into place, and compiles a C++ kernel under a file lock
in the cache's `locks/`, so ranks writing at once neither tear an entry nor compile one
twice; and a resume on another number of processes finds what the first job's ranks wrote
(one directory per rank would not).

A variable the user set is kept (a cluster's node-local cache, say). A run on object
storage caches in its staging directory, which the URL keeps as one archive (each rank
unpacks it before the first compilation, rank 0 uploads it at each mirror: run/remote.py),
so a requeued job on a fresh machine also loads what the first one compiled. One
small memo stays in /tmp whatever the variables say: whether padding a matmul pays
(inductor's pad_mm, timed on a GPU), which torch 2.13 keeps under its default directory only.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from trainer.run.checkpoints import COMPILE_CACHE_DIR

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")

# What inductor reads, and its Triton subdirectory (torch._inductor.utils.fresh_cache sets
# the two the same way).
INDUCTOR_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
TRITON_VARIABLE = "TRITON_CACHE_DIR"


def compiled(module: torch.nn.Module, mode: str | None, dynamic: bool | None) -> Callable[..., Any]:
    """`module` under torch.compile in `mode` (None: default). Under CUDA graphs each call
    first marks a new step (torch.compiler.cudagraph_mark_step_begin), as torch asks where
    it cannot tell steps apart itself (evaluation runs no backward): a replay may then reuse
    the memory of the last call's outputs, which the loop has read by then (a micro-batch's
    sums are taken before the next forward)."""
    mode = mode or "default"
    quiet_inductor_notes()
    step = torch.compile(module, dynamic=dynamic, mode=None if mode == "default" else mode)
    if mode not in CUDA_GRAPH_MODES:
        return step

    def marked(*args: Any, **kwargs: Any) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return step(*args, **kwargs)

    return marked


def quiet_inductor_notes() -> None:
    """Leaves out inductor's note, at a GPU's compilation of the MLM head's softmax over the
    vocabulary, that it split the reduction and so runs no online softmax: seven lines,
    twice a run, on a choice of torch's kernels that no flag of the run changes. Every
    other warning is shown as before."""
    warnings.filterwarnings("ignore", r"\s*Online softmax is disabled", UserWarning)


@dataclass
class CompileCache:
    """Where this run's compilations are cached, and what was there before it began."""

    path: Path
    files: int  # files the cache held when the run opened it (rank 0 counts; 0 elsewhere)
    chosen_by: str  # "run directory" or "TORCHINDUCTOR_CACHE_DIR"
    mirror: str | None = None  # where a run on object storage keeps it (the archive's URL)
    _previous: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def open(
        cls,
        run_path: Path,
        main: bool,
        mirror: tuple[str, Callable[[Path], None]] | None = None,
    ) -> CompileCache:
        """Point inductor at `run_path`/compile-cache before the first compilation; `close`
        puts the variables back. Only `main` counts the files. `mirror`: the URL that keeps
        the cache of a run on object storage, and what fills the folder from it first."""
        if _set_by_user(INDUCTOR_VARIABLE):
            path = Path(os.environ[INDUCTOR_VARIABLE])
            return cls(path, _count_files(path) if main else 0, INDUCTOR_VARIABLE)
        path = (run_path / COMPILE_CACHE_DIR).absolute()
        previous = {name: os.environ.get(name) for name in (INDUCTOR_VARIABLE, TRITON_VARIABLE)}
        path.mkdir(parents=True, exist_ok=True)
        if mirror is not None:
            mirror[1](path)
        files = _count_files(path) if main else 0
        os.environ[INDUCTOR_VARIABLE] = str(path)
        if not _set_by_user(TRITON_VARIABLE):
            os.environ[TRITON_VARIABLE] = str(path / "triton")
        _clear_inductor_memos()
        url = mirror[0] if mirror is not None else None
        return cls(path, files, "run directory", url, previous)

    @property
    def warm(self) -> bool:
        return self.files > 0

    def line(self) -> str:
        """The set-up log's line: where, and whether an earlier run's compilations are there."""
        if self.chosen_by != "run directory":
            where = f" (from {self.chosen_by})"
        elif self.mirror is not None:
            where = f", kept at {self.mirror}"
        else:
            where = ""
        if self.warm:
            state = (
                f"warm, {self.files:,} files: what an earlier run compiled (and tuned) for the "
                "same graphs loads from there"
            )
        else:
            state = "empty: the first steps compile into it, and a --resume here loads them"
        return f"compile cache {self.path}{where}: {state}"

    def close(self) -> None:
        """The variables as they were before `open` (a run inside a longer process, such as
        the tests, leaves no cache pointed at its directory)."""
        if not self._previous:
            return
        for name, value in self._previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._previous = {}
        _clear_inductor_memos()


def _set_by_user(name: str) -> bool:
    """Whether the variable names a directory of the user's: inductor itself sets both to
    its default place (/tmp/torchinductor_USER, its triton/ below) the first time it asks
    (importing the trainer does), which is no choice of anyone's."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    value = os.environ.get(name)
    if not value:
        return False
    default = os.path.abspath(default_cache_dir())
    return os.path.abspath(value) != default and not value.startswith(default + os.sep)


def _count_files(path: Path) -> int:
    """Cache entries under `path`; the lock files inductor leaves say nothing was compiled."""
    if not path.is_dir():
        return 0
    return sum(1 for p in path.rglob("*") if p.is_file() and p.parent.name != "locks")


def _clear_inductor_memos() -> None:
    """Forget the one cache path inductor memoises (its local autotuning cache, below the
    directory), so that a run after another in one process (the tests) looks in its own.
    Not torch._inductor.utils.clear_caches, which would also delete inductor's on-disk
    memo directories under /tmp that other processes may be using."""
    from torch._inductor.codecache import CacheBase

    forget = getattr(CacheBase.get_local_cache_path, "cache_clear", None)
    if forget is not None:
        forget()
