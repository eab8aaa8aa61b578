"""A command's start-up as a whole process (pipelines/command/startup.py): the collector
paused while Beam is imported and the imports frozen, one BLAS thread for a Beam stage, the
user's own setting kept, and the trainer left alone; the trainer's start without torch's
varlen kernel (and the torch._dynamo it loads) where no CUDA device may run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import bertkit.cli
from pipelines.command.startup import BLAS_THREADS_VARIABLE
from trainer import attention
from trainer.model import BertConfig, BertForPreTraining

# Imports a stage's module as `python -m pipelines.wikipedia` does, then reports what the
# process looks like: its threads (numpy's OpenBLAS pool among them), the variable, the GC.
_REPORT = """
import gc, json, os, sys
from pipelines.command.startup import import_command
import_command("pipelines.wikipedia.cli", one_blas_thread=sys.argv[1] == "one")
print(json.dumps({
    "threads": len(os.listdir("/proc/self/task")),
    "variable": os.environ.get("OPENBLAS_NUM_THREADS"),
    "gc_enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "numpy": "numpy" in sys.modules,
}))
"""


def _started(mode: str, variable: str | None) -> dict:
    # OpenBLAS falls back to OMP_NUM_THREADS (which the test workers set): neither is given.
    env = {
        k: v for k, v in os.environ.items() if k not in (BLAS_THREADS_VARIABLE, "OMP_NUM_THREADS")
    }
    if variable is not None:
        env[BLAS_THREADS_VARIABLE] = variable
    env["PYTHONPATH"] = str(Path.cwd())
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no pool on one core")
def test_a_stage_process_runs_one_blas_thread_unless_the_user_chose() -> None:
    stage = _started("one", None)
    trainer_like = _started("default", None)
    user_two = _started("one", "2")
    assert stage["numpy"] and trainer_like["numpy"]  # Beam imported numpy in each
    assert stage["variable"] == "1"
    assert trainer_like["variable"] is None
    assert user_two["variable"] == "2"  # the user's value stands
    # OpenBLAS's pool is the only difference: one thread more with its default on this
    # machine's cores, exactly one more with the user's 2.
    assert trainer_like["threads"] > stage["threads"]
    assert user_two["threads"] == stage["threads"] + 1
    for report in (stage, trainer_like, user_two):
        assert report["gc_enabled"] is True
        assert report["frozen"] > 100_000  # Beam's import, out of the collector's view


def test_bertkit_asks_one_blas_thread_for_beam_stages_only(monkeypatch) -> None:
    asked: list[tuple[str, bool]] = []

    class _Command:
        @staticmethod
        def main(rest: list[str]) -> None:
            asked.append(("main", rest == ["--x"]))

    def fake_import_command(module: str, *, one_blas_thread: bool = True):
        asked.append((module, one_blas_thread))
        return _Command

    monkeypatch.setattr(bertkit.cli, "import_command", fake_import_command)
    for command in ("wikipedia", "examples", "chain", "train", "export-hf", "demo"):
        monkeypatch.setattr(sys, "argv", ["bertkit", command, "--x"])
        bertkit.cli.main()
    assert asked == [
        ("pipelines.wikipedia.cli", True),
        ("main", True),
        ("pipelines.examples.cli", True),
        ("main", True),
        ("pipelines.chain.cli", True),
        ("main", True),
        ("trainer.train", False),
        ("main", True),
        ("trainer.export", False),
        ("main", True),
        ("bertkit.demo", False),
        ("main", True),
    ]


def test_beams_bigquery_notice_is_dropped_and_nothing_else(tmp_path) -> None:
    # A command module that logs, while it is imported, what Beam logs without the gcp
    # extra, then a warning of its own, through the root logger as Beam does.
    (tmp_path / "noisy_command.py").write_text(
        "import logging\n"
        "logging.warning('apitools not found, and bigquery client libraries are not "
        "available despite the import not raising an ImportError.')\n"
        "logging.warning('a warning of its own')\n"
        "logging.getLogger('some.library').error('an error of a library')\n"
        "logging.getLogger('some.library').info('an info nobody asked for')\n"
    )
    code = (
        "import logging\n"
        "from pipelines.command.startup import import_command\n"
        "import_command('noisy_command')\n"
        "print(len(logging.getLogger().handlers))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), str(tmp_path)])}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "a warning of its own\nan error of a library\n"
    assert done.stdout == "0\n"  # no handler left behind: the stage sets up its own


def test_a_trainer_started_for_the_cpu_imports_neither_dynamo_nor_beam(tmp_path) -> None:
    """torch's varlen kernel is imported where a CUDA device asks for it: its module loads
    torch._dynamo, seconds of every start of a command that trains nothing (`bertkit train
    --help`, a refused flag, `bertkit export-hf`) on a machine that cannot run it. (A
    training run loads it anyway, from torch's optimizer.) Nor does the trainer import Beam."""
    report = (
        "import sys, trainer.train, trainer.attention as a, torch;"
        "a.varlen_obstacles(torch.device('cpu'), torch.bfloat16, 64, 0.0);"
        "print(sorted(m for m in ('torch._dynamo', 'torch._inductor', 'apache_beam') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", report],
        env={**os.environ, "PYTHONPATH": str(Path.cwd())},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout == "[]\n"


def test_a_model_built_where_cuda_is_available_imports_the_varlen_kernel_first(monkeypatch):
    """Where CUDA may run torch's varlen kernel the model imports it as it is built, so the
    first compiled forward never traces the import; on the CPU nothing imports it."""
    from torch.nn.attention.varlen import varlen_attn

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2)
    for available, found in ((False, None), (True, varlen_attn)):
        monkeypatch.setattr(attention, "varlen_attn", None)
        monkeypatch.setattr(attention, "_VARLEN_LOOKED_UP", False)
        monkeypatch.setattr(torch.cuda, "is_available", lambda available=available: available)
        BertForPreTraining(config)
        assert (attention._VARLEN_LOOKED_UP, attention.varlen_attn) == (available, found)
