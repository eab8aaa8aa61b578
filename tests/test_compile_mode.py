"""`bertkit train --compile-mode` and torch.compile's caches in the run directory
(trainer/compiling.py): a --compile run writes inductor's caches into OUTPUT/compile-cache and
a later one there loads its graphs instead of compiling them (through the trainer:
tests/test_compile.py's compiled run and its --resume); the directory is the run's own
(--overwrite keeps it and calls nothing in it foreign); a variable the user set is kept; and
--compile-mode without --compile is refused before any work."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import pytest
import torch
import torch._dynamo

from schemas.checkpoint import CHECKPOINTS_DIR, LATEST_FILE
from tests.support.torchrun import torchrun_env, torchrun_trainer
from trainer import train
from trainer.compiling import INDUCTOR_VARIABLE, TRITON_VARIABLE, CompileCache, compiled
from trainer.metrics import METRICS_FILE
from trainer.run.checkpoints import COMPILE_CACHE_DIR, CheckpointError, prepare_run_directory


@pytest.fixture
def no_cache_variables(monkeypatch):
    for name in (INDUCTOR_VARIABLE, TRITON_VARIABLE):
        monkeypatch.delenv(name, raising=False)


def flags(shards: Path, output: Path, *more: str) -> list[str]:
    return [
        "--model",
        "tiny",
        "--micro-batch-size",
        "8",
        "--max-steps",
        "2",
        "--warmup-steps",
        "0",
        "--dropout",
        "0",
        "--eval-every",
        "0",
        "--eval-batches",
        "1",
        "--num-workers",
        "0",
        "--no-tensorboard",
        "--shards",
        str(shards),
        "--output",
        str(output),
        *more,
    ]


def test_compile_mode_without_compile_is_refused_before_any_work(sample_shards, tmp_path, capsys):
    output = tmp_path / "run"
    code = train.run(flags(sample_shards, output, "--compile-mode", "max-autotune"))
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "bertkit train: error: --compile-mode max-autotune applies to --compile: add "
        "--compile, or leave --compile-mode out"
    )
    assert not output.exists()


def test_the_cache_is_cold_then_warm_and_max_autotune_runs_on_the_cpu(tmp_path, no_cache_variables):
    """One small step compiled with max-autotune-no-cudagraphs (inductor's CPU matmul
    templates serve frozen weights only, so a training step keeps ATen's matmuls: the mode
    runs, and computes the eager step's numbers); then, in a fresh dynamo as a requeued
    job's process, the same step loads from the run directory: no FX graph compiled."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 8)
    model(x).square().sum().backward()
    eager = [p.grad.clone() for p in model.parameters()]
    counters = torch._dynamo.utils.counters
    for warm in (False, True):
        torch._dynamo.reset()
        counters.clear()
        model.zero_grad(set_to_none=True)
        cache = CompileCache.open(tmp_path, main=True)
        assert (cache.path, cache.warm) == ((tmp_path / COMPILE_CACHE_DIR).absolute(), warm)
        assert os.environ[INDUCTOR_VARIABLE] == str(cache.path)
        assert os.environ[TRITON_VARIABLE] == str(cache.path / "triton")
        step = compiled(model, "max-autotune-no-cudagraphs", dynamic=None)
        step(x).square().sum().backward()
        cache.close()
        assert INDUCTOR_VARIABLE not in os.environ and TRITON_VARIABLE not in os.environ
        for ours, theirs in zip(model.parameters(), eager, strict=True):
            torch.testing.assert_close(ours.grad, theirs, atol=1e-6, rtol=1e-5)
        inductor = counters["inductor"]
        hits, misses = inductor["fxgraph_cache_hit"], inductor["fxgraph_cache_miss"]
        if warm:
            assert (hits > 0, misses) == (True, 0)
        else:
            assert (hits, misses > 0) == (0, True)
    assert cache.line().startswith(f"compile cache {cache.path}: warm, ")


def test_cuda_graph_modes_mark_each_step_and_the_others_do_not(monkeypatch):
    """Under reduce-overhead and max-autotune (CUDA graphs on a GPU) every call of the
    step first marks a new step; default and max-autotune-no-cudagraphs return the compiled
    module itself. torch.compile stands in here: the wrapping is what is checked."""
    marks: list[str] = []
    modes: list[str | None] = []

    def fake_compile(module, dynamic=None, mode=None):
        modes.append(mode)
        return lambda x: marks.append("call") or module(x)

    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append("mark"))
    model = torch.nn.Identity()
    for mode in ("reduce-overhead", "max-autotune", None, "max-autotune-no-cudagraphs"):
        step = compiled(model, mode, dynamic=None)
        assert step(torch.ones(1)).tolist() == [1.0]
    assert modes == ["reduce-overhead", "max-autotune", None, "max-autotune-no-cudagraphs"]
    assert marks == ["mark", "call", "mark", "call", "call", "call"]


def test_inductor_s_online_softmax_note_is_left_out_and_other_warnings_kept():
    """The note's text as torch 2.11 prints it on an H200 (warnings.warn in inductor's
    lowering.py), after `compiled`; a user warning of other text still shows."""
    note = (
        "\nOnline softmax is disabled on the fly since Inductor decides to\nsplit the "
        "reduction. Cut an issue to PyTorch if this is an\nimportant use case and you want "
        "to speed it up with online\nsoftmax.\n"
    )
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        compiled(torch.nn.Identity(), None, dynamic=None)
        shown.clear()  # torch's own, at its first torch.compile in the process
        warnings.warn(note, UserWarning, stacklevel=1)
        warnings.warn("Online softmax is a term of art", RuntimeWarning, stacklevel=1)
        warnings.warn("another note", UserWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == ["Online softmax is a term of art", "another note"]


def test_a_cache_directory_the_user_set_is_kept(tmp_path, monkeypatch):
    mine = tmp_path / "node-local"
    monkeypatch.setenv(INDUCTOR_VARIABLE, str(mine))
    monkeypatch.delenv(TRITON_VARIABLE, raising=False)
    cache = CompileCache.open(tmp_path / "run", main=True)
    assert cache.line() == (
        f"compile cache {mine} (from TORCHINDUCTOR_CACHE_DIR): empty: the first steps compile "
        "into it, and a --resume here loads them"
    )
    cache.close()
    assert os.environ[INDUCTOR_VARIABLE] == str(mine)
    assert not (tmp_path / "run").exists()

    # A bucket's run: the user's too, and nothing is fetched into it or mirrored.
    def fill(path: Path) -> None:
        raise AssertionError(f"filled {path}")

    staging = tmp_path / "staging"
    bucket_run = CompileCache.open(staging, main=True, mirror=("s3://b/r/compile-cache.tar", fill))
    assert (bucket_run.path, bucket_run.mirror) == (mine, None)
    assert not staging.exists()


def test_inductor_s_own_default_in_the_variable_is_no_choice_of_the_user_s(tmp_path, monkeypatch):
    """Importing the trainer sets TORCHINDUCTOR_CACHE_DIR to inductor's default (its
    cache_dir() writes the variable the first time it is asked): taken for the user's
    choice, every `bertkit train --compile` would have cached in /tmp, not the run."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv(INDUCTOR_VARIABLE, default_cache_dir())
    monkeypatch.setenv(TRITON_VARIABLE, os.path.join(default_cache_dir(), "triton", "0"))
    cache = CompileCache.open(tmp_path, main=True)
    assert cache.chosen_by == "run directory"
    assert os.environ[INDUCTOR_VARIABLE] == str(tmp_path.absolute() / COMPILE_CACHE_DIR)
    assert os.environ[TRITON_VARIABLE] == str(tmp_path.absolute() / COMPILE_CACHE_DIR / "triton")
    cache.close()
    assert os.environ[INDUCTOR_VARIABLE] == default_cache_dir()


def test_overwrite_keeps_the_compile_cache_and_calls_nothing_in_it_foreign(tmp_path):
    """Before the cache was the run's own, --overwrite refused the directory ("also holds
    compile-cache, which no training run writes")."""
    output = tmp_path / "run"
    (output / CHECKPOINTS_DIR).mkdir(parents=True)
    (output / CHECKPOINTS_DIR / "step-00000002.pt").write_bytes(b"x")
    (output / CHECKPOINTS_DIR / LATEST_FILE).write_text("step-00000002.pt\n")
    (output / METRICS_FILE).write_text("{}\n")
    entry = output / COMPILE_CACHE_DIR / "fxgraph" / "ab" / "entry"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"graph")
    earlier = prepare_run_directory(output, resume=False, overwrite=True)
    assert [p.relative_to(output).as_posix() for p in earlier] == [
        "checkpoints/latest",
        "checkpoints/step-00000002.pt",
        "metrics.jsonl",
    ]
    (output / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match=r"also holds notes\.txt, which no training run"):
        prepare_run_directory(output, resume=False, overwrite=True)
    # A directory holding only a cache (a run that stopped before its first checkpoint)
    # holds no earlier run: a new one starts there without a flag, and shares the cache.
    only = tmp_path / "only-cache"
    (only / COMPILE_CACHE_DIR / "fxgraph").mkdir(parents=True)
    (only / COMPILE_CACHE_DIR / "fxgraph" / "entry").write_bytes(b"graph")
    assert prepare_run_directory(only, resume=False, overwrite=False) == []


@pytest.mark.slow
def test_a_resumed_run_loads_what_the_first_compiled_from_the_run_directory(
    sample_shards, tmp_path, no_cache_variables, caplog
):
    """Through the trainer (slow: a whole compilation, and tests/test_compile.py's run
    covers the default mode). Step 1 compiles (max-autotune-no-cudagraphs: on the CPU inductor's matmul templates
    serve frozen weights only, so a training step keeps ATen's matmuls, and the mode runs);
    the resume to step 2, in a fresh dynamo as a requeued job's process, finds the cache
    warm and compiles nothing: every FX graph is a cache hit."""
    output = tmp_path / "run"
    cache = output / COMPILE_CACHE_DIR
    mode = ["--compile", "--compile-mode", "max-autotune-no-cudagraphs"]
    counters = torch._dynamo.utils.counters
    torch._dynamo.reset()
    counters.clear()
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run(flags(sample_shards, output, *mode, "--stop-at-step", "1")) == 0
    assert f"compile cache {cache}: empty: the first steps compile into it" in caplog.text
    assert counters["inductor"]["fxgraph_cache_miss"] > 0
    assert counters["inductor"]["fxgraph_cache_hit"] == 0
    assert any((cache / "fxgraph").rglob("*")), "no FX graph written into the run directory"
    assert INDUCTOR_VARIABLE not in os.environ  # put back as it was when the run ended
    caplog.clear()
    torch._dynamo.reset()
    counters.clear()
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run(flags(sample_shards, output, *mode, "--resume")) == 0
    assert f"compile cache {cache}: warm, " in caplog.text
    assert counters["inductor"]["fxgraph_cache_hit"] > 0
    assert counters["inductor"]["fxgraph_cache_miss"] == 0


@pytest.mark.slow
def test_torchrun_s_processes_share_the_run_s_cache_and_a_resume_finds_it_warm(
    sample_shards, tmp_path
):
    """Two trainers under torchrun (Gloo) compile into the one OUTPUT/compile-cache, at
    once; the requeued pair (--resume) loads from it."""
    import subprocess

    env = {k: v for k, v in torchrun_env().items() if k not in (INDUCTOR_VARIABLE, TRITON_VARIABLE)}
    output = tmp_path / "run"
    cache = output / COMPILE_CACHE_DIR
    lines = []
    for more in (["--stop-at-step", "1"], ["--resume"]):
        argv = [*torchrun_trainer(2), *flags(sample_shards, output, "--compile", *more)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        lines.append([line for line in done.stderr.splitlines() if "compile cache" in line])
    assert len(lines[0]) == len(lines[1]) == 1  # rank 0 says it, once
    assert lines[0][0].endswith(
        f"compile cache {cache}: empty: the first steps compile into it, "
        "and a --resume here loads them"
    )
    assert f"compile cache {cache}: warm, " in lines[1][0]
    assert any((cache / "fxgraph").rglob("*"))
