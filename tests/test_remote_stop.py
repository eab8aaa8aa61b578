"""Ctrl-C or SIGTERM to a stage whose job runs on a remote runner cancels the job and
says what became of it, with its id and what to do on that runner
(pipelines/beam/remote_job.py): Dataflow's and a portable job service's answers, given by
stand-ins for Beam's PipelineResult; then a real portable job service (slow tier)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import remote_job
from tests.support.launch import python_command
from tests.support.portable import portable_engine
from tests.test_stage_signals import HANG, long_input

OUTPUT = ("--output", "gs://b/docs")
DATAFLOW = ["--runner", "DataflowRunner", "--region", "europe-west4"]
PORTABLE = ["--runner", "PortableRunner", "--job_endpoint", "localhost:8099"]
JOB = "2026-11-30_01_02_03-123"


class DataflowResult:
    """Beam's DataflowPipelineResult as a stop sees it: job_id(), cancel(), state."""

    def __init__(self, cancel=None) -> None:
        self.state = "RUNNING"
        self._cancel = cancel

    def job_id(self) -> str:
        return JOB

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel()
        self.state = "CANCELLED"


class PortableResult:
    """The portable runner's PipelineResult: the id it was given, cancel(), state."""

    _job_id = "job-1"
    state = "CANCELLED"

    def cancel(self) -> None:
        pass


def stopped(flags: list[str], result: object | None) -> str:
    remote_job.submitting(PipelineOptions(flags))
    if result is not None:
        remote_job.submitted(result)
    return remote_job.stopped("SIGINT", OUTPUT)


def test_a_dataflow_job_is_cancelled_and_named():
    assert stopped(DATAFLOW, DataflowResult()) == (
        f"interrupted (SIGINT): job {JOB} cancelled on Dataflow (--region europe-west4) "
        "(state CANCELLED); --output gs://b/docs gets no manifest, so no stage reads it: "
        "rerun with --overwrite"
    )


def refuse() -> None:
    raise RuntimeError("HttpForbiddenError: Permission denied\nmore detail")


def test_a_dataflow_job_that_could_not_be_cancelled_gets_its_gcloud_command():
    assert stopped(DATAFLOW, DataflowResult(refuse)) == (
        f"interrupted (SIGINT): job {JOB} may still be running on Dataflow (--region "
        "europe-west4), and writes its manifest in --output gs://b/docs only if it finishes; "
        "cancelling it failed (HttpForbiddenError: Permission denied): cancel it with gcloud "
        f"dataflow jobs cancel {JOB} --region europe-west4"
    )


def test_a_cancel_that_gets_no_answer_is_given_up_in_bounded_time(monkeypatch):
    monkeypatch.setattr(remote_job, "CANCEL_SECONDS", 0.2)
    release = threading.Event()
    began = time.monotonic()
    try:
        line = stopped(DATAFLOW, DataflowResult(lambda: release.wait(HANG)))
    finally:
        release.set()
    assert time.monotonic() - began < 5
    assert "cancelling it failed (no answer within 0.2 s): cancel it with gcloud" in line


def test_a_stop_before_dataflow_answered_says_how_to_find_the_job():
    assert stopped(DATAFLOW, None) == (
        "interrupted (SIGINT) while submitting the job to Dataflow (--region europe-west4): if "
        "it was submitted, it runs on and writes its manifest in --output gs://b/docs only if "
        "it finishes; find it with gcloud dataflow jobs list --status active --region "
        "europe-west4, and cancel it with gcloud dataflow jobs cancel JOB_ID --region "
        "europe-west4"
    )


def test_a_portable_job_is_cancelled_at_its_job_service():
    assert stopped(PORTABLE, PortableResult()) == (
        "interrupted (SIGINT): asked the job service localhost:8099 to cancel job job-1, which "
        "it reports CANCELLED; a runner that stops it leaves --output gs://b/docs without a "
        "manifest (rerun with --overwrite), but Beam's own local_job_service_main only marks "
        "the job so and runs it on to write its manifest: stop that service to stop the job"
    )


def test_a_portable_job_service_that_refuses_the_cancel():
    result = PortableResult()
    result.cancel = refuse
    assert stopped(PORTABLE, result) == (
        "interrupted (SIGINT): job job-1 may still be running on the job service "
        "localhost:8099, and writes its manifest in --output gs://b/docs only if it finishes; "
        "cancelling it failed (HttpForbiddenError: Permission denied): cancel it at that job "
        "service, or stop the service to stop its jobs"
    )


@pytest.mark.slow
def test_ctrl_c_cancels_the_job_on_a_real_portable_job_service(tmp_path):
    output = tmp_path / "documents"
    command = ["-m", "bertkit", "wikipedia", "--input", long_input(tmp_path / "inputs")]
    with portable_engine() as engine:
        process = subprocess.Popen(
            python_command(*command, "--output", str(output), *engine, sigint_default=True),
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            began = time.monotonic()
            while not output.is_dir():  # the pool's workers have begun: the job runs
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() - began < 2 * HANG, "the job never began its output"
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            rest = process.communicate(timeout=HANG)[1]
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    said = [line for line in rest.splitlines() if not line.startswith("wikipedia | ")]
    endpoint = engine[engine.index("--job_endpoint") + 1]
    assert len(said) == 1 and re.fullmatch(
        rf"bertkit wikipedia: interrupted \(SIGINT\): asked the job service "
        rf"{re.escape(endpoint)} to cancel job \S+, which it reports CANCELLED; .*",
        said[0],
    ), rest
    assert process.returncode == 130
