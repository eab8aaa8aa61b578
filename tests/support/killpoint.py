"""Run a bertkit command and SIGKILL it at an exact point: right before its N-th rename.

    python -m tests.support.killpoint 3 -- examples --documents … --output …   # = bertkit examples …
    python -m tests.support.killpoint 0 -- vocab …     # no kill: prints the number of renames at exit

Everything bertkit publishes is written under a temporary name, then renamed: a stage's
documents, shards, vocabulary files and manifests through Beam's `FileSystems.rename`
(pipelines/beam/files.py), the trainer's checkpoints and `latest` through `os.replace`
(trainer/run/checkpoints.py). A kill just before the N-th rename leaves exactly what a crash
between writing a file and publishing it leaves (the temporary file complete, the N-1
files before it published), which a kill after a random delay hits only by luck, since a
rename takes microseconds. The process kills itself with SIGKILL, so nothing of bertkit's
runs after that point: no `finally`, no atexit. This wraps the two rename functions (Beam's
not for `train`, which never imports Beam) and nothing of bertkit's. In-process runners
only: Beam's multi_processing workers do their own renames. Used by bench.faults and
tests/test_faults.py; `0` counts the renames ("renames: N" on stderr at exit) so a campaign
can try every point.
"""

from __future__ import annotations

import atexit
import os
import runpy
import signal
import sys


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit("usage: python -m tests.support.killpoint N -- BERTKIT_COMMAND [flags]")
    kill_at = int(sys.argv[1])
    renames = 0

    def before_rename() -> None:
        nonlocal renames
        renames += 1
        if renames == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    os_replace = os.replace

    def replace(*args, **kwargs):
        before_rename()
        return os_replace(*args, **kwargs)

    os.replace = replace
    # The trainer never imports Beam (a second of CPU): only the stages rename through it.
    if sys.argv[3:4] != ["train"]:
        from apache_beam.io.filesystems import FileSystems

        beam_rename = FileSystems.rename

        def rename(*args, **kwargs):
            before_rename()
            return beam_rename(*args, **kwargs)

        FileSystems.rename = staticmethod(rename)  # type: ignore[method-assign]
    if kill_at == 0:
        atexit.register(lambda: print(f"renames: {renames}", file=sys.stderr))
    sys.argv = ["bertkit", *sys.argv[3:]]
    runpy.run_module("bertkit.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
