"""The Beam flags a stage is given (runner, workers, Dataflow's project and buckets),
checked before any work: a value that cannot work is one line and exit 2 (`parse_stage` in
pipelines/beam/runner.py), not Beam's traceback once the pipeline is made, after
--overwrite has deleted the earlier output."""

from __future__ import annotations

from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
    WorkerOptions,
)

from pipelines.io import extras

_LOCAL_RUNNERS = {None, "", "directrunner", "direct", "fnapirunner"}


def is_local(options: PipelineOptions) -> bool:
    """Whether the options name the local runner (none, or DirectRunner: bertkit's FnApiRunner)."""
    runner = options.view_as(StandardOptions).runner
    return runner is None or str(runner).lower() in _LOCAL_RUNNERS


# Beam's flags that count workers, and what 0 means to each (Beam takes a negative count
# as it is: the local runner failed mid-run with an IndexError, Dataflow refuses the job).
_WORKER_COUNTS = {
    "direct_num_workers": "0: one per core",
    "num_workers": "0: Dataflow chooses",
    "max_num_workers": "0: Dataflow chooses",
}


def beam_options_problem(options: PipelineOptions) -> str | None:
    """A Beam flag that cannot work as given, as one line (exit 2 before any work): a
    negative number of workers (`_WORKER_COUNTS`); `--direct_num_workers N` with the
    one-worker running mode; a flag that needs an extra that is not installed (`--runner
    DataflowRunner` the gcp extra's Dataflow client, a URL in a Beam flag, `--temp_location
    gs://…`, the extra of its scheme). The stage's own flags were checked with its config
    (`flags.extras_problem`)."""
    given = options.get_all_options(drop_default=True, retain_unknown_options=False)
    runner = given.get("runner")
    for name, zero in _WORKER_COUNTS.items():
        if given.get(name) is not None and given[name] < 0:
            return f"--{name} {given[name]}: a number of workers is 0 or more ({zero})"
    workers = given.get("direct_num_workers")
    if (
        is_local(options)
        and workers
        and workers > 1
        and given.get("direct_running_mode")
        in (
            None,
            "in_memory",
        )
    ):
        return (
            f"--direct_num_workers {workers} needs --direct_running_mode multi_processing "
            "(or multi_threading): in_memory runs one worker"
        )
    if runner and "dataflow" in str(runner).lower():
        problem = extras.extra_problem(f"--runner {runner}", "dataflow")
        if problem:
            return problem
    return extras.urls_problem((f"--{name}", value) for name, value in sorted(given.items()))


def dataflow_problem(options: PipelineOptions) -> str | None:
    """A Dataflow launch that Beam would refuse only once the pipeline is made (after
    --overwrite, and the wheel built): a project or job name Dataflow does not take, more
    workers than --max_num_workers, a region beside a zone of another flag, a container
    image given two ways (Beam's own checks of them); or one with no --temp_location, where
    Beam makes a bucket of its own in the project (docs/operations.md asks for one). Checked
    once the paths are (a local --output is the first thing to fix); None for another runner."""
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator

    runner = str(options.view_as(StandardOptions).runner)
    if "dataflow" not in runner.lower():
        return None
    cloud, workers = options.view_as(GoogleCloudOptions), options.view_as(WorkerOptions)
    # Without a runner, the checks look nothing up (a default region would be).
    validator = PipelineOptionsValidator(options, None)
    errors = [
        *validator.validate_cloud_options(cloud),
        *validator.validate_num_workers(workers),
        *validator.validate_worker_region_zone(workers),
        *validator.validate_sdk_container_image_options(workers),
    ]
    errors = [error for error in errors if not error.startswith("Missing required option")]
    if errors:
        return f"--runner {runner}: {' '.join(error.strip() for error in errors)}"
    if not (cloud.temp_location or cloud.staging_location):
        return (
            f"--runner {runner} needs --temp_location gs://BUCKET/tmp, a bucket of yours for "
            "the job's temporary files (without it Beam creates a bucket in the project)"
        )
    return None
