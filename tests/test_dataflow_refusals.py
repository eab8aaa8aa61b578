"""A Dataflow launch that Dataflow or Beam would refuse is one line and exit 2 before any
work: no traceback, no wheel built and left in the temporary directory, no output touched
(pipelines/beam/beam_options.py, make_pipeline in pipelines/beam/runner.py). Offline: the
GCS emulator stands in for Cloud Storage, as in tests/test_dataflow.py."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import dataflow, wikipedia
from pipelines.beam.beam_options import dataflow_problem
from tests.conftest import DATA_DIR
from tests.support.gcsserver import gcs_emulator
from tests.test_dataflow import BUCKET, DATAFLOW


def wheel_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("bertkit-wheel-*"))


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--project", "My_Project", "--region", "r", "--temp_location", "gs://b/t"],
            "--runner DataflowRunner: Invalid Project ID (My_Project). Please make sure you "
            "specified the Project ID, not project description.",
        ),
        (
            ["--project", "my-project", "--region", "r"],
            "--runner DataflowRunner needs --temp_location gs://BUCKET/tmp, a bucket of yours "
            "for the job's temporary files (without it Beam creates a bucket in the project)",
        ),
        (["--project", "my-project", "--region", "r", "--staging_location", "gs://b/s"], None),
    ],
)
def test_a_dataflow_launch_is_checked_before_any_work(flags, said):
    options = PipelineOptions(["--runner", "DataflowRunner", *flags])
    assert dataflow_problem(options) == said


def test_an_invalid_project_is_one_line_and_no_wheel(tmp_path, capsys):
    """It was Beam's traceback ("ValueError: Pipeline has validations errors"), exit 1, once
    the wheel had been built into a folder nobody removed."""
    before = wheel_folders()
    flags = [*DATAFLOW, "--project", "My_Project"]  # the later --project wins
    argv = ["--input", "gs://b/in.xml.bz2", "--output", "gs://b/out", *flags]
    with pytest.raises(SystemExit) as exited:
        wikipedia.main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "bertkit wikipedia: error: --runner DataflowRunner: Invalid Project ID (My_Project). "
        "Please make sure you specified the Project ID, not project description.\n"
    )
    assert wheel_folders() == before


def test_what_only_beam_checks_is_one_line_and_leaves_no_wheel(tmp_path, capsys):
    """Beam checks the options once more as it makes the pipeline: bertkit asks the same of
    them before any work, so --overwrite has deleted nothing and no wheel is built."""
    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    before = wheel_folders()
    with gcs_emulator(BUCKET) as client:
        client.bucket(BUCKET).blob("in/dump.xml.bz2").upload_from_filename(str(dump))
        earlier = "out/documents-00000-0000.parquet"  # an earlier run's, which --overwrite deletes
        client.bucket(BUCKET).blob(earlier).upload_from_string(b"earlier")
        argv = [
            "--input",
            f"gs://{BUCKET}/in/dump.xml.bz2",
            "--output",
            f"gs://{BUCKET}/out",
            *DATAFLOW,  # --max_num_workers 64
            "--num_workers",
            "65",
            "--template_location",
            str(tmp_path / "job.json"),
            "--overwrite",
        ]
        with pytest.raises(SystemExit) as exited:
            wikipedia.main(argv)
        written = [blob.name for blob in client.list_blobs(BUCKET, prefix="out")]
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "bertkit wikipedia: error: --runner DataflowRunner: num_workers (65) cannot exceed "
        "max_num_workers (64)"
    )
    assert wheel_folders() == before
    assert written == [earlier]
    assert not (tmp_path / "job.json").exists()


LAUNCH = ["--input=gs://b/in/*.txt", "--output=gs://b/out", "--runner=DataflowRunner"]


def test_the_template_launcher_runs_its_workers_on_its_own_image(monkeypatch):
    """build.sh sets BERTKIT_IMAGE in each stage's tag: a launch without
    --sdk_container_image (not through run.sh) runs the workers on it, rather than building
    a wheel from a source tree the image does not have."""
    launched: list[list[str]] = []
    stage = dataclasses.replace(dataflow.STAGES["books"], main=launched.append)
    monkeypatch.setitem(dataflow.STAGES, "books", stage)
    monkeypatch.setenv(dataflow.IMAGE_ENV, "r-docker.pkg.dev/p/bertkit/bertkit:1-books")
    assert dataflow.launch("books", LAUNCH) == 0
    own_image = "--sdk_container_image=r-docker.pkg.dev/p/bertkit/bertkit:1-books"
    assert launched == [[*LAUNCH, own_image, "--no_wait_until_finish"]]
    launched.clear()
    assert dataflow.launch("books", [*LAUNCH, "--sdk_container_image=other"]) == 0
    assert launched == [[*LAUNCH, "--sdk_container_image=other", "--no_wait_until_finish"]]


def test_a_launcher_without_an_image_says_which_parameter_to_pass(monkeypatch, capsys):
    """It was a ShippingError traceback advising --extra_package path/to/bertkit-*.whl."""
    monkeypatch.delenv(dataflow.IMAGE_ENV, raising=False)
    assert dataflow.launch("books", LAUNCH) == 2
    assert capsys.readouterr().err == (
        "bertkit books: error: the template launcher needs --sdk_container_image=IMAGE (a "
        "template parameter), the image the template was built from: infra/dataflow/run.sh "
        "passes it\n"
    )


def test_a_launched_stage_that_refuses_says_one_line(monkeypatch, capsys):
    """The launcher runs the stage through its command's main, as `bertkit books` does."""
    monkeypatch.setenv(dataflow.IMAGE_ENV, "image")
    flags = [*LAUNCH, "--project=My_Project", "--region=r", "--temp_location=gs://b/t"]
    assert dataflow.launch("books", flags) == 2
    assert capsys.readouterr().err.endswith(
        "bertkit books: error: --runner DataflowRunner: Invalid Project ID (My_Project). "
        "Please make sure you specified the Project ID, not project description.\n"
    )
