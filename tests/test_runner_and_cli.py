"""Runner choice, Dataflow packaging and the `bertkit` command line."""

import subprocess
import sys
import zipfile

import pytest
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions

from pipelines import cli
from pipelines.beam_runner import build_wheel, ensure_project_shipped, is_local, make_pipeline


def test_local_runner_is_fnapi_not_prism() -> None:
    pipeline = make_pipeline(PipelineOptions([]))
    assert type(pipeline.runner).__name__ == "FnApiRunner"
    assert is_local(PipelineOptions(["--runner", "DirectRunner"]))
    assert not is_local(PipelineOptions(["--runner", "DataflowRunner"]))


def test_several_in_memory_workers_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="--direct_running_mode multi_processing"):
        make_pipeline(PipelineOptions(["--direct_num_workers", "2"]))


def test_wheel_for_dataflow_workers_holds_the_packages(tmp_path) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("schemas/documents.py", "pipelines/wikipedia.py", "pipelines/books.py",
                   "pipelines/wikitext.py", "trainer/__init__.py"):  # fmt: skip
        assert module in names
    metadata = next(n for n in names if n.endswith("METADATA"))
    requirements = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Dist: blingfire" in requirements
    torch_lines = [
        line for line in requirements.splitlines() if line.startswith("Requires-Dist: torch")
    ]
    assert torch_lines == ['Requires-Dist: torch>=2.4; extra == "train"']  # never on workers


def test_dataflow_gets_the_wheel_unless_the_user_ships_code() -> None:
    options = PipelineOptions(["--runner", "DataflowRunner"])
    ensure_project_shipped(options)
    (shipped,) = options.view_as(SetupOptions).extra_packages
    assert shipped.endswith(".whl")
    own = PipelineOptions(["--runner", "DataflowRunner", "--setup_file", "./setup.py"])
    ensure_project_shipped(own)
    assert own.view_as(SetupOptions).extra_packages is None


def test_cli_lists_commands(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "wikipedia" in out and "books" in out and "demo" in out


def test_stage_help_is_the_module_docstring() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "wikipedia", "--help"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0
    assert "Extract sentence-split articles from Wikipedia" in result.stdout
    assert "--min_paragraph_words" in result.stdout


def test_missing_required_flag_names_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.wikipedia", "--input", "x.xml"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "the following arguments are required: --output" in result.stderr


def test_demo_runs_the_whole_chain_on_the_embedded_sample(tmp_path, capsys) -> None:
    from pipelines import demo
    from pipelines.documents_io import read_manifest

    # 20 training steps instead of 1,200: the chain, not the accuracy (tests/test_train.py).
    assert demo.run(["--output", str(tmp_path), "--train-steps", "20"]) == 0
    documents = tmp_path / "documents"
    assert read_manifest(str(documents / "wikipedia")).counts["documents"] == 97
    assert read_manifest(str(documents / "books")).counts["documents"] == 4
    assert (tmp_path / "run" / "checkpoints" / "step-00000020.pt").is_file()
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    out = capsys.readouterr().out
    assert "Look inside" in out and "(the unigram baseline)" in out
    assert "for always predicting ','" in out  # the most frequently masked token
