"""A child Python process with signal dispositions or limits of its own, without
`preexec_fn`.

`preexec_fn` runs Python in the forked child before it execs, a fork of a test process
whose threads (gRPC's, once any Beam test has run) may hold locks, and which makes
subprocess fork rather than vfork, so gRPC's fork handlers run: seen to abort the child
(`Epoll1Poller … epoll_wait error: Bad file descriptor`, exit -6). Instead the child is a
small Python program that sets them and then execs the real command: a signal's default or
ignored disposition, and a resource limit, stay across exec.
"""

from __future__ import annotations

import json
import sys

_LAUNCHER = """
import json, os, resource, signal, sys
settings = json.loads(sys.argv[1])
if settings["sigint_default"]:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
if settings["file_size_limit"] is not None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = settings["file_size_limit"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def python_command(
    *args: str, sigint_default: bool = False, file_size_limit: int | None = None
) -> list[str]:
    """`python ARGS` as a command line for subprocess, run with:

    - `sigint_default`: SIGINT's default disposition, as a terminal's foreground job has it
      (a command started in the background, `cmd &` in a script, inherits SIGINT ignored,
      and Python then keeps ignoring Ctrl-C): the test does not depend on how pytest was
      started;
    - `file_size_limit`: RLIMIT_FSIZE at that many bytes with SIGXFSZ ignored, so a write
      past it fails with EFBIG, as one to a full disk fails with ENOSPC.
    """
    settings = {"sigint_default": sigint_default, "file_size_limit": file_size_limit}
    return [sys.executable, "-c", _LAUNCHER, json.dumps(settings), *args]
