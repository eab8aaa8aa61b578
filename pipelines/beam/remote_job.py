"""A stage's job on a runner outside this process (Dataflow, a portable job service), and
what Ctrl-C or SIGTERM to the command that waits for it does to it.

The job is not this process: stopping the command leaves it running unless it is
cancelled. So a stopped stage cancels the job it submitted (through Beam's
`PipelineResult.cancel`, given `CANCEL_SECONDS` to answer) and says in its one line what
became of it, with the job's id and what to do next on that runner:

- Dataflow: cancelled; or, when the service did not answer, the command that cancels it
  (`gcloud dataflow jobs cancel ID --region R`);
- a portable job service: what the service reports after the request. Beam's own
  `local_job_service_main` marks the job CANCELLED and yet runs it to its end (its cancel is
  a TODO in Beam), manifest included: the line says to stop that service to stop the job;
- stopped before the runner had answered the submission: no id is known, so the line says
  how to find the job, if it was submitted.
"""

from __future__ import annotations

import threading
from typing import Any

from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    StandardOptions,
)

# How long a stopped stage waits for the runner to answer its cancel request.
CANCEL_SECONDS = 10.0

# The job of the stage this process runs (one at a time): its options from the moment it
# is submitted, its result (Beam's PipelineResult) once the runner has answered.
_options: PipelineOptions | None = None
_result: Any = None


def submitting(options: PipelineOptions) -> None:
    """Note that the pipeline with `options` is being submitted (`ScratchPipeline.run`)."""
    global _options, _result
    _options, _result = options, None


def submitted(result: Any) -> None:
    """Note the runner's answer: the job's PipelineResult."""
    global _result
    _result = result


def job_id(result: Any) -> str | None:
    """The job's id: Dataflow's result has job_id(); the portable runner's keeps the id it
    was given."""
    if hasattr(result, "job_id"):
        return result.job_id()
    return getattr(result, "_job_id", None)


def stopped(signal_name: str, output: tuple[str, str]) -> str:
    """The line of a remote stage stopped by `signal_name`, once its job (if it has one)
    was asked to cancel (the module docstring)."""
    flag, path = output
    options = _options or PipelineOptions([])
    dataflow = "dataflow" in str(options.view_as(StandardOptions).runner).lower()
    place = _dataflow_place(options) if dataflow else _service_place(options)
    may_run = f"writes its manifest in {flag} {path} only if it finishes"
    if _result is None:
        return (
            f"interrupted ({signal_name}) while submitting the job to {place}: if it was "
            f"submitted, it runs on and {may_run}; {_find_advice(options, dataflow)}"
        )
    number = job_id(_result) or "(no id)"
    state, problem = _cancel(_result)
    if problem is not None:
        advice = _cancel_advice(number, options, dataflow)
        return (
            f"interrupted ({signal_name}): job {number} may still be running on {place}, and "
            f"{may_run}; cancelling it failed ({problem}): {advice}"
        )
    if dataflow:
        return (
            f"interrupted ({signal_name}): job {number} cancelled on {place} (state {state}); "
            f"{flag} {path} gets no manifest, so no stage reads it: rerun with --overwrite"
        )
    return (
        f"interrupted ({signal_name}): asked {place} to cancel job {number}, which it reports "
        f"{state}; a runner that stops it leaves {flag} {path} without a manifest (rerun with "
        "--overwrite), but Beam's own local_job_service_main only marks the job so and runs it "
        "on to write its manifest: stop that service to stop the job"
    )


def _cancel(result: Any) -> tuple[str | None, str | None]:
    """(the job's state after `result.cancel()`, None), or (None, why it failed), within
    CANCEL_SECONDS; the request goes on in a daemon thread that the exit ends."""
    outcome: dict[str, str] = {}

    def cancel() -> None:
        try:
            result.cancel()
            outcome["state"] = _state_name(result.state)
        except Exception as error:  # noqa: BLE001 - any runner's refusal is said in the line
            outcome["problem"] = (str(error).strip().splitlines() or [type(error).__name__])[0]

    thread = threading.Thread(target=cancel, name="cancel_job", daemon=True)
    thread.start()
    thread.join(CANCEL_SECONDS)
    if thread.is_alive():
        return None, f"no answer within {CANCEL_SECONDS:g} s"
    return outcome.get("state"), outcome.get("problem")


def _state_name(state: object) -> str:
    """ "CANCELLED" of Beam's PipelineState.CANCELLED (a string) or a job API enum's name."""
    return str(state).rsplit(".", 1)[-1]


def _dataflow_place(options: PipelineOptions) -> str:
    region = options.view_as(GoogleCloudOptions).region
    return f"Dataflow (--region {region})" if region else "Dataflow"


def _service_place(options: PipelineOptions) -> str:
    endpoint = options.view_as(PortableOptions).job_endpoint
    runner = options.view_as(StandardOptions).runner
    return f"the job service {endpoint}" if endpoint else f"the job service of {runner}"


def _region_flag(options: PipelineOptions) -> str:
    region = options.view_as(GoogleCloudOptions).region
    return f" --region {region}" if region else ""


def _cancel_advice(number: str, options: PipelineOptions, dataflow: bool) -> str:
    if dataflow:
        return f"cancel it with gcloud dataflow jobs cancel {number}{_region_flag(options)}"
    return "cancel it at that job service, or stop the service to stop its jobs"


def _find_advice(options: PipelineOptions, dataflow: bool) -> str:
    if dataflow:
        region = _region_flag(options)
        return (
            f"find it with gcloud dataflow jobs list --status active{region}, and cancel it "
            f"with gcloud dataflow jobs cancel JOB_ID{region}"
        )
    return "cancel it at that job service, or stop the service to stop its jobs"
