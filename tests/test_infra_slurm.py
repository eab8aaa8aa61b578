"""infra/slurm/train.sbatch run as `sbatch` runs it, under stand-ins for srun, scancel,
scontrol, torchrun and the trainer: the commands it runs and the code it exits with, for each
way a job ends (its time-limit warning, a SIGTERM, the trainer's own codes)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_infra import SBATCH, k8s_job, sbatch_example_flags

# One stand-in for srun, scancel, scontrol, torchrun (`$PYTHON -m torch.distributed.run`) and
# the trainer's Python (`$PYTHON -c …`), by the name it is called under; each call appends
# its argv to $SHIM_LOG as a JSON line. SLURM signals every process of a job step: the step's
# processes (the node task that srun starts, torchrun) note their pids in $STEP_PIDS, which
# scancel signals. torchrun runs one trainer (LOCAL_RANK 0), passes SIGTERM on to it and
# ends with 1 when it exits other than 0, as torchrun does. The trainer's Python runs the
# recipe's real trainer lines on the stand-in trainer package in $STUB_PACKAGES.
SHIM = """#!{python}
import json, os, signal, subprocess, sys, time
from pathlib import Path

name, argv = Path(sys.argv[0]).name, sys.argv[1:]


def log(*record):
    with open(os.environ["SHIM_LOG"], "a") as f:
        f.write(json.dumps(record) + "\\n")


def in_the_step():
    with open(os.environ["STEP_PIDS"], "a") as f:
        f.write(f"{{os.getpid()}}\\n")


if name == "srun":
    log(name, *argv)
    in_the_step()
    while argv[0].startswith("--"):
        argv.pop(0)
    os.execvp(argv[0], argv)
elif name == "scontrol":
    log(name, *argv)
    if argv[:2] == ["show", "hostnames"]:  # as a long list comes: in several writes
        for node in ("node-a", "node-b"):
            print(node, flush=True)
            time.sleep(0.1)
elif name == "scancel":
    log(name, *argv)
    for pid in Path(os.environ["STEP_PIDS"]).read_text().split():
        os.kill(int(pid), signal.SIGTERM)
elif argv[:2] == ["-m", "torch.distributed.run"]:
    timeout = os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
    log("torchrun", f"TORCH_ELASTIC_SHUTDOWN_TIMEOUT={{timeout}}", *argv[2:])
    in_the_step()
    command = argv[argv.index("--no-python") + 1 :]
    trainer = subprocess.Popen(command, env={{**os.environ, "LOCAL_RANK": "0"}})
    signal.signal(signal.SIGTERM, lambda *_: trainer.send_signal(signal.SIGTERM))
    sys.exit(0 if trainer.wait() == 0 else 1)
elif argv[0] == "-c":
    env = {{**os.environ, "PYTHONPATH": os.environ["STUB_PACKAGES"]}}
    os.execve(sys.executable, [sys.executable, *argv], env)
"""
# trainer.train's run(): logs its flags, then ends as TRAINER_ENDS says; "stop" waits for a
# SIGTERM and takes half a second to "write its checkpoint" before it returns 75.
STUB_TRAIN = """import json, os, signal, time
from pathlib import Path


def run(argv):
    with open(os.environ["SHIM_LOG"], "a") as f:
        f.write(json.dumps(["trainer", *argv]) + "\\n")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    Path(os.environ["TRAINER_READY"]).touch()
    ends = os.environ["TRAINER_ENDS"]
    if ends == "stop":
        while not stop:
            time.sleep(0.05)
        time.sleep(0.5)
        return 75
    return {"run-lock-lost": 75, "error": 1, "done": 0}[ends]
"""


class SlurmStandIns:
    """The SLURM script run as `sbatch` would run it, under the stand-ins, in `home`."""

    def __init__(self, home: Path) -> None:
        self.home = home
        tools = home / "bin"
        tools.mkdir()
        self.python = str(tools / "python")
        (tools / "python").write_text(SHIM.format(python=sys.executable))
        (tools / "python").chmod(0o755)
        for name in ("srun", "scancel", "scontrol"):
            (tools / name).symlink_to(tools / "python")
        stubs = home / "stubs" / "trainer"
        stubs.mkdir(parents=True)
        (stubs / "__init__.py").write_text("")
        (stubs / "preemption.py").write_text("PREEMPTED_EXIT_CODE = 75\n")
        (stubs / "train.py").write_text(STUB_TRAIN)
        mine = ("GPUS_PER_NODE", "PORT", "PYTHON", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in mine and not k.startswith("SLURM")},
            "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
            "PYTHON": self.python,
            "SHIM_LOG": str(home / "log"),
            "STEP_PIDS": str(home / "step.pids"),
            "STUB_PACKAGES": str(home / "stubs"),
            "TRAINER_READY": str(home / "ready"),
            "SHARDS": "s3://bucket/shards",
            "RUN_DIR": "s3://bucket/runs/base128",
            "SLURM_JOB_NODELIST": "node-[a-b]",
            "SLURM_NNODES": "2",
            "SLURM_JOB_ID": "4242",
        }

    def start(self, ends: str, gpus_on_node: str | None = "4") -> subprocess.Popen:
        """The job with the header's flags; its trainer ends as `ends` says (STUB_TRAIN)."""
        env = {**self.env, "TRAINER_ENDS": ends}
        if gpus_on_node is not None:
            env["SLURM_GPUS_ON_NODE"] = gpus_on_node
        # cwd: no trainer package there for the trainer lines' `python -c` to find first.
        return subprocess.Popen(
            ["bash", SBATCH, *sbatch_example_flags()],
            env=env,
            cwd=self.home,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait_for_the_trainer(self, job: subprocess.Popen) -> None:
        deadline = time.monotonic() + 60
        while not (self.home / "ready").exists():
            assert job.poll() is None, job.communicate()[0]
            assert time.monotonic() < deadline, "the stand-in trainer never started"
            time.sleep(0.05)

    def records(self) -> list[list[str]]:
        return [json.loads(line) for line in (self.home / "log").read_text().splitlines()]

    def step_pids(self) -> list[int]:
        return [int(pid) for pid in (self.home / "step.pids").read_text().split()]


@pytest.fixture
def slurm(tmp_path) -> SlurmStandIns:
    return SlurmStandIns(tmp_path)


def finish(job: subprocess.Popen) -> tuple[int, list[str]]:
    output, _ = job.communicate(timeout=60)
    return job.returncode, output.splitlines()


def test_the_slurm_script_checkpoints_and_requeues_itself_at_the_time_limit_warning(slurm):
    """SIGUSR1 (--signal=B:USR1@180): SIGTERM to the step, the trainer's 75 through torchrun's
    1, then `scontrol requeue` and exit 0. Every command the job ran, with its arguments."""
    job = slurm.start("stop")
    slurm.wait_for_the_trainer(job)
    job.send_signal(signal.SIGUSR1)
    code, output = finish(job)
    assert (code, output) == (
        0,
        [
            "time limit near: asking the trainers to checkpoint and stop",
            "stopped at a checkpoint: requeueing job 4242",
        ],
    )
    flags = sbatch_example_flags()
    assert flags[:2] == ["--max-seq-length", "128"]  # phase 1's shards, not "which length?"
    srun, torchrun, trainer = slurm.records()[1:4]
    trainer_lines = torchrun[15]
    assert torchrun == [
        "torchrun",
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=150",
        *("--nnodes", "2", "--nproc-per-node", "4"),  # SLURM_GPUS_ON_NODE's 4
        *("--rdzv-backend", "c10d", "--rdzv-endpoint", "node-a:29500", "--rdzv-id", "4242"),
        *("--no-python", slurm.python, "-c", trainer_lines),
        *("--shards", "s3://bucket/shards", "--output", "s3://bucket/runs/base128"),
        "--resume",
        *flags,
    ]
    # The trainer lines are the Kubernetes pod script's.
    (container,) = k8s_job()["spec"]["template"]["spec"]["containers"]
    assert re.search(r"trainer='(.*?)'", container["args"][0], re.S)[1] == trainer_lines
    assert srun[:5] == ["srun", "--kill-on-bad-exit=0", "--cpu-bind=none", "bash", "-c"]
    assert srun[6:] == ["bertkit-node", slurm.python, "-m", "torch.distributed.run", *torchrun[2:]]
    assert trainer == ["trainer", *torchrun[16:]]
    assert slurm.records()[0] == ["scontrol", "show", "hostnames", "node-[a-b]"]
    assert slurm.records()[4:] == [
        ["scancel", "--signal=TERM", "4242.0"],
        ["scontrol", "requeue", "4242"],
    ]


def test_the_slurm_script_waits_for_the_checkpoint_and_exits_75_when_stopped(slurm):
    """`scancel` or the scheduler's preemption: SIGTERM to every process of the job, the batch
    script's too. It waited for the trainer's checkpoint (without its trap bash ends at once,
    143, and the job with it) and exits 75, which a cluster requeues on (RequeueExit=75);
    nothing more is sent to the step, and it does not requeue itself."""
    job = slurm.start("stop")
    slurm.wait_for_the_trainer(job)
    job.send_signal(signal.SIGTERM)
    for pid in slurm.step_pids():
        os.kill(pid, signal.SIGTERM)
    code, output = finish(job)
    assert (code, output) == (
        75,
        [
            "SIGTERM: waiting for the trainers to checkpoint and stop",
            "stopped at a checkpoint, or the run lock lost: exit 75 (--resume goes on)",
        ],
    )
    assert [record[0] for record in slurm.records()] == ["scontrol", "srun", "torchrun", "trainer"]


@pytest.mark.parametrize(
    ("ends", "code", "output", "gpus_on_node", "nproc"),
    [
        # The trainer's run lock lost: 75, as the trainer exits, not torchrun's 1.
        (
            "run-lock-lost",
            75,
            ["stopped at a checkpoint, or the run lock lost: exit 75 (--resume goes on)"],
            "4",
            "4",
        ),
        ("error", 1, [], "4", "4"),
        # No SLURM_GPUS_ON_NODE (no GPUs asked for): 8, the script's default.
        ("done", 0, [], None, "8"),
    ],
)
def test_the_slurm_script_exits_with_the_trainers_code(
    slurm, ends, code, output, gpus_on_node, nproc
):
    job = slurm.start(ends, gpus_on_node)
    assert finish(job) == (code, output)
    torchrun = slurm.records()[2]
    assert torchrun[4:6] == ["--nproc-per-node", nproc]
    assert [record[0] for record in slurm.records()] == ["scontrol", "srun", "torchrun", "trainer"]
