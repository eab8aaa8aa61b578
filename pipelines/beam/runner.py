"""Choosing and preparing the Beam runner for a bertkit stage, and its command line.

- Flags: a stage's own flags come from its config dataclass (`pipelines.io.flags`);
  `parse_stage` hands every other flag to Beam's PipelineOptions and refuses typos.

- Local (the default, `--runner DirectRunner` or none): Beam's FnApiRunner, in process, or
  with `--direct_num_workers N --direct_running_mode multi_processing` in N worker
  processes. Beam's own DirectRunner first tries the Prism runner, which downloads a Go
  binary at run time: impossible offline and slow to start, so bertkit never goes that way.
- `--runner DataflowRunner`: the project must reach the workers. Unless the user passes
  `--setup_file`, `--extra_package(s)` or `--sdk_container_image`, bertkit builds its own
  wheel and ships it with `--extra_package`; the workers pip-install it with its
  dependencies (apache-beam, pyarrow, blingfire), never torch.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
)

from pipelines.beam import files
from pipelines.io import flags

Config = TypeVar("Config")

_LOG = logging.getLogger(__name__)
_LOCAL_RUNNERS = {None, "", "directrunner", "direct", "fnapirunner"}
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # pipelines/beam/runner.py → the checkout


def parse_stage(
    config_class: type[Config], argv: Sequence[str] | None, prog: str, description: str | None
) -> tuple[Config, PipelineOptions]:
    """A Beam stage's command line: its config's flags (`pipelines.io.flags`), then Beam's.

    Every flag the config does not define goes to Beam's PipelineOptions (runner, workers,
    filesystems); one that Beam does not know either is a typo, refused like argparse does.
    The filesystem options apply to this process at once: the driver lists inputs and reads
    manifests before any worker starts.
    """
    parser = flags.parser_for(config_class, prog, description)
    known, rest = parser.parse_known_args(argv)
    options = PipelineOptions(rest)
    beam_flags = options.get_all_options(retain_unknown_options=False)
    unknown = [
        f"--{name}"
        for name in options.get_all_options(retain_unknown_options=True)
        if name not in beam_flags
    ]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    files.configure(options)
    return flags.config_from(config_class, known), options


def is_local(options: PipelineOptions) -> bool:
    runner = options.view_as(StandardOptions).runner
    return runner is None or str(runner).lower() in _LOCAL_RUNNERS


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A Pipeline on the runner the options name, prepared as that runner needs."""
    if is_local(options):
        from apache_beam.runners.portability.fn_api_runner import fn_runner

        direct = options.view_as(DirectOptions)
        if (
            direct.direct_num_workers
            and direct.direct_num_workers > 1
            and (direct.direct_running_mode in (None, "in_memory"))
        ):
            raise ValueError(
                "--direct_num_workers > 1 needs --direct_running_mode multi_processing "
                "(or multi_threading); in_memory runs one worker"
            )
        return beam.Pipeline(runner=fn_runner.FnApiRunner(), options=options)
    runner = str(options.view_as(StandardOptions).runner).lower()
    if "dataflow" in runner:
        ensure_project_shipped(options)
    return beam.Pipeline(options=options)


def ensure_project_shipped(options: PipelineOptions) -> None:
    """Make sure Dataflow workers can import bertkit: ship a freshly built wheel."""
    setup = options.view_as(SetupOptions)
    if setup.setup_file or setup.extra_packages or _has_container_image(options):
        return
    wheel = build_wheel(Path(tempfile.mkdtemp(prefix="bertkit-wheel-")))
    _LOG.info("shipping %s to the Dataflow workers", wheel)
    setup.extra_packages = [str(wheel)]


def _has_container_image(options: PipelineOptions) -> bool:
    all_options = options.get_all_options()
    return bool(
        all_options.get("sdk_container_image") or all_options.get("worker_harness_container_image")
    )


def build_wheel(directory: Path) -> Path:
    """Build bertkit's wheel from the source tree this module was imported from."""
    if not (PROJECT_ROOT / "pyproject.toml").exists():
        raise FileNotFoundError(
            "bertkit is not running from its source tree, so it cannot build a wheel for the "
            "Dataflow workers: pass --extra_package path/to/bertkit-*.whl (or --setup_file)"
        )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "--wheel-dir", str(directory), str(PROJECT_ROOT)],
        check=True,
    )  # fmt: skip
    (wheel,) = directory.glob("bertkit-*.whl")
    return wheel


def stage_main(run: Callable[[list[str] | None], int], argv: list[str] | None = None) -> None:
    """Entry point shared by the Beam stages: logging set up, exit code from `run`; an output
    directory it may not write into, or an input that matches nothing, is a message (exit 2)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        code = run(argv)
    except (files.OutputDirectoryError, FileNotFoundError) as error:
        print(f"bertkit: error: {error}", file=sys.stderr)
        code = 2
    sys.exit(code)
