"""A local run's worker processes (`--direct_num_workers N --direct_running_mode
multi_processing`): started with bertkit's worker command, their log shown as the stage's.

Beam's FnApiRunner starts each worker as `python -m apache_beam.runners.worker.sdk_worker_main`
and logs what the workers log through its `local_job_service` logger, one record per worker
record, as Beam's LogEntry in protobuf text ("Worker: severity: WARN timestamp { seconds: …
} message: "…" log_location: …"). Here:

- the workers run `python -m pipelines.beam.worker`, which imports Beam as a stage does
  (no stderr handler of its own, so no INFO line of the harness on the terminal);
- a worker's warning or error reads as the same record in a one-process run would
  ("WARNING pipelines.beam.documents: rejected …"), its traceback included; its INFO lines,
  and the notice every worker logs about a semi-persistent directory bertkit does not use,
  are dropped.
"""

from __future__ import annotations

import copy
import logging
import shlex
import sys
from pathlib import Path

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.transforms.environments import SubprocessSDKEnvironment
from google.protobuf import text_format

# The logger through which the FnApiRunner's driver logs what its workers log.
WORKER_LOGS = "apache_beam.runners.portability.local_job_service"
WORKER_COMMAND = "-m pipelines.beam.worker"
# What every worker logs as a warning with nothing for a user to do: bertkit registers no
# schema or logical type that would need the directory.
_WORKER_NOTICES = ("No semi_persistent_directory found",)
_PREFIX = "Worker: "
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class WorkerProcessesRunner(fn_runner.FnApiRunner):
    """Beam's FnApiRunner with bertkit's worker command.

    The FnApiRunner puts its own worker command in place of any environment it was given
    when the options say multi_processing; so it runs with a copy of the options that
    leaves the mode out, and this runner's environment starts the same worker processes
    (as many as --direct_num_workers) through `python -m pipelines.beam.worker`."""

    def __init__(self) -> None:
        # Beam starts the command through `sh -c`; `exec` makes the worker the driver's own
        # child rather than the shell's, so that a stopped stage's SIGTERM reaches it
        # (pipelines/command/interruption.py).
        command = f"exec {shlex.quote(sys.executable)} {WORKER_COMMAND}"
        super().__init__(default_environment=SubprocessSDKEnvironment(command))

    def run_pipeline(self, pipeline, options: PipelineOptions):
        ours = copy.deepcopy(options)
        ours.view_as(DirectOptions).direct_running_mode = None
        logger = logging.getLogger(WORKER_LOGS)
        if worker_record not in logger.filters:
            logger.addFilter(worker_record)
        return super().run_pipeline(pipeline, ours)


def worker_record(record: logging.LogRecord) -> bool:
    """A filter for WORKER_LOGS: the record a worker made, from the driver's record of it
    (its message, traceback included, under the name of the module that logged it); False
    for one below WARNING or one of `_WORKER_NOTICES`."""
    if record.levelno < logging.WARNING:
        return False
    text = record.getMessage()
    if not text.startswith(_PREFIX):
        return True
    entry = beam_fn_api_pb2.LogEntry()
    try:
        text_format.Parse(text[len(_PREFIX) :], entry)
    except text_format.ParseError:
        return True  # not a LogEntry after all: shown as Beam wrote it
    if entry.message.startswith(_WORKER_NOTICES):
        return False
    record.msg = entry.message + (f"\n{entry.trace.rstrip()}" if entry.trace else "")
    record.args = ()
    record.name = module_of(entry.log_location) or record.name
    return True


def module_of(location: str) -> str | None:
    """The module a LogEntry's `path/to/module.py:LINE` names: `pipelines.beam.documents`
    for one of bertkit's files, `apache_beam.…` for an installed package's; None otherwise."""
    path = Path(location.rpartition(":")[0] or location).with_suffix("")
    if path.is_relative_to(_PROJECT_ROOT):
        return ".".join(path.relative_to(_PROJECT_ROOT).parts)
    parts = path.parts
    if "site-packages" in parts[:-1]:
        index = len(parts) - 1 - parts[::-1].index("site-packages")
        return ".".join(parts[index + 1 :])
    return None
