"""Choosing and preparing the Beam runner for a bertkit stage, and its command line.

- Flags: a stage's own flags come from its config dataclass (`pipelines.command.flags`);
  `parse_stage` hands every other flag to Beam's PipelineOptions and refuses typos, then
  checks the flags that name paths (`StagePaths`, pipelines/beam/stage_paths.py) before any
  work, one line and exit 2 for each problem, as argparse does for a bad flag.
- Writing fails mid-run (a full disk, a quota, a file system remounted read-only): the
  error, which Beam wraps in its own (a RuntimeError naming the step, or only its text when
  a worker process raised it), is found and said in one line naming --output and the OS's
  words ("No space left on device"), exit 1 as for an input not read to its end; Beam's
  logged traceback of it is held back (`stage_main`).

- Local (the default, `--runner DirectRunner` or none): Beam's FnApiRunner, in process, or
  with `--direct_num_workers N --direct_running_mode multi_processing` in N worker
  processes. Beam's own DirectRunner first tries the Prism runner, which downloads a Go
  binary at run time: impossible offline and slow to start, so bertkit never goes that way.
  A stage spreads its units of work over the workers with a Reshuffle
  (`spread_over_workers`); a local run on one worker, the default, has nobody to spread
  them to, and the step is left out there: the FnApiRunner would run it as a shuffle of its
  own, one more stage and its bundles (docs/benchmarks.md, Extraction).
- `--runner DataflowRunner`: the project must reach the workers. Unless the user passes
  `--setup_file`, `--extra_package(s)` or `--sdk_container_image`, bertkit builds its own
  wheel and ships it with `--extra_package` (pipelines/beam/shipping.py); the workers
  pip-install it with its dependencies (apache-beam, pyarrow, blingfire, indexed-bzip2, …),
  never torch. Every input and output must then be in the cloud: a local path is refused.
- Any runner whose workers run outside this process (the portable runner's external pool,
  started in a directory of its own): relative local paths are made absolute where typed.
- A launch that does not wait (`--template_location` writes a job template,
  `--no_wait_until_finish` leaves the job running, as a Flex Template launcher does) returns
  once the job is submitted, with its id and where the manifest will appear
  (`submitted_only`, `report_submission`); a stage writes its manifest inside the job.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
)

from pipelines.beam import files, remote_job, shipping
from pipelines.beam.beam_options import beam_options_problem, dataflow_problem, is_local
from pipelines.beam.inputs import InputsError
from pipelines.beam.s3_clients import StoreUnreachable
from pipelines.beam.stage_paths import StagePaths, path_problem, placed_for_workers
from pipelines.command import flags
from pipelines.command.interruption import StageStop, exit_code
from pipelines.io import clients, storage

Config = TypeVar("Config")

_LOG = logging.getLogger(__name__)
# Errors that only a write gives, whoever hits them: the output's disk is full or read-only.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
# How an OSError reads once a worker process's failure reaches the driver as text.
_OS_ERROR_TEXT = re.compile(r"\b[A-Za-z]*Error: \[Errno (\d+)\]")
# The output flag and path of the stage this process runs (one per process), set by
# parse_stage: a write failure found in a worker's error is reported against them.
_stage_output: tuple[str, str] | None = None
# The record the stage writes last (below its output), and when its flags were parsed: a
# record newer than that is this run's, so the output is complete (`interrupted_message`).
_stage_record: tuple[str, float] | None = None
# Whether that stage runs on this machine (set by parse_stage): a remote runner's job may
# outlive a signal to the command that launched it.
_stage_local = True


def parse_stage(
    config_class: type[Config],
    argv: Sequence[str] | None,
    prog: str,
    description: str | None,
    paths: StagePaths | None = None,
) -> tuple[Config, PipelineOptions]:
    """A Beam stage's command line: its config's flags (`pipelines.command.flags`), then Beam's.

    Every flag the config does not define goes to Beam's PipelineOptions (runner, workers,
    filesystems); one that Beam does not know either is a typo, refused like argparse does.
    A value the flag does not take (nan, 0 megabytes: `flags.value_problem`) is refused next.
    The filesystem options apply to this process at once: the driver lists inputs and reads
    manifests before any worker starts. With `paths`, the flags naming paths are checked
    (`path_problem`); a problem ends the command with one line and exit 2, like a bad flag.
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
    config = flags.checked_config(config_class, known, parser)
    problem = beam_options_problem(options)
    if problem:
        flags.refuse(parser, problem)
    files.configure(options)
    problem = path_problem(config, paths) if paths is not None else None
    if problem:
        flags.refuse(parser, problem)
    if paths is not None and not is_local(options):
        runner = str(options.view_as(StandardOptions).runner)
        problem, config = placed_for_workers(config, paths, runner)
        if problem:
            flags.refuse(parser, problem)
    problem = dataflow_problem(options)
    if problem:
        flags.refuse(parser, problem)
    unreachable = _gcs_unreachable(sys.argv[1:] if argv is None else argv)
    if unreachable:
        raise StoreUnreachable(unreachable)
    if paths is not None:
        global _stage_output, _stage_local, _stage_record
        _stage_output = (flags.flag_name(paths.output), getattr(config, paths.output))
        _stage_local = is_local(options)
        _stage_record = (paths.record, time.time())
    return config, options


def _gcs_unreachable(argv: Sequence[str]) -> str | None:
    """Where a flag names a gs:// URL, whether the Cloud Storage endpoint takes a
    connection: Beam's client retries each request for two minutes, then gives a
    traceback (`clients.gcs_unreachable`)."""
    if not any("gs://" in value for value in argv):
        return None
    return clients.gcs_unreachable()


def write_failure(error: BaseException) -> OSError | None:
    """The OSError of a failed write (`WRITE_ERRNOS`) behind `error`, or None.

    Beam re-raises a DoFn's error as its own (same type with the step in its message, or a
    RuntimeError whose context is the original); from a worker process only the text comes
    back. So the chain of causes is searched first, then the text.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in WRITE_ERRNOS:
            return current
        current = current.__cause__ or current.__context__
    number = _write_errno_in(str(error))
    return None if number is None else OSError(number, os.strerror(number))


def _write_errno_in(text: str) -> int | None:
    """The first `WRITE_ERRNOS` number an error's text names ("OSError: [Errno 28] …")."""
    numbers = (int(match.group(1)) for match in _OS_ERROR_TEXT.finditer(text))
    return next((number for number in numbers if number in WRITE_ERRNOS), None)


def write_failure_message(failure: OSError, output: tuple[str, str] | None) -> str:
    """One line for a write that failed mid-run, naming the output the user gave."""
    flag, path = output if output is not None else ("--output", "(the output)")
    reason = os.strerror(failure.errno) if failure.errno else str(failure)
    fix = (
        f"choose an {flag} on a writable file system"
        if failure.errno == errno.EROFS
        else f"free space there or choose another {flag}"
    )
    return f"writing {flag} {path} failed ({reason}): {fix}, then rerun with --overwrite"


def one_local_worker(options: PipelineOptions) -> bool:
    """Whether the pipeline runs locally on one worker (no --direct_num_workers, or 1)."""
    return is_local(options) and options.view_as(DirectOptions).direct_num_workers in (None, 1)


def spread_over_workers(pcoll: beam.PCollection, label: str) -> beam.PCollection:
    """`pcoll | label >> beam.Reshuffle()`: units of work (small descriptors) spread over
    the workers, so that each may take some; left out where one local worker takes them all
    (the module docstring). The output is the same either way: a unit's output is fixed by
    the unit alone."""
    if one_local_worker(pcoll.pipeline.options):
        return pcoll
    return pcoll | label >> beam.Reshuffle()


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A Pipeline on the runner the options name, prepared as that runner needs, that leaves
    nothing in the system's temporary directory (`ScratchPipeline`)."""
    shipped = None
    if is_local(options):
        from apache_beam.runners.portability.fn_api_runner import fn_runner

        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode == "multi_processing":
            from pipelines.beam.worker_processes import WorkerProcessesRunner

            runner = WorkerProcessesRunner()
        else:
            runner = fn_runner.FnApiRunner()
        pipeline = ScratchPipeline(runner=runner, options=options)
    else:
        try:
            pipeline = ScratchPipeline(options=options)
        except ValueError as error:  # Beam's check of the options, for this runner
            if "validations errors" not in str(error):
                raise
            found = " ".join(line.strip() for line in str(error).splitlines()[1:] if line.strip())
            runner = options.view_as(StandardOptions).runner
            raise RunnerOptionsError(f"--runner {runner}: {found}") from None
        if "dataflow" in str(options.view_as(StandardOptions).runner).lower():
            # Once the options are accepted, so that a refusal leaves no wheel behind; the
            # pipeline holds its own copy of them.
            shipped = shipping.ensure_project_shipped(pipeline.options)
    if shipped is not None:
        pipeline.own(shipped)
    return pipeline


class RunnerOptionsError(Exception):
    """Beam's check of the options for their runner failed: one line, exit 2 (`stage_main`)."""


class ScratchPipeline(beam.Pipeline):
    """Beam's Pipeline, run in a scratch folder of its own that goes when the `with` block
    ends. Beam leaves folders behind in the system's temporary directory: its
    `beam-pipeline-temp*`, removed only at the end of `run()`, so not when a stage refuses
    its input while building the graph; and on Dataflow or the portable runner, a folder per
    launch holding `submission_environment_dependencies.txt` (its stager's, never removed).
    Inside the block, Python's `tempfile` makes everything in the scratch folder; the
    folders made before it (the `beam-pipeline-temp*` folder made with the pipeline, the
    wheel shipped to Dataflow's workers by `shipping.ensure_project_shipped`) are `own`ed: removed
    when the block ends, or with the pipeline object if it never runs."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._scratch: str | None = None
        self._tempdir_before: str | None = None
        self._owned: list[weakref.finalize] = []
        self.own(self.local_tempdir)

    def run(self, test_runner_api="AUTO"):
        """Beam's run; a job on a runner outside this process is noted as it is submitted,
        so that a stop signal can cancel it (pipelines/beam/remote_job.py)."""
        if is_local(self._options):
            return super().run(test_runner_api)
        remote_job.submitting(self._options)
        result = super().run(test_runner_api)
        remote_job.submitted(result)
        return result

    def own(self, folder: str) -> None:
        """Remove `folder` when the `with` block ends, or with this object if it never does."""
        self._owned.append(weakref.finalize(self, _remove, folder))

    def __enter__(self) -> ScratchPipeline:
        self._tempdir_before = tempfile.tempdir
        self._scratch = tempfile.mkdtemp(prefix="bertkit-beam-")
        tempfile.tempdir = self._scratch
        try:
            return super().__enter__()
        except BaseException:
            self._leave_scratch()
            raise

    def __exit__(self, *exc_info) -> None:
        try:
            super().__exit__(*exc_info)
        finally:
            self._leave_scratch()

    def _leave_scratch(self) -> None:
        tempfile.tempdir = self._tempdir_before
        if self._scratch is not None:
            _remove(self._scratch)
            self._scratch = None
        for removal in self._owned:
            removal()  # a finalizer runs once: never again when the object goes


def _remove(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def submitted_only(options: PipelineOptions) -> bool:
    """Whether running the pipeline ends at submission: a job template written
    (`--template_location`), or a job left running (`--no_wait_until_finish`). A local run
    has always finished when `run()` returns."""
    return not is_local(options) and bool(
        options.view_as(GoogleCloudOptions).template_location
        or options.view_as(StandardOptions).no_wait_until_finish
    )


def report_submission(
    pipeline: beam.Pipeline, options: PipelineOptions, manifest_url: str, prog: str
) -> int:
    """What a launch that does not wait tells its user: the template or the job, and where
    the manifest will appear (every stage writes it last, inside the job). Exit code 0."""
    cloud = options.view_as(GoogleCloudOptions)
    template = cloud.template_location
    if template:
        print(
            f"{prog}: job template written to {template}; the job is not running. "
            f"{_launch_advice(cloud)}; its manifest appears at {manifest_url} when it "
            "has finished"
        )
        return 0
    result = getattr(pipeline, "result", None)
    job_id = remote_job.job_id(result) if result is not None else None
    runner = options.view_as(StandardOptions).runner
    print(
        f"{prog}: job {job_id or '(no id)'} submitted to {runner}; it runs on without this "
        f"command. Its manifest appears at {manifest_url} when it has finished"
    )
    return 0


def _launch_advice(cloud: GoogleCloudOptions) -> str:
    """How to launch a written template: `gcloud dataflow jobs run` reads it from gs:// only,
    so a template written to a local path is copied there first (beside the job's staged
    files, which it names by their gs:// URLs)."""
    template = cloud.template_location
    region = f" --region {cloud.region}" if cloud.region else ""
    if template.startswith("gs://"):
        return f"Launch it (gcloud dataflow jobs run NAME --gcs-location {template}{region})"
    staging = next(
        (
            url
            for url in (cloud.staging_location, cloud.temp_location)
            if url and url.startswith("gs://")
        ),
        "gs://BUCKET/",
    )
    bucket = staging[len("gs://") :].split("/", 1)[0]
    url = f"gs://{bucket}/templates/{os.path.basename(template)}"
    return (
        f"To launch it, copy it to Cloud Storage, which is the only place gcloud reads a "
        f"template from (gcloud storage cp {template} {url}), then run gcloud dataflow jobs "
        f"run NAME --gcs-location {url}{region}"
    )


def stage_main(
    run: Callable[[list[str] | None], int],
    argv: list[str] | None = None,
    prog: str = "bertkit",
    refusals: tuple[type[Exception], ...] = (),
) -> None:
    """Entry point shared by the Beam stages: logging set up, exit code from `run`; an output
    directory it may not write into, an input that matches nothing, or one of the stage's own
    `refusals` of its inputs is a message (exit 2); a write that failed mid-run for a full or
    read-only disk is a message too (exit 1). Either is said in one line, without the
    traceback Beam logs for a step that raised it. Ctrl-C or SIGTERM stops the stage with
    one line too, exit 130 or 143 (pipelines/command/interruption.py)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    handlers = logging.getLogger().handlers
    stop = StageStop()
    said = _hold_back(refusals, stop)
    formatters = [handler.formatter for handler in handlers]
    for handler in handlers:
        handler.addFilter(said)
        handler.setFormatter(_Redacting(handler.formatter))  # Beam's retry lines name URLs
    try:
        with stop:
            try:
                code = _run_and_say(run, argv, prog, refusals)
            except BaseException as error:  # the KeyboardInterrupt, or Beam's wrapping of it
                if stop.signal is None and not isinstance(error, Exception):
                    raise
                if stop.signal is None:  # an error no line was made for: its traceback,
                    print(storage.redact(traceback.format_exc()), end="", file=sys.stderr)
                    sys.exit(1)  # the paths in it named without their credentials
                stop.ending = True
                print(f"{prog}: {interrupted_message(stop.name)}", file=sys.stderr)
                code = exit_code(stop.signal)
    finally:
        for handler, formatter in zip(handlers, formatters, strict=True):
            handler.removeFilter(said)
            handler.setFormatter(formatter)
    sys.exit(code)


class _Redacting(logging.Formatter):
    """A handler's own formatting, with every URL's credentials replaced by *** (Beam logs
    the paths it retries, tracebacks included, as it was given them)."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self._inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return storage.redact(self._inner.format(record))


def _run_and_say(
    run: Callable[[list[str] | None], int],
    argv: list[str] | None,
    prog: str,
    refusals: tuple[type[Exception], ...],
) -> int:
    """`run`'s exit code, or the one line and exit code of a refusal or a failed write (its
    URLs without their credentials); any other error goes on up."""
    try:
        return run(argv)
    except (
        files.OutputDirectoryError,
        FileNotFoundError,
        InputsError,
        shipping.ShippingError,
        RunnerOptionsError,
        *refusals,
    ) as error:
        print(f"{prog}: error: {storage.redact(str(error))}", file=sys.stderr)
        return 2
    except Exception as error:  # a failed write, or a worker's refusal; anything else goes on up
        failure, refused = write_failure(error), refusal_in_text(str(error), refusals)
        if failure is not None:
            message = write_failure_message(failure, _stage_output)
            print(f"{prog}: error: {storage.redact(message)}", file=sys.stderr)
            return 1
        if refused is not None:
            print(f"{prog}: error: {storage.redact(refused)}", file=sys.stderr)
            return 2
        died = _worker_died(error)
        if died is not None:  # the WorkerProcessesRunner's error
            message = f"{died}, which stopped the stage: {unfinished_output()}"
            print(f"{prog}: error: {storage.redact(message)}", file=sys.stderr)
            return 1
        unreachable = _found(error, StoreUnreachable)
        if unreachable is not None:
            print(f"{prog}: error: {storage.redact(str(unreachable))}", file=sys.stderr)
            return 1
        if _raised_in(error, _PRISM_RUNNER):
            print(
                f"{prog}: error: --runner PrismRunner: {storage.redact(str(error))}; pass "
                "--prism_location with a Prism binary on this machine, or leave --runner out "
                "for the local runner",
                file=sys.stderr,
            )
            return 1
        raise


def _worker_died(error: BaseException) -> BaseException | None:
    """The `WorkerDied` behind `error`: a local worker process ended mid-run."""
    if "pipelines.beam.worker_processes" not in sys.modules:
        return None  # no worker processes in this run
    from pipelines.beam.worker_processes import WorkerDied

    return _found(error, WorkerDied)


# Where Beam's PrismRunner finds its binary, and fails to (no network, a wrong URL).
_PRISM_RUNNER = "apache_beam/runners/portability/prism_runner.py"


def _raised_in(error: BaseException, module_file: str) -> bool:
    """Whether `error` was raised by code in `module_file` (the last frame of its traceback)."""
    trace = error.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    return trace is not None and trace.tb_frame.f_code.co_filename.endswith(module_file)


def _found(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """An error of `kind` in `error`'s chain, or in what a BeamIOError holds per path."""
    seen: set[int] = set()
    stack: list[object] = [error]
    while stack:
        each = stack.pop()
        if not isinstance(each, BaseException) or id(each) in seen:
            continue
        if isinstance(each, kind):
            return each
        seen.add(id(each))
        details = getattr(each, "exception_details", None)
        stack += [each.__cause__, each.__context__]
        stack += list(details.values()) if isinstance(details, dict) else []
    return None


def interrupted_message(signal_name: str) -> str:
    """What a stage stopped by a signal says: its output, if it got as far as having one,
    is incomplete and has no manifest, so the next stage refuses it. A local output the
    stage had not begun (its workers had written nothing yet) needs no --overwrite. A job
    on a remote runner is cancelled, and the line says what became of it
    (`remote_job.stopped`)."""
    if _stage_output is None:
        return f"interrupted ({signal_name}) before it wrote anything"
    flag, path = _stage_output
    if not _stage_local:  # its job is cancelled first, where it has one
        return remote_job.stopped(signal_name, _stage_output)
    if not storage.is_url(path) and not Path(path).exists():  # before its first write
        return f"interrupted ({signal_name}) before it wrote anything: {flag} {path} was not begun"
    if _stage_record is not None and not storage.is_url(path):
        name, started = _stage_record
        record = os.path.join(path, name)
        with contextlib.suppress(OSError):
            if os.stat(record).st_mtime >= started:
                return (
                    f"interrupted ({signal_name}) after it finished: {flag} {path} is complete "
                    f"({os.path.basename(record)} written); only its clean-up was cut short"
                )
    return f"interrupted ({signal_name}): {unfinished_output()}"


def unfinished_output() -> str:
    """What a local stage that stopped part-way left in its output."""
    if _stage_output is None:
        return "it wrote nothing"
    flag, path = _stage_output
    if not storage.is_url(path) and not Path(path).exists():
        return f"{flag} {path} was not begun"
    return (
        f"{flag} {path} is incomplete and has no manifest, so no stage reads it: rerun with "
        "--overwrite"
    )


def _hold_back_write_failures(record: logging.LogRecord) -> bool:
    """Beam logs a failed step's traceback before it raises (from this process, or a
    worker's as text): not for a failed write, which `stage_main` says in one line."""
    if record.levelno < logging.ERROR:
        return True
    if record.exc_info and record.exc_info[1] is not None:
        return write_failure(record.exc_info[1]) is None
    return _write_errno_in(record.getMessage()) is None


def refusal_in_text(text: str, refusals: tuple[type[Exception], ...]) -> str | None:
    """The message of one of `refusals` raised in a worker process, whose error reaches the
    driver as the text of its traceback (its last line, `pipelines.io.vocabulary.VocabError:
    MESSAGE`); None if the text holds none."""
    for refusal in refusals:
        name = re.escape(f"{refusal.__module__}.{refusal.__qualname__}: ")
        found = re.findall(rf"{name}(.+)", text)
        if found:
            return found[-1].strip()
    return None


def _hold_back(
    refusals: tuple[type[Exception], ...], stop: StageStop
) -> Callable[[logging.LogRecord], bool]:
    """`_hold_back_write_failures`, and Beam's traceback of a step that raised one of the
    stage's `refusals` (in this process, or a worker's as text), which `stage_main` says in
    one line too; and everything once a signal stopped the stage (Beam's traceback of the
    KeyboardInterrupt, its lost workers and connections)."""

    def hold_back(record: logging.LogRecord) -> bool:
        if stop.signal is not None:
            return False
        if record.levelno >= logging.ERROR:
            error = record.exc_info[1] if record.exc_info else None
            if isinstance(error, refusals):
                return False
            if error is None and refusal_in_text(record.getMessage(), refusals):
                return False
        return _hold_back_write_failures(record)

    return hold_back
