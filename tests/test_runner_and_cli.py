"""Runner choice, Dataflow packaging and the `bertkit` command line."""

import gc
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions

from bertkit import cli
from pipelines.beam import runner, shipping
from pipelines.beam.runner import is_local, make_pipeline, one_local_worker
from pipelines.beam.shipping import build_wheel, ensure_project_shipped


def test_local_runner_is_fnapi_not_prism() -> None:
    pipeline = make_pipeline(PipelineOptions([]))
    assert type(pipeline.runner).__name__ == "FnApiRunner"
    assert is_local(PipelineOptions(["--runner", "DirectRunner"]))
    assert not is_local(PipelineOptions(["--runner", "DataflowRunner"]))


def test_a_pipeline_never_run_leaves_no_temporary_folder() -> None:
    pipeline = make_pipeline(PipelineOptions([]))
    folder = Path(pipeline.local_tempdir)
    assert folder.is_dir()
    del pipeline
    assert not folder.exists()
    with pytest.raises(ValueError, match="refused"), make_pipeline(PipelineOptions([])) as p:
        folder = Path(p.local_tempdir)
        raise ValueError("refused while the graph was built")
    del p
    assert not folder.exists()


def test_several_in_memory_workers_is_refused_with_the_fix(tmp_path, capsys) -> None:
    """It was a traceback once the graph was being built."""
    from pipelines import books

    book = tmp_path / "book.txt"
    book.write_text("One sentence. Another.\n")
    argv = ["--input", str(book), "--output", str(tmp_path / "out"), "--direct_num_workers", "2"]
    with pytest.raises(SystemExit) as exited:
        books.main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "bertkit books: error: --direct_num_workers 2 needs --direct_running_mode "
        "multi_processing (or multi_threading): in_memory runs one worker\n"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--direct_num_workers", "-1", "--direct_running_mode", "multi_processing"],
            "--direct_num_workers -1: a number of workers is 0 or more (0: one per core)",
        ),
        (
            ["--num_workers=-2"],
            "--num_workers -2: a number of workers is 0 or more (0: Dataflow chooses)",
        ),
        (
            ["--max_num_workers", "-1"],
            "--max_num_workers -1: a number of workers is 0 or more (0: Dataflow chooses)",
        ),
    ],
)
def test_a_negative_number_of_workers_is_refused_before_overwrite(tmp_path, capsys, flags, said):
    """-1 workers in processes was a 46-line IndexError from Beam, after --overwrite had
    deleted the earlier output."""
    from pipelines import books

    book = tmp_path / "book.txt"
    book.write_text("One sentence. Another.\n")
    earlier = tmp_path / "out"
    earlier.mkdir()
    kept = earlier / "documents-00000-0000.parquet"  # a name --overwrite deletes
    kept.write_text("an earlier run's")
    argv = ["--input", str(book), "--output", str(earlier), "--overwrite", *flags]
    with pytest.raises(SystemExit) as exited:
        books.main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"bertkit books: error: {said}\n"
    assert kept.read_text() == "an earlier run's"


def test_prism_without_its_binary_is_one_line(tmp_path, capsys, monkeypatch) -> None:
    """Beam's PrismRunner downloads its binary at run time: offline, or from a URL where
    nothing answers, that was a traceback."""
    from apache_beam.runners.portability import prism_runner

    from pipelines import books
    from pipelines.command.progress import PROGRESS_ENV
    from tests.support.s3server import free_port

    # Its releases' address, at a port where nothing answers (offline, the same failure).
    releases = f"http://127.0.0.1:{free_port()}/"
    monkeypatch.setattr(prism_runner, "GITHUB_DOWNLOAD_PREFIX", releases)
    monkeypatch.setattr(prism_runner.PrismJobServer, "BIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(PROGRESS_ENV, "0")  # no line saying Prism shows no progress
    book = tmp_path / "book.txt"
    book.write_text("One sentence. Another.\n")
    argv = ["--input", str(book), "--output", str(tmp_path / "out"), "--runner", "PrismRunner"]
    fix = "pass --prism_location with a Prism binary on this machine, or leave --runner out"
    with pytest.raises(SystemExit) as exited:
        books.main(argv)
    assert exited.value.code == 1
    assert re.fullmatch(
        rf"bertkit books: error: --runner PrismRunner: Unable to fetch remote prism binary at "
        rf"{re.escape(releases)}\S+\.zip: <urlopen error \[Errno 111\] Connection refused>; "
        rf"{fix} for the local runner\n",
        capsys.readouterr().err,
    )
    assert not (tmp_path / "out").exists()


def _transform_names(flags: list[str], tmp_path) -> set[str]:
    """The transforms of the wikipedia stage's graph, as the runner those flags pick sees it."""
    from pipelines.wikipedia.config import WikipediaConfig
    from pipelines.wikipedia.transforms import ExtractArticles

    options = PipelineOptions(flags)
    pipeline = make_pipeline(options)
    config = WikipediaConfig(input=["dump.xml.bz2"], output=str(tmp_path))
    output = pipeline | "Extract" >> ExtractArticles(["dump.xml.bz2"], str(tmp_path), config)
    proto = pipeline.to_runner_api()
    folder = Path(pipeline.local_tempdir)
    # The graph and its pipeline hold each other: collected, the pipeline takes its folder.
    del pipeline, output
    gc.collect()
    assert not folder.exists()
    return {t.unique_name for t in proto.components.transforms.values()}


@pytest.mark.parametrize(
    ("flags", "spread"),
    [
        ([], False),
        (["--direct_num_workers", "1"], False),
        (["--direct_num_workers", "1", "--direct_running_mode", "multi_processing"], False),
        (["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"], True),
        (["--direct_num_workers", "0", "--direct_running_mode", "multi_threading"], True),
        (["--runner", "PortableRunner", "--job_endpoint", "localhost:1"], True),
    ],
)
def test_units_are_spread_only_where_several_workers_may_take_them(flags, spread, tmp_path):
    names = _transform_names(flags, tmp_path)
    assert "Extract/PlanSplits" in names and "Extract/ExtractDocuments" in names
    assert ("Extract/SpreadSplits" in names) is spread
    assert not any("MaybeReshuffle/Reshuffle" in name for name in names)  # one shuffle at most
    assert one_local_worker(PipelineOptions(flags)) is not spread


def test_wheel_for_dataflow_workers_holds_the_packages(tmp_path) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    # Every layer's subpackage must reach the workers.
    for module in (
        "schemas/documents.py",
        "pipelines/wikipedia/cli.py",
        "pipelines/books/cli.py",
        "pipelines/text/wikitext.py",
        "pipelines/io/storage.py",
        "pipelines/bert/pairs.py",
        "pipelines/beam/files.py",
        "pipelines/examples/transforms.py",
        "pipelines/inspect/cli.py",
        "trainer/__init__.py",
        "bertkit/cli.py",
    ):
        assert module in names
    metadata = next(n for n in names if n.endswith("METADATA"))
    requirements = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Dist: blingfire" in requirements
    torch_lines = [
        line for line in requirements.splitlines() if line.startswith("Requires-Dist: torch")
    ]
    assert torch_lines == [  # never on workers
        'Requires-Dist: torch>=2.4; extra == "train"',
        'Requires-Dist: torchao>=0.12; extra == "gpu"',
    ]


def test_dataflow_gets_the_wheel_unless_the_user_ships_code() -> None:
    options = PipelineOptions(["--runner", "DataflowRunner"])
    folder = ensure_project_shipped(options)
    (shipped,) = options.view_as(SetupOptions).extra_packages
    assert shipped.endswith(".whl") and Path(shipped).parent == Path(folder)
    shutil.rmtree(folder)  # the caller's to remove (make_pipeline ties it to the pipeline)
    own = PipelineOptions(["--runner", "DataflowRunner", "--setup_file", "./setup.py"])
    assert ensure_project_shipped(own) is None
    assert own.view_as(SetupOptions).extra_packages is None


@pytest.mark.parametrize(
    ("requires", "unmet"),
    [
        ('["setuptools>=77"]', []),
        ('["setuptools>=9999"]', [f"setuptools>=9999 ({metadata.version('setuptools')})"]),
        ('["no-such-backend-xyz>=1", "setuptools"]', ["no-such-backend-xyz>=1 (not installed)"]),
    ],
)
def test_build_requirements_the_environment_lacks(tmp_path, requires, unmet) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[build-system]\nrequires = {requires}\n", encoding="utf-8")
    assert shipping.unmet_build_requirements(pyproject) == unmet


def test_a_launch_without_the_setuptools_the_wheel_needs_is_one_line(
    tmp_path, monkeypatch, capsys
) -> None:
    """`python3.11 -m venv` brings setuptools 65; the wheel is built with the environment's
    own, so an old one is said before any work, with the install that fixes it."""
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=9999"]\n', encoding="utf-8"
    )
    monkeypatch.setattr(shipping, "PROJECT_ROOT", tmp_path)
    options = PipelineOptions(["--runner", "DataflowRunner"])
    # make_pipeline ships the wheel once Beam has accepted the options (which needs a
    # project, a region and a bucket: tests/test_dataflow_refusals.py); here, the shipping.
    ship = shipping.ensure_project_shipped
    code = runner._run_and_say(lambda argv: bool(ship(options)), None, "bertkit x", ())
    installed = metadata.version("setuptools")
    assert capsys.readouterr().err == (
        "bertkit x: error: building bertkit's wheel for the Dataflow workers needs "
        f"setuptools>=9999 ({installed}): pip install 'setuptools>=9999' (the gcp extra "
        "installs it), or pass --extra_package path/to/bertkit-*.whl\n"
    )
    assert code == 2
    assert options.view_as(SetupOptions).extra_packages is None


def test_cli_lists_commands(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "wikipedia" in out and "books" in out and "demo" in out


def test_version_names_bertkit_python_and_the_libraries_as_installed(monkeypatch, capsys):
    """`bertkit --version` (and -V): one line, each library's version as its installed
    metadata says."""
    from importlib import metadata

    done = subprocess.run(
        [sys.executable, "-m", "bertkit", "--version"], capture_output=True, text=True
    )
    expected = (
        f"bertkit {metadata.version('bertkit')} (Python {sys.version.split()[0]}; "
        f"apache-beam {metadata.version('apache-beam')}, pyarrow {metadata.version('pyarrow')}, "
        f"tokenizers {metadata.version('tokenizers')}, blingfire {metadata.version('blingfire')}"
        f", torch {metadata.version('torch')}, webdataset {metadata.version('webdataset')})\n"
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")
    with pytest.raises(SystemExit) as exited:
        cli.main(["-V"])
    assert (exited.value.code, capsys.readouterr().out) == (0, expected)
    # A library that is not installed (the train extra's, on a core install) says so.
    monkeypatch.setattr(cli, "VERSIONED", ("pyarrow", "no-such-library-bertkit"))
    assert cli.version().endswith(
        f"(Python {sys.version.split()[0]}; pyarrow {metadata.version('pyarrow')}, "
        "no-such-library-bertkit not installed)"
    )


# Each command's --help: its module docstring's first line, and one of its own flags.
COMMAND_HELP = {
    "demo": ("Run bertkit on the embedded real sample", "--train-steps"),
    "wikipedia": ("Extract sentence-split articles from Wikipedia", "--split_mb"),
    "books": ("Extract sentence-split documents from book files", "--lines-per-document"),
    "corpus": ("Extract sentence-split documents from a corpus of JSON lines", "--text-field"),
    "dedup": ("Remove exact and near-duplicate documents", "--num-perm"),
    "vocab": ("Train a BERT WordPiece vocabulary", "--limit-alphabet"),
    "examples": ("`bertkit examples`: documents → BERT pre-training examples", "--max_seq_length"),
    "chain": ("From dumps, books and JSON lines to shards in one Beam job", "--vocab-seed"),
    "inspect": ("Look inside bertkit artifacts", "--no-verify"),
    "train": ("`bertkit train`: BERT pre-training", "--micro-batch-size"),
    "export-hf": ("Turn a trainer checkpoint into an HF model directory", "--overwrite"),
    "docs": ("`bertkit docs`: the user's pages", "PAGE"),
}


# Runs `python -m bertkit COMMAND --help` and `python -m MODULE --help` for every command,
# one after another in one process (as `python -m` runs them: runpy, `__main__`), and
# prints {"bertkit COMMAND" or "MODULE": [exit status, stdout]} as JSON: one process start
# and one import of torch and Beam for the 22, not 22.
HELP_SCRIPT = """
import contextlib, io, json, runpy, sys
from bertkit import cli
answers = {}
for command, (module, _) in cli.COMMANDS.items():
    for name, argv in ((f"bertkit {command}", [command]), (module, [])):
        sys.argv = ["python", *argv, "--help"]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                runpy.run_module(name.split()[0], run_name="__main__", alter_sys=True)
                status = "returned"
            except SystemExit as stop:
                status = stop.code
        answers[name] = [status, out.getvalue()]
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, list]:
    done = subprocess.run(
        [sys.executable, "-c", HELP_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_command_answers_help_through_bertkit_and_python_m(command: str, helps) -> None:
    title, flag = COMMAND_HELP[command]
    for name in (f"bertkit {command}", cli.COMMANDS[command][0]):
        status, stdout = helps[name]
        assert status == 0, (name, status)
        assert title in stdout and flag in stdout, name


def test_stage_help_is_the_module_docstring(helps) -> None:
    status, stdout = helps["bertkit wikipedia"]
    assert status == 0
    assert "Extract sentence-split articles from Wikipedia" in stdout
    assert "--min_paragraph_words" in stdout


def test_missing_required_flag_names_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.wikipedia", "--input", "x.xml"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "the following arguments are required: --output" in result.stderr


# The demo's data files: any change of behaviour in extraction, vocabulary or examples changes
# one of these (the last change: the cleaners' running-text rules and the sentence
# re-joiner, on purpose). The manifests are left out because they hold the output's own path.
DEMO_SHA256 = {
    "documents/books/documents-00000-0000.parquet": "5a1425be16e9c0789df60957a68fdae85058eea5e542006034f7b6954efc0e8f",
    "documents/wikipedia/documents-00000-00000-0000.parquet": "bfbc9161ab53f30d5d9073dd487a38cdd33151846db7b24b7d59ce54905b9130",
    "shards/seq128/heldout/shard-000000.tar": "3e40384ed6ed70b86f8d42fcbbd0b86ebbf343870843382234aeb623d6dfce37",
    "shards/seq128/train/shard-000000.tar": "bef12116bda6218a95c22c678bc39c5c617b66039f827997feddca310440b0ba",
    "shards/seq128/train/shard-000001.tar": "497f5b68e12c2c3b3fb147d530d3343e06a2a9c614cb2afec299c552b27c6456",
    "shards/seq128/train/shard-000002.tar": "b89447093fceac8e445c16942046bf6753c218b6d807d4ab32b7d849c5962c94",
    "shards/seq128/train/shard-000003.tar": "8cc34058ba607bf6fefdc416b0576870d85a324d68735c4ca8a564590e533fee",
    "shards/seq128/train/shard-000004.tar": "64d65db4c51ff702d4761a9fba07cac08177bda4ab0ace7b317aa7eadba0b62d",
    "vocab/tokenizer.json": "3095cbe4935b5b622b5590c133787f95292699e348f2725628d0bf506387698a",
    "vocab/vocab.txt": "0083f89ee4b94df683c4b9a059a09352cac1fabfdbfd022db5a985274f590da0",
}


def test_the_demo_evaluates_four_times_along_a_long_run_and_at_the_end_of_a_short_one() -> None:
    from bertkit import demo

    def every(steps: int) -> str:
        args = demo.train_args(Path("shards"), Path("run"), steps)
        return args[args.index("--eval-every") + 1]

    assert [every(steps) for steps in (1200, 200, 199, 20, 2)] == ["300", "50", "0", "0", "0"]


def test_the_demo_refuses_negative_steps_and_says_an_export_refusal_in_one_line(
    tmp_path, capsys
) -> None:
    from bertkit import demo

    with pytest.raises(SystemExit) as exited:
        demo.run(["--output", str(tmp_path / "d"), "--train-steps", "-5"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "bertkit demo: error: --train-steps -5: must be 0 or more\n"
    assert not (tmp_path / "d").exists()
    assert demo._export(tmp_path / "run", tmp_path / "hf") == 2
    assert capsys.readouterr().err == (
        f"bertkit export-hf: error: {tmp_path / 'run' / 'checkpoints'} does not exist: pass a "
        "checkpoint file or directory\n"
    )


def test_demo_runs_the_whole_chain_on_the_embedded_sample(tmp_path, capsys) -> None:
    from bertkit import demo
    from pipelines.beam.documents import read_manifest

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
    data_files = [
        *tmp_path.glob("documents/*/*.parquet"),
        *tmp_path.glob("shards/seq*/*/*.tar"),
        *(tmp_path / "vocab").glob("*.txt"),
        tmp_path / "vocab" / "tokenizer.json",
    ]
    written = {
        str(path.relative_to(tmp_path)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in data_files
    }
    assert written == DEMO_SHA256
    # Every "look inside" command the demo prints works as printed: the vocabulary and the
    # run among them, which `inspect` once refused.
    from pipelines.inspect import run as inspect

    hints = [line.split("#")[0].split()[2:] for line in out.splitlines()]
    hints = [
        words
        for words, line in zip(hints, out.splitlines(), strict=True)
        if line.startswith("  bertkit inspect ")
    ]
    assert [words[0] for words in hints][-2:] == [str(tmp_path / "vocab"), str(tmp_path / "run")]
    for words in hints:
        assert inspect(words) == 0, words
