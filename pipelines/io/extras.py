"""bertkit's optional installs (the extras in pyproject.toml), and the one line that names the
install command when a command needs one that is missing.

The core install (`pip install -c constraints.txt -e .`) runs every Beam stage on local
files; the rest comes with an extra:

    train   torch, webdataset, safetensors, tensorboard: `bertkit train`, `export-hf`
    aws     boto3 (Beam's and smart_open's S3 client): any s3:// path
    gcp     google-cloud-storage, Beam's Dataflow client: any gs:// path, --runner
            DataflowRunner
    gpu     torchao: `bertkit train --fp8` (installed beside a CUDA torch, without the
            constraints file, whose torch pin is the CPU build: docs/gpu.md)
    dev     all of the above and the test and benchmark tools: `python -m bench.NAME`

Each check is an import probe (`importlib.util.find_spec`: the module is found, not
imported), made where the command has parsed its flags and before it does any work, so a
missing extra is one line and exit 2, never a traceback from deep inside a read:

    bertkit corpus: error: --input s3://bucket/in.jsonl needs the aws extra (boto3 is not
    installed): pip install -c constraints.txt -e '.[aws]' in the bertkit checkout
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

from pipelines.io.storage import redact

# The modules whose presence proves an extra is installed: what bertkit imports from it.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    # torch for training, safetensors for export-hf (tensorboard is imported only when a run
    # writes event files, and says so itself).
    "train": ("torch", "safetensors"),
    "aws": ("boto3",),
    "gcp": ("google.cloud.storage",),
    # Beam's Dataflow runner imports its API client (apache_beam[gcp]) when it submits.
    "dataflow": ("google.cloud.storage", "google.cloud.dataflow"),
    "gpu": ("torchao",),
    "dev": ("torch", "webdataset", "boto3", "google.cloud.storage", "pytest", "moto"),
}
# What pip calls a module's distribution, for the message (the rest are named alike).
_DISTRIBUTIONS = {
    "google.cloud.storage": "google-cloud-storage",
    "google.cloud.dataflow": "google-cloud-dataflow-client",
}
# The extra that installs each of those groups ("dataflow" is part of the gcp extra).
_INSTALLED_BY = {"dataflow": "gcp"}
# Extras installed without constraints.txt: beside the user's CUDA torch, which its CPU
# torch pin would replace.
_UNPINNED = {"gpu"}
# Object storage: which extra a URL's scheme needs (http(s):// is smart_open, in the core).
SCHEME_EXTRAS = {"s3": "aws", "gs": "gcp"}
# Where an editable install's sources are: pipelines/io/extras.py → the checkout. A wheel's
# copy lies in site-packages, with no pyproject.toml (nor constraints.txt) above it.
_CHECKOUT = Path(__file__).resolve().parents[2]


def from_checkout() -> bool:
    """Whether bertkit runs from its source checkout (the README's editable install)."""
    return (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "constraints.txt").is_file()


def installed(module: str) -> bool:
    """Whether `module` can be imported here (found on the path; nothing is imported but its
    parent packages: `google` for `google.cloud.storage`)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing: `google` for google.cloud.*
        return False


def missing(extra: str) -> tuple[str, ...]:
    """The modules of `extra` (a key of EXTRA_MODULES) that are not installed."""
    return tuple(module for module in EXTRA_MODULES[extra] if not installed(module))


def install_command(extra: str) -> str:
    """The README's install, with `extra` (docs/gpu.md's, without the constraints, for the
    gpu extra), to run in the checkout; from a wheel, the install again with the extra."""
    name = _INSTALLED_BY.get(extra, extra)
    if not from_checkout():
        return f"pip install 'WHEEL[{name}]', WHEEL the bertkit wheel you installed"
    if name in _UNPINNED:
        return f"pip install -e '.[{name}]' in the bertkit checkout"
    return f"pip install -c constraints.txt -e '.[{name}]' in the bertkit checkout"


def extra_problem(what: str, extra: str) -> str | None:
    """One line saying that `what` ("--input s3://b/x", "bertkit train") needs `extra` and
    how to install it; None when it is installed."""
    absent = missing(extra)
    if not absent:
        return None
    names = ", ".join(_DISTRIBUTIONS.get(module, module) for module in absent)
    verb = "is" if len(absent) == 1 else "are"
    return (
        f"{what} needs the {_INSTALLED_BY.get(extra, extra)} extra ({names} {verb} not "
        f"installed): {install_command(extra)}"
    )


def url_extra(value: str) -> str | None:
    """The extra a path or URL needs (s3:// → aws, gs:// → gcp); None for the core's."""
    scheme, separator, _ = value.partition("://")
    return SCHEME_EXTRAS.get(scheme.lower()) if separator else None


def urls_problem(values: Iterable[tuple[str, object]]) -> str | None:
    """The first of (flag, value) pairs whose value (a string, or a tuple of them) is a URL
    that needs a missing extra, as one line naming the flag (none for a positional
    argument: "") and the install command."""
    for flag, value in values:
        for item in value if isinstance(value, tuple | list) else (value,):
            if not isinstance(item, str):
                continue
            extra = url_extra(item)
            what = f"{flag} {redact(item)}" if flag else redact(item)
            problem = extra and extra_problem(what, extra)
            if problem:
                return problem
    return None
