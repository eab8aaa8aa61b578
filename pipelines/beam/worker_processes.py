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
  are dropped;
- the driver watches its workers: Beam's own thread of a worker process only raises when
  the process ends, and the driver then waits for ever on the bundle it gave that worker
  (its progress stays where it was). Here a worker that ends while the job runs (killed by
  the kernel for memory, a crash) ends the run at once: the bundles it held and any the
  driver waits on fail with `WorkerDied`, the other workers are sent SIGTERM, and the stage
  says so in one line, exit 1 (pipelines/beam/runner.py).
"""

from __future__ import annotations

import copy
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import grpc
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc, endpoints_pb2
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from apache_beam.transforms.environments import Environment, SubprocessSDKEnvironment
from apache_beam.utils import thread_pool_executor
from google.protobuf import json_format, text_format

from pipelines.command.interruption import end_children

# The logger through which the FnApiRunner's driver logs what its workers log.
WORKER_LOGS = "apache_beam.runners.portability.local_job_service"
WORKER_COMMAND = "-m pipelines.beam.worker"
# What every worker logs as a warning with nothing for a user to do: bertkit registers no
# schema or logical type that would need the directory.
_WORKER_NOTICES = ("No semi_persistent_directory found",)
_PREFIX = "Worker: "
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The environment of bertkit's worker processes: Beam's subprocess environment under a name
# of its own, so that its workers are started by `_WatchedWorkerHandler` and no other
# subprocess environment in this process changes.
_URN = "bertkit:env:watched_worker_process:v1"


# The first worker of the run to end unexpectedly (one run at a time in a process).
_first_death: WorkerDied | None = None
_died = threading.Event()  # set with it
_DEATH_LOCK = threading.Lock()


class WorkerDied(RuntimeError):
    """A worker process ended while the job ran: what the bundles waiting on it raise."""

    def __init__(self, pid: int, returncode: int) -> None:
        self.pid, self.returncode = pid, returncode
        super().__init__(f"worker process {pid} {ending(returncode)}")


def ending(returncode: int) -> str:
    """How a process ended, from its Popen return code (a signal's is its negative number)."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    # SIGKILL from nobody the user knows of is most often the kernel's out-of-memory killer.
    return f"was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")


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
        super().__init__(default_environment=_WatchedEnvironment(command))

    def run_pipeline(self, pipeline, options: PipelineOptions):
        """Beam's run, whose error is the `WorkerDied` of a worker that ended mid-run (what
        the driver saw first may be only its consequence: "Channel closed prematurely")."""
        global _first_death
        _first_death = None
        ours = copy.deepcopy(options)
        ours.view_as(DirectOptions).direct_running_mode = None
        logger = logging.getLogger(WORKER_LOGS)
        if worker_record not in logger.filters:
            logger.addFilter(worker_record)
        _died.clear()
        hook = threading.excepthook
        threading.excepthook = _QuietAfterDeath(hook)
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(_not_after_a_death)
        try:
            return super().run_pipeline(pipeline, ours)
        except Exception as error:
            if _first_death is not None:
                raise _first_death from error
            raise
        finally:
            _first_death = None
            _died.clear()
            for handler in handlers:
                handler.removeFilter(_not_after_a_death)
            if isinstance(threading.excepthook, _QuietAfterDeath):
                threading.excepthook = hook  # not where a stop signal replaced it


# How long a lost connection waits to learn that its worker ended: Beam's thread that
# reads from a worker may see the connection break before the worker's thread sees it end.
_DEATH_NEWS_SECONDS = 2.0


def _after_a_death(error: BaseException | None) -> bool:
    """Whether `error` (of a thread, or a logged record's) comes of a worker that ended
    mid-run: said once by the stage, so dropped from the log."""
    if _died.is_set():
        return True
    return isinstance(error, grpc.RpcError) and _died.wait(_DEATH_NEWS_SECONDS)


def _not_after_a_death(record: logging.LogRecord) -> bool:
    """A filter for the root logger's handlers while a run lasts (`_after_a_death`)."""
    if record.levelno < logging.ERROR:
        return True
    return not _after_a_death(record.exc_info[1] if record.exc_info else None)


class _QuietAfterDeath:
    """threading.excepthook while a run lasts: Beam's threads that read from a worker that
    ended lose their connection (grpc.RpcError), said nothing of (`_after_a_death`)."""

    def __init__(self, otherwise) -> None:
        self.otherwise = otherwise

    def __call__(self, args: threading.ExceptHookArgs) -> None:
        if not _after_a_death(args.exc_value):
            self.otherwise(args)


@Environment.register_urn(_URN, bytes)
class _WatchedEnvironment(SubprocessSDKEnvironment):
    """Beam's SubprocessSDKEnvironment, named `_URN`."""

    def to_runner_api_parameter(self, context) -> tuple[str, bytes]:
        return _URN, self.command_string.encode("utf-8")

    @staticmethod
    def from_runner_api_parameter(payload, capabilities, artifacts, resource_hints, context):
        return _WatchedEnvironment(payload.decode("utf-8"), capabilities, artifacts, resource_hints)


@worker_handlers.WorkerHandler.register_environment(_URN, bytes)
class _WatchedWorkerHandler(worker_handlers.SubprocessSdkWorkerHandler):
    """Beam's handler of one worker process, which notices the process ending before the
    driver closed it (the module docstring)."""

    def start_worker(self) -> None:
        self._closing = False
        self._dead = False
        self.worker = _WorkerProcess(
            self._worker_command_line,
            self.control_address,
            self.provision_info,
            self.worker_id,
            on_exit=self._exited,
        )
        self.worker_thread = threading.Thread(name="run_worker", target=self.worker.run)
        self.worker_thread.start()

    def close(self) -> None:
        self._closing = True  # the driver ends the worker: its exit is expected
        if not self._dead:
            super().close()
            return
        # Nothing to send a dead process: Beam's close would flush its data to it, and
        # raise the error the bundles were given (logged once more as its own).
        self.control_conn.close()
        self.stop_worker()

    def _exited(self, pid: int, returncode: int) -> None:
        global _first_death
        if self._closing:
            return
        self._dead = True
        with _DEATH_LOCK:  # the first to end is the cause; the others were ended for it
            if _first_death is None:
                _first_death = WorkerDied(pid, returncode)
                _died.set()
            died = _first_death
        # What the driver waits on for this worker: the answers to its instructions, and
        # the data of its bundles (checked every second while the driver waits for more).
        self.control_conn.abort(died)
        self.data_conn._exception = died
        end_children()  # the other workers: their bundles cannot make a complete output


class _WorkerProcess(local_job_service.SubprocessSdkWorker):
    """Beam's SubprocessSdkWorker.run, which tells `on_exit` the process's pid and return
    code when it ends, rather than raising in its thread."""

    def __init__(self, *args, on_exit) -> None:
        super().__init__(*args)
        self._on_exit = on_exit

    def run(self) -> None:
        logging_server = grpc.server(
            thread_pool_executor.shared_unbounded_instance(),
            options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)],
        )
        logging_port = logging_server.add_insecure_port("[::]:0")
        logging_server.start()
        beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(
            local_job_service.BeamFnLoggingServicer(), logging_server
        )
        descriptor = endpoints_pb2.ApiServiceDescriptor
        environment = dict(
            os.environ,
            CONTROL_API_SERVICE_DESCRIPTOR=text_format.MessageToString(
                descriptor(url=self._control_address)
            ),
            LOGGING_API_SERVICE_DESCRIPTOR=text_format.MessageToString(
                descriptor(url=f"localhost:{logging_port}")
            ),
            PIPELINE_OPTIONS=json_format.MessageToJson(
                self._provision_info.provision_info.pipeline_options
            ),
        )
        if self._worker_id:
            environment["WORKER_ID"] = self._worker_id
        with worker_handlers.SUBPROCESS_LOCK:
            process = subprocess.Popen(self._worker_command_line, shell=True, env=environment)
        try:
            process.wait()
            self._on_exit(process.pid, process.returncode)
        finally:
            if process.poll() is None:
                process.kill()
            logging_server.stop(0)


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
