"""Shipping bertkit to Dataflow's workers: unless the user ships the code (`--setup_file`,
`--extra_package`, a container image), a wheel built from this source tree goes to them with
`--extra_package`, and the workers pip-install it with its dependencies (never torch)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import tomllib
from importlib import metadata
from pathlib import Path

from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions
from packaging.requirements import Requirement

_LOG = logging.getLogger("pipelines.beam.runner")
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # pipelines/beam/shipping.py → the checkout


def ensure_project_shipped(options: PipelineOptions) -> str | None:
    """Make sure Dataflow workers can import bertkit: ship a freshly built wheel. The
    temporary folder it was built in, for the caller to remove once the job is staged; None
    where the user ships the code."""
    setup = options.view_as(SetupOptions)
    if setup.setup_file or setup.extra_packages or _has_container_image(options):
        return None
    folder = tempfile.mkdtemp(prefix="bertkit-wheel-")
    try:
        wheel = build_wheel(Path(folder))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _LOG.info("shipping %s to the Dataflow workers", wheel)
    setup.extra_packages = [str(wheel)]
    return folder


def _has_container_image(options: PipelineOptions) -> bool:
    all_options = options.get_all_options()
    return bool(
        all_options.get("sdk_container_image") or all_options.get("worker_harness_container_image")
    )


class ShippingError(Exception):
    """bertkit cannot build the wheel its Dataflow workers need, said before any work."""


def unmet_build_requirements(pyproject: Path) -> list[str]:
    """The build requirements ([build-system] requires) this environment does not meet. The
    wheel is built without pip's build isolation, so with this environment's own setuptools
    (nothing to download at launch); `python3.11 -m venv` brings setuptools 65, older than
    the string `license` of pyproject.toml needs, and the gcp extra adds a newer one."""
    requires = tomllib.loads(pyproject.read_text(encoding="utf-8"))["build-system"]["requires"]
    unmet = []
    for text in requires:
        requirement = Requirement(text)
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or not requirement.specifier.contains(installed, prereleases=True):
            unmet.append(f"{text} ({'not installed' if installed is None else installed})")
    return unmet


def build_wheel(directory: Path) -> Path:
    """Build bertkit's wheel from the source tree this module was imported from."""
    if not (PROJECT_ROOT / "pyproject.toml").exists():
        raise ShippingError(
            "bertkit is not running from its source tree, so it cannot build a wheel for the "
            "Dataflow workers: pass --extra_package path/to/bertkit-*.whl (or --setup_file)"
        )
    unmet = unmet_build_requirements(PROJECT_ROOT / "pyproject.toml")
    if unmet:
        quoted = " ".join(f"'{text.split(' (')[0]}'" for text in unmet)
        raise ShippingError(
            f"building bertkit's wheel for the Dataflow workers needs {', '.join(unmet)}: "
            f"pip install {quoted} (the gcp extra installs it), or pass --extra_package "
            "path/to/bertkit-*.whl"
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(directory),
            str(PROJECT_ROOT),
        ],
        check=True,
    )
    (wheel,) = directory.glob("bertkit-*.whl")
    return wheel
