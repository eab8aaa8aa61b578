"""The training launch recipes of infra/: the image passes hadolint, the SLURM script and the
Kubernetes pod script pass shellcheck, the Kubernetes objects validate strictly against
Kubernetes 1.31's schemas (kubernetes-validate, offline), and the SLURM script runs for real
on this machine: two CPU trainers under torchrun, with `srun`, `scancel` and `scontrol`
stood in by small scripts (CI has no SLURM), stopped by the USR1 warning, checkpointed,
requeued. (By hand, the same script ran under a real one-node SLURM 22.05 from Debian's
slurm-wlm: USR1 to the batch shell, the trainers stopped at step 4 with a checkpoint, the job
requeued itself and its second run resumed to the end.) The Kubernetes pod script runs for
real too, two CPU trainers on one "node": stopped at a checkpoint it exits 75, the code its
podFailurePolicy ignores."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.s3server import free_port
from tests.test_preemption import wait_for_step
from tests.test_train import TINY
from trainer.run.checkpoints import latest_checkpoint

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"
SBATCH = ROOT / "infra" / "slurm" / "train.sbatch"
K8S = ROOT / "infra" / "k8s" / "train.yaml"


def lint(tool: str, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / tool, *paths], capture_output=True, text=True, check=False)


def test_the_training_image_passes_hadolint_and_keeps_the_base_image_s_torch():
    result = lint("hadolint", DOCKERFILE)
    assert (result.returncode, result.stdout) == (0, "")
    text = DOCKERFILE.read_text()
    base = re.search(
        r"^ARG BASE_IMAGE=pytorch/pytorch:(\d+)\.(\d+)\.\d+-cuda[\d.]+-cudnn\d+-runtime$",
        text,
        re.M,
    )
    # torchrun reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT, which both recipes set, from torch 2.12 on;
    # the build itself checks the base image's torchrun has it.
    assert base and (int(base[1]), int(base[2])) >= (2, 12)
    assert "'shutdown_timeout' in c.__dataclass_fields__" in text
    assert (
        "grep -v -E '^(torch|triton|nvidia-[^=]*)==' constraints.txt > constraints-image.txt"
        in (text)
    )
    assert '"${wheel}[train,aws,gcp]"' in text and "USER 1000" in text


def test_the_slurm_script_passes_shellcheck_and_asks_for_what_preemption_needs():
    result = lint("shellcheck", SBATCH)
    assert (result.returncode, result.stdout) == (0, "")
    assert os.access(SBATCH, os.X_OK)
    directives = re.findall(r"^#SBATCH (\S+)$", SBATCH.read_text(), re.M)
    for needed in ("--ntasks-per-node=1", "--signal=B:USR1@180", "--requeue"):
        assert needed in directives


def test_the_kubernetes_job_validates_strictly_and_its_script_passes_shellcheck(tmp_path):
    result = subprocess.run(
        [BIN / "kubernetes-validate", "--strict", "-k", "1.31.0", K8S],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("passed for resource") == 3
    service, claim, job = yaml.safe_load_all(K8S.read_text())
    assert (service["kind"], claim["kind"], job["kind"]) == (
        "Service",
        "PersistentVolumeClaim",
        "Job",
    )
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert (
        service["spec"]["clusterIP"] == "None" and pod["subdomain"] == service["metadata"]["name"]
    )
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
    (container,) = pod["containers"]
    script = container["args"][0]
    # Pod 0's DNS name under the headless Service is the rendezvous address.
    assert f"--master-addr {job['metadata']['name']}-0.{service['metadata']['name']}" in script
    assert '--node-rank "$JOB_COMPLETION_INDEX"' in script
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    path = tmp_path / "pod.sh"
    path.write_text("#!/bin/bash\n" + script)
    result = lint("shellcheck", path)
    assert (result.returncode, result.stdout) == (0, "")


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)"
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


# slow: three launches of torchrun and two trainers (about 50 CPU-seconds); the pod script's
# lint and the Job's schema check above stay in the default run.
@pytest.mark.slow
def test_the_kubernetes_pod_exits_75_when_its_trainers_stop_at_a_checkpoint(
    sample_shards, tmp_path
):
    """torchrun ends with 1 when its trainers exit 75; the pod script makes that 75 again, the
    code the Job's podFailurePolicy ignores, whether the signal came to this pod (eviction) or
    only to its trainers (another pod evicted: every rank stops at the same step). Any other
    failure keeps torchrun's code and counts against backoffLimit."""
    job = list(yaml.safe_load_all(K8S.read_text()))[2]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    script, name = container["args"][:2]
    script = script.replace("bertkit-train-0.bertkit-train", "127.0.0.1")
    assert {
        "action": "Ignore",
        "onExitCodes": {"containerName": container["name"], "operator": "In", "values": [75]},
    } in job["spec"]["podFailurePolicy"]["rules"]
    run_dir = tmp_path / "run"
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "BERTKIT_PROGRESS": "0",
        "NODES": "1",
        "GPUS_PER_NODE": "2",
        "JOB_COMPLETION_INDEX": "0",
        "SHARDS": str(sample_shards),
        "RUN_DIR": str(run_dir),
    }
    flags = [
        *TINY,
        "--max-steps",
        "200",
        "--warmup-steps",
        "2",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "1000",
        "--global-batch-size",
        "64",
        "--num-workers",
        "1",
    ]

    def start(*extra: str) -> subprocess.Popen:
        pod = script.replace("--master-port 29500", f"--master-port {free_port()}")
        return subprocess.Popen(
            ["bash", "-c", pod, name, *flags, *extra],
            env=env,
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def stopped_step(pod: subprocess.Popen) -> int:
        output, _ = pod.communicate(timeout=180)
        assert pod.returncode == 75, output[-3000:]
        assert "stopped at a checkpoint: exit 75" in output
        return int(latest_checkpoint(run_dir / "checkpoints").stem.removeprefix("step-"))

    # Another pod evicted: only the trainers get the stop; their torchrun ends with 1.
    pod = start()
    wait_for_step(run_dir, 3, pod)
    (launcher,) = children(pod.pid)
    trainers = children(launcher)
    assert len(trainers) == 2
    for trainer in trainers:
        os.kill(trainer, signal.SIGTERM)
    first = stopped_step(pod)
    # This pod evicted: Kubernetes signals its process 1, the script; the rerun resumed.
    pod = start()
    wait_for_step(run_dir, first + 2, pod)
    pod.send_signal(signal.SIGTERM)
    assert stopped_step(pod) >= first + 2
    # A failure is not a stop: torchrun's 1 stays.
    failed = start("--no-such-flag")
    output, _ = failed.communicate(timeout=180)
    assert failed.returncode == 1, output[-3000:]


STUBS = {
    # `srun [flags] command…`: one task, here.
    "srun": '#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nexec "$@"\n',
    # `scontrol show hostnames LIST` and `scontrol requeue JOB`.
    "scontrol": "#!/bin/bash\nif [[ $1 == show ]]; then echo 127.0.0.1; "
    'else echo "scontrol $*" >> "$STUB_LOG"; fi\n',
    # `scancel --signal=TERM JOB.0`: the signal to the step's torchrun, which passes it on.
    "scancel": '#!/bin/bash\necho "scancel $*" >> "$STUB_LOG"\n'
    'pkill -TERM -f -- "--rdzv-id $SLURM_JOB_ID"\n',
}


# slow: two launches of torchrun and two trainers; the script's lint stays in the default run.
@pytest.mark.slow
def test_the_slurm_script_runs_two_trainers_and_requeues_at_the_time_limit_warning(
    sample_shards, tmp_path
):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    run_dir, log = tmp_path / "run", tmp_path / "scontrol.log"
    env = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "BERTKIT_PROGRESS": "0",
        "SHARDS": str(sample_shards),
        "RUN_DIR": str(run_dir),
        "GPUS_PER_NODE": "2",
        "PORT": str(free_port()),
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_NNODES": "1",
        "SLURM_JOB_ID": "4242",
        "STUB_LOG": str(log),
    }
    flags = [
        *TINY,
        "--max-steps",
        "200",
        "--warmup-steps",
        "2",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "1000",
        "--global-batch-size",
        "64",
        "--num-workers",
        "1",
    ]
    job = subprocess.Popen(
        ["bash", SBATCH, *flags],
        env=env,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_for_step(run_dir, 3, job)
    job.send_signal(signal.SIGUSR1)  # what --signal=B:USR1@180 sends the batch script
    output, _ = job.communicate(timeout=180)
    assert job.returncode == 0, output[-3000:]
    assert "stopped at a checkpoint: requeueing job 4242" in output
    assert log.read_text() == "scancel --signal=TERM 4242.0\nscontrol requeue 4242\n"
    checkpoint = latest_checkpoint(run_dir / "checkpoints")
    assert checkpoint is not None and re.fullmatch(r"step-0+\d+\.pt", checkpoint.name)
    # The requeued job (the same command, --resume as on the first try) goes on from the
    # checkpoint: one more step, then it ends.
    step = int(checkpoint.stem.removeprefix("step-"))
    env["PORT"] = str(free_port())
    again = subprocess.run(
        ["bash", SBATCH, *flags, "--stop-at-step", str(step + 1)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert latest_checkpoint(run_dir / "checkpoints").name == f"step-{step + 1:08d}.pt"
