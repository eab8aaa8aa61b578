"""A missing extra is one line naming the install command, exit 2, before any work.

Each command runs in a process where the extra's packages are not installed
(tests/support/without_modules.py hides them as a missing package is missing), and its
whole stderr is compared: no traceback, no Beam notice, nothing written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.io import extras
from tests.support.without_modules import ROOT, environment

# What the core install lacks of each extra, as it lacks them: the gcp extra's Google
# clients (google.protobuf is Beam's own and stays), boto3, torch and safetensors.
WITHOUT_GCP = ("apitools", "google.cloud", "google.api_core", "google.auth")
WITHOUT_AWS = ("boto3", "botocore")
WITHOUT_TRAIN = ("torch", "safetensors")
WITHOUT_DEV = (*WITHOUT_TRAIN, *WITHOUT_AWS, "pytest", "moto")

AWS_LINE = "needs the aws extra (boto3 is not installed): pip install -c constraints.txt -e '.[aws]' in the bertkit checkout"
GCS_LINE = "needs the gcp extra (google-cloud-storage is not installed): pip install -c constraints.txt -e '.[gcp]' in the bertkit checkout"


def _run(tmp_path: Path, hidden: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess:
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, *argv],
        cwd=tmp_path,
        env=environment(shim, hidden),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "text": "One sentence. Another one."}\n', encoding="utf-8")
    return path


def test_a_stages_s3_input_without_the_aws_extra(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        (*WITHOUT_GCP, *WITHOUT_AWS),
        "-m",
        "bertkit",
        "corpus",
        "--input",
        "s3://bucket/in.jsonl",
        "--output",
        "out",
    )
    assert done.stderr == f"bertkit corpus: error: --input s3://bucket/in.jsonl {AWS_LINE}\n"
    assert done.returncode == 2
    assert not (tmp_path / "out").exists()


def test_a_stages_gs_output_without_the_gcp_extra(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        WITHOUT_GCP,
        "-m",
        "pipelines.corpus",
        "--input",
        str(_jsonl(tmp_path)),
        "--output",
        "gs://bucket/documents",
    )
    assert done.stderr == f"bertkit corpus: error: --output gs://bucket/documents {GCS_LINE}\n"
    assert done.returncode == 2


def test_the_dataflow_runner_without_the_gcp_extra(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        WITHOUT_GCP,
        "-m",
        "bertkit",
        "corpus",
        "--input",
        str(_jsonl(tmp_path)),
        "--output",
        "out",
        "--runner",
        "DataflowRunner",
    )
    assert done.stderr == (
        "bertkit corpus: error: --runner DataflowRunner needs the gcp extra "
        "(google-cloud-storage, google-cloud-dataflow-client are not installed): "
        "pip install -c constraints.txt -e '.[gcp]' in the bertkit checkout\n"
    )
    assert done.returncode == 2
    assert not (tmp_path / "out").exists()  # no wheel built, nothing written


def test_a_beam_flags_url_without_its_extra(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        WITHOUT_AWS,
        "-m",
        "bertkit",
        "corpus",
        "--input",
        str(_jsonl(tmp_path)),
        "--output",
        "out",
        "--temp_location",
        "s3://bucket/tmp",
    )
    assert done.stderr == f"bertkit corpus: error: --temp_location s3://bucket/tmp {AWS_LINE}\n"
    assert done.returncode == 2


def test_train_on_s3_without_boto3(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        WITHOUT_AWS,
        "-m",
        "bertkit",
        "train",
        "--shards",
        "s3://bucket/shards",
        "--output",
        "run",
    )
    assert done.stderr == f"bertkit train: error: --shards s3://bucket/shards {AWS_LINE}\n"
    assert done.returncode == 2
    assert not (tmp_path / "run").exists()


def test_inspect_on_s3_and_gs_without_their_extras(tmp_path: Path) -> None:
    hidden = (*WITHOUT_GCP, *WITHOUT_AWS)
    s3 = _run(tmp_path, hidden, "-m", "bertkit", "inspect", "s3://bucket/shards")
    gs = _run(tmp_path, hidden, "-m", "pipelines.inspect", "gs://bucket/shards", "--stats")
    assert s3.stderr == f"bertkit inspect: error: s3://bucket/shards {AWS_LINE}\n"
    assert gs.stderr == f"bertkit inspect: error: gs://bucket/shards {GCS_LINE}\n"
    assert (s3.returncode, gs.returncode) == (2, 2)


def test_credentials_in_a_url_stay_out_of_the_line(tmp_path: Path) -> None:
    done = _run(
        tmp_path, WITHOUT_AWS, "-m", "bertkit", "inspect", "s3://KEYID:SECRET@bucket/shards"
    )
    assert "SECRET" not in done.stderr
    assert done.stderr == f"bertkit inspect: error: s3://***@bucket/shards {AWS_LINE}\n"


@pytest.mark.parametrize("entry", [("-m", "bertkit", "export-hf"), ("-m", "trainer.export")])
def test_export_of_a_checkpoint_on_s3_without_boto3(tmp_path: Path, entry: tuple) -> None:
    done = _run(tmp_path, WITHOUT_AWS, *entry, "s3://bucket/run/checkpoints", "--output", "hf")
    assert done.stderr == f"bertkit export-hf: error: s3://bucket/run/checkpoints {AWS_LINE}\n"
    assert done.returncode == 2
    assert not (tmp_path / "hf").exists()


TRAIN_EXTRA_LINE = (
    "needs the train extra (torch, safetensors are not installed): pip install -c "
    "constraints.txt -e '.[train]' in the bertkit checkout"
)


@pytest.mark.parametrize("command", ["train", "export-hf"])
def test_train_and_export_without_the_train_extra(tmp_path: Path, command: str) -> None:
    done = _run(tmp_path, WITHOUT_TRAIN, "-m", "bertkit", command, "x", "--output", "run")
    assert done.stderr == f"bertkit: error: `bertkit {command}` {TRAIN_EXTRA_LINE}\n"
    assert done.returncode == 2
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("command", "flag_line"),
    [
        ("train", "  --micro-batch-size MICRO_BATCH_SIZE, --micro_batch_size MICRO_BATCH_SIZE"),
        ("export-hf", "  --overwrite   replace the files of an earlier export in --output"),
    ],
)
def test_help_without_the_train_extra(tmp_path: Path, command: str, flag_line: str) -> None:
    """A user reads the flags before installing torch: the help is the whole help, as the
    command's module gives it with the extra, then one line on what running it needs; exit 0."""
    done = _run(tmp_path, WITHOUT_TRAIN, "-m", "bertkit", command, "--shards", "x", "--help")
    module = {"train": "trainer.train", "export-hf": "trainer.export"}[command]
    with_extra = _run(tmp_path, (), "-m", module, "--help")  # the command's own module
    assert with_extra.returncode == 0 and with_extra.stderr == ""
    assert done.stdout == with_extra.stdout
    assert done.stdout.startswith(f"usage: bertkit {command} ")
    assert flag_line in done.stdout.splitlines()
    assert done.stderr == f"\nbertkit: to run it: `bertkit {command}` {TRAIN_EXTRA_LINE}\n"
    assert done.returncode == 0


def test_fp8_without_the_gpu_extra(tmp_path: Path, sample_shards: Path) -> None:
    run = tmp_path / "run"
    done = _run(
        tmp_path,
        ("torchao",),
        *("-m", "bertkit", "train", "--shards", str(sample_shards), "--output", str(run)),
        *("--model", "tiny", "--fp8", "rowwise", "--fp8-layers", "all"),
    )
    assert done.stderr == (
        "bertkit train: error: --fp8 rowwise needs the gpu extra (torchao is not installed): "
        "pip install -e '.[gpu]' in the bertkit checkout\n"
    )
    assert done.returncode == 2
    assert not run.exists()


@pytest.mark.parametrize("benchmark", ["loader", "faults", "elastic", "dedup"])
def test_a_benchmark_without_the_dev_extra(tmp_path: Path, benchmark: str) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{benchmark}", "--help"],
        cwd=ROOT,  # benchmarks run from the repository root
        env=environment(shim, WITHOUT_DEV),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stderr == (
        f"bench: error: `python -m bench.{benchmark}` needs the dev extra (torch, boto3, "
        "pytest, moto are not installed): pip install -c constraints.txt -e '.[dev]' in the "
        "bertkit checkout\n"
    )
    assert done.returncode == 2


def test_the_training_step_benchmark_needs_the_train_extra_only(tmp_path: Path) -> None:
    # A GPU machine set up as docs/gpu.md says has the train extra, not the dev tools.
    help_without = [
        _run(tmp_path, hidden, "-m", "bench.train_step", "--help")
        for hidden in (WITHOUT_TRAIN, (*WITHOUT_AWS, "google", "pytest", "moto"))
    ]
    assert help_without[0].stderr == (
        "bench: error: `python -m bench.train_step` needs the train extra (torch, safetensors "
        "are not installed): pip install -c constraints.txt -e '.[train]' in the bertkit "
        "checkout\n"
    )
    assert help_without[0].returncode == 2
    assert help_without[1].returncode == 0, help_without[1].stderr
    assert "usage: python -m bench.train_step" in help_without[1].stdout


def test_with_the_extras_installed_nothing_is_missing() -> None:
    # This venv has the dev extra, and with it every other.
    assert [extras.missing(extra) for extra in extras.EXTRA_MODULES] == [()] * 6
    assert extras.installed("google.cloud.storage")
    assert not extras.installed("bertkit_no_such_module")
    assert not extras.installed("bertkit_no_such_package.module")  # parent missing: no error
    assert extras.url_extra("S3://b/k") == "aws"
    assert extras.url_extra("gs://b/k") == "gcp"
    assert [extras.url_extra(v) for v in ("https://h/x", "/local/s3://x", "out")] == [None] * 3


def test_the_demo_without_the_train_extra_stops_before_its_stages(tmp_path: Path) -> None:
    done = _run(tmp_path, WITHOUT_TRAIN, "-m", "bertkit", "demo", "--output", "demo")
    assert done.stderr == (
        "bertkit demo: error: training needs the train extra (torch, safetensors are not "
        "installed): pip install -c constraints.txt -e '.[train]' in the bertkit checkout; "
        "or --train-steps 0 for the data stages only\n"
    )
    assert done.returncode == 2
    assert not (tmp_path / "demo").exists()


def test_from_a_wheel_the_line_names_the_wheel_not_a_checkout(monkeypatch, tmp_path) -> None:
    """Installed from a wheel there is no checkout, nor constraints.txt: the line says to
    install the wheel again with the extra."""
    from pipelines.io import extras

    assert extras.install_command("gcp") == (
        "pip install -c constraints.txt -e '.[gcp]' in the bertkit checkout"
    )
    monkeypatch.setattr(extras, "_CHECKOUT", tmp_path)  # site-packages: no pyproject.toml
    assert extras.install_command("dataflow") == (
        "pip install 'WHEEL[gcp]', WHEEL the bertkit wheel you installed"
    )
    assert extras.install_command("gpu") == (
        "pip install 'WHEEL[gpu]', WHEEL the bertkit wheel you installed"
    )
