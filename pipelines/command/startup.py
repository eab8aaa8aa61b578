"""A command's start-up when it is the whole process: its modules imported once, with the
cyclic garbage collector paused, then frozen out of the collector's view.

Importing Beam makes about a million objects that live as long as the process; the
collector walked all of them at each full collection, several times while they were
imported and once more at exit (0.4 CPU-s of a stage's run on the sample, counted with
gc.callbacks). `import_command` is for a process's entry point only (`bertkit COMMAND`,
`python -m pipelines.STAGE`): a caller that runs a command inside its own process (the
tests) keeps its collector as it is. The collector still collects what the run makes.

For `python -m pipelines.STAGE` to get there, the package must not import Beam itself:
Python imports a package before its __main__. `lazy_exports` makes a package's names
import on first use (PEP 562), so importing the package costs nothing.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


def import_command(module: str) -> ModuleType:
    """Import a command's module (and Beam with it) for a process that runs only it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(module)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module `__getattr__`: each exported name from the submodule `exports`
    names, imported when first asked for; a submodule's own name gives the submodule, as
    it does once imported (`books.transforms`)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is not None:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
