"""A signal that arrives at the same point of a process's start every run: the source of a
module (for `python -c`, or a sitecustomize.py that Python imports before `-m`'s module) that
restores Python's own SIGINT and SIGTERM handling, as in a terminal (a test runner's worker
may ignore SIGINT, and its children inherit that), and sends the process the signal named by
$SIGNAL_IN_THE_IMPORT when the import of `module` starts (tests/test_entry.py,
tests/test_train_start.py)."""

from __future__ import annotations

VARIABLE = "SIGNAL_IN_THE_IMPORT"


def signal_at_import(module: str, then: str = "") -> str:
    """The source; `then` runs after the finder is in place (e.g. the command's main)."""
    return f"""
import importlib.abc, os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
class Signal(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        sent = os.environ.get({VARIABLE!r})
        if name == {module!r} and sent:
            os.kill(os.getpid(), getattr(signal, sent))
            time.sleep(5)  # the handler runs in here
sys.meta_path.insert(0, Signal())
{then}
"""
