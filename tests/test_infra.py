"""infra/dataflow: the Dockerfile and scripts pass hadolint and shellcheck, the Flex Template
metadata is what the commands take, and the launcher program runs a real stage. The training
recipes (infra/docker, infra/slurm, infra/k8s; their lint and real CPU runs are
tests/test_launch_recipes.py's): the SLURM script run under stand-in SLURM tools, torchrun and
trainer for every way a job ends, the flags the recipes and docs/training.md pass, the Job's
retries and resources, and the image's filters run on the real constraints and pyproject."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from pipelines import dataflow
from pipelines.dataflow import STAGES, template_argv, template_metadata
from schemas.manifest import MANIFEST_NAME
from trainer.config import parse_arguments

ROOT = Path(__file__).resolve().parents[1]
INFRA = ROOT / "infra" / "dataflow"
BIN = Path(sys.executable).parent
DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"
SBATCH = ROOT / "infra" / "slurm" / "train.sbatch"
K8S = ROOT / "infra" / "k8s" / "train.yaml"
TRAINING_MD = ROOT / "docs" / "training.md"


def test_the_dockerfile_passes_hadolint():
    result = subprocess.run(
        [BIN / "hadolint", INFRA / "Dockerfile"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, "")


def test_the_scripts_pass_shellcheck():
    scripts = sorted(INFRA.glob("*.sh"))
    assert [s.name for s in scripts] == ["build.sh", "run.sh", "run_chain.sh"]
    result = subprocess.run(
        [BIN / "shellcheck", *scripts, INFRA / "arguments.bash"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "")
    assert all(os.access(script, os.X_OK) for script in scripts)


def test_the_image_is_beam_s_sdk_image_at_the_pinned_version():
    dockerfile = (INFRA / "Dockerfile").read_text()
    pinned = re.search(r"^apache-beam==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pinned is not None
    assert f"ARG BEAM_VERSION={pinned.group(1)}\n" in dockerfile
    assert "FROM apache/beam_python3.11_sdk:${BEAM_VERSION}\n" in dockerfile
    assert "-c /template/constraints.txt /template/bertkit-*.whl" in dockerfile
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in dockerfile  # how Dataflow starts workers
    assert "ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/main.py" in dockerfile


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_committed_template_metadata_is_what_the_command_takes(stage):
    committed = json.loads((INFRA / "metadata" / f"{stage}.json").read_text())
    assert committed == template_metadata(STAGES[stage]), (
        "infra/dataflow/metadata is stale: run `python -m pipelines.dataflow "
        "infra/dataflow/metadata`"
    )


def test_template_metadata_lists_every_flag_with_its_help():
    metadata = template_metadata(STAGES["wikipedia"])
    assert metadata["name"] == "bertkit-wikipedia"
    assert [p["name"] for p in metadata["parameters"]] == [
        "input",
        "output",
        "overwrite",
        "file_mb",
        "min_paragraph_words",
        "split_mb",
    ]
    assert metadata["parameters"][0] == {
        "name": "input",
        "label": "Input",
        "isOptional": False,
        "helpText": "input files or globs (repeatable): local, gs://, s3://; several as a "
        "comma list",
    }
    assert metadata["parameters"][2]["regexes"] == ["^(true|false)$"]
    examples = [p["name"] for p in template_metadata(STAGES["examples"])["parameters"]]
    assert examples[:5] == ["documents", "vocab", "output", "cased", "max_seq_length"]
    cased = template_metadata(STAGES["examples"])["parameters"][3]
    assert (cased["regexes"], cased["isOptional"]) == (["^(true|false)$"], True)


def test_template_flags_become_the_command_s():
    stage = STAGES["examples"]
    assert template_argv(
        stage,
        [
            "--documents=gs://b/documents/enwiki,gs://b/documents/books",
            "--vocab=gs://b/vocab",
            "--overwrite=true",
            "--whole_word_mask=false",
            "--cased=false",
            "--max_seq_length=128,512",
            "--runner=DataflowRunner",
            "--project=p",
        ],
    ) == [
        "--documents=gs://b/documents/enwiki",
        "--documents=gs://b/documents/books",
        "--vocab=gs://b/vocab",
        "--overwrite",
        "--no-whole_word_mask",
        "--no-cased",
        "--max_seq_length=128,512",
        "--runner=DataflowRunner",
        "--project=p",
    ]
    with pytest.raises(SystemExit, match=r"--overwrite=yes: a yes/no parameter takes true"):
        template_argv(stage, ["--overwrite=yes"])
    with pytest.raises(
        SystemExit,
        match=r"BERTKIT_STAGE='train': not a Beam stage; one of "
        r"wikipedia, books, corpus, dedup, vocab, examples, chain",
    ):
        dataflow.launch("train", [])


def test_the_launcher_program_runs_a_stage_on_template_flags(tmp_path):
    """infra/dataflow/main.py as the template launcher runs it: BERTKIT_STAGE from the spec,
    every parameter as --name=value."""
    lines = [
        f"Book line {i}: the quick brown fox jumps over the lazy dog again and again."
        for i in range(3)
    ]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            INFRA / "main.py",
            f"--input={tmp_path / 'corpus.txt'}",
            f"--output={out}",
            "--format=lines",
            "--overwrite=false",
            "--lines_per_document=2",
        ],
        env={**os.environ, "BERTKIT_STAGE": "books", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["counts"]["documents"] == 2  # 3 lines, 2 per document


# Stand-ins for the tools build.sh and run.sh call, logging their arguments: gcloud keeps the
# template specs it "builds" (the image they name, as `--print-only` shows gcloud writes
# them) and refuses --env beside --image, as gcloud 528 does.
FAKE_GCLOUD = r"""#!/usr/bin/env bash
echo "gcloud $*" >> "$FAKE_LOG"
if [ "$1 $2 $3" = "dataflow flex-template build" ]; then
  spec=$4 image=""
  shift 4
  while [ $# -gt 0 ]; do
    case $1 in
      --image) image=$2 ;;
      --env) echo "ERROR: --env needs --flex-template-base-image" >&2; exit 2 ;;
    esac
    shift
  done
  printf '{"image": "%s", "sdkInfo": {"language": "PYTHON"}}' "$image" \
    > "$FAKE_BUCKET/$(basename "$spec")"
elif [ "$1 $2" = "storage cat" ]; then
  cat "$FAKE_BUCKET/$(basename "$3")"
elif [ "$1 $2 $3" = "dataflow flex-template run" ]; then
  echo 2026-11-25_01_02_03-123
fi
"""
FAKE_DOCKER = r"""#!/usr/bin/env bash
echo "docker $*" >> "$FAKE_LOG"
if [ "$1 ${*: -1}" = "build -" ]; then sed 's/^/  /' >> "$FAKE_LOG"; fi
"""
FAKE_PYTHON = r"""#!/usr/bin/env bash
if [ "$1" = "-m" ]; then echo "python $*" >> "$FAKE_LOG"; exit 0; fi
exec "$REAL_PYTHON" "$@"
"""


def test_run_sh_launches_on_the_image_build_sh_made_in_any_repository(tmp_path):
    """build.sh with a REPOSITORY, then run.sh: the template names its stage's tag (which
    sets BERTKIT_STAGE), and the job's workers get that image from the template."""
    checkout = tmp_path / "checkout"  # a copy: build.sh cds to its checkout and writes dist/
    (checkout / "infra").mkdir(parents=True)
    shutil.copytree(INFRA, checkout / "infra" / "dataflow")
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, checkout / name)
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, text in [("gcloud", FAKE_GCLOUD), ("docker", FAKE_DOCKER), ("python", FAKE_PYTHON)]:
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    (tmp_path / "bucket").mkdir()
    log = tmp_path / "log"
    env = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "FAKE_BUCKET": str(tmp_path / "bucket"),
        "REAL_PYTHON": sys.executable,
    }
    script = checkout / "infra" / "dataflow"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*args], env=env, capture_output=True, text=True, check=False)

    built = run(str(script / "build.sh"), "proj", "europe-west4", "gs://b", "my-repo")
    assert built.returncode == 0, built.stderr
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    image = f"europe-west4-docker.pkg.dev/proj/my-repo/bertkit:{version}"
    calls = log.read_text()
    assert f"docker push {image}\n" in calls
    tag = f"  ENV BERTKIT_STAGE=books BERTKIT_IMAGE={image}-books\n"
    assert f"docker build -t {image}-books -\n  FROM {image}\n{tag}" in calls
    assert json.loads((tmp_path / "bucket" / "books.json").read_text())["image"] == (
        f"{image}-books"
    )
    assert sorted(p.name for p in (tmp_path / "bucket").iterdir()) == [
        f"{stage}.json" for stage in sorted(STAGES)
    ]

    launched = run(
        str(script / "run.sh"),
        "proj",
        "europe-west4",
        "gs://b",
        "books",
        "input=gs://b/books/*.txt",
        "output=gs://b/documents/books",
    )
    assert (launched.returncode, launched.stdout) == (0, "2026-11-25_01_02_03-123\n")
    (call,) = [line for line in log.read_text().splitlines() if "flex-template run" in line]
    assert "--template-file-gcs-location gs://b/templates/books.json" in call
    assert call.endswith(
        f"--parameters ^~^sdk_container_image={image}-books~input=gs://b/books/*.txt"
        "~output=gs://b/documents/books --format value(job.id)"
    )

    refused = run(str(script / "run.sh"), "proj", "europe-west4", "gs://b", "train")
    assert refused.returncode == 2
    assert (
        "stage train: not a Beam stage; one of wikipedia, books, corpus, dedup, vocab, examples, chain"
        in (refused.stderr)
    )


# The training recipes. ------------------------------------------------------------------


def logical_lines(text: str) -> list[str]:
    """Shell lines with their backslash continuations joined."""
    return text.replace("\\\n", " ").splitlines()


def sbatch_example_flags() -> list[str]:
    """The training flags of the command in the SLURM script's header."""
    header = "\n".join(
        line.removeprefix("#").strip() for line in SBATCH.read_text().splitlines()[4:8]
    )
    (command,) = [line for line in logical_lines(header) if "sbatch" in line]
    words = shlex.split(command)
    return words[words.index("infra/slurm/train.sbatch") + 1 :]


def k8s_job() -> dict:
    return list(yaml.safe_load_all(K8S.read_text()))[2]


def parsed(flags: list[str]):
    """The TrainConfig that `bertkit train` makes of these flags (SystemExit on a bad one)."""
    return parse_arguments(
        ["--shards", "s3://bucket/shards", "--output", "s3://bucket/runs/base128", *flags]
    )


def test_the_job_retries_each_pod_three_times():
    """One crash fails every pod of the static rendezvous (the others time out): retries are
    counted per index, 3 each, the Job failing with the first index past them; backoffLimit,
    for a cluster without per-index limits, is the same 3 crashes of all NODES pods."""
    job = k8s_job()
    spec = job["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    nodes = int(env["NODES"])
    assert (spec["completions"], spec["parallelism"]) == (nodes, nodes)
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == (3, 0)
    assert spec["backoffLimit"] == nodes * spec["backoffLimitPerIndex"] == 12


def gibibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()
    return int(number) / (1024 if unit == "Mi" else 1)


def test_the_training_pods_request_cpu_and_memory():
    """Requests make the pod Burstable, not BestEffort (evicted first); the memory limit is
    the request, and holds the memory-backed /dev/shm besides the processes."""
    pod = k8s_job()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    resources = container["resources"]
    assert resources == {
        "requests": {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": 8},
        "limits": {"memory": "192Gi", "nvidia.com/gpu": 8},
    }
    assert resources["requests"]["nvidia.com/gpu"] == int(env["GPUS_PER_NODE"])
    (shm,) = [volume for volume in pod["volumes"] if volume["name"] == "shm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    workers = parsed(container["args"][2:]).num_workers
    # a core for each trainer and loader worker, and 8 spare; 16 GiB a trainer, 1 a worker
    gpus = int(env["GPUS_PER_NODE"])
    assert int(resources["requests"]["cpu"]) == gpus * (1 + workers) + 8
    processes = gpus * 16 + gpus * workers * 1
    assert gibibytes(resources["limits"]["memory"]) >= processes + gibibytes(
        shm["emptyDir"]["sizeLimit"]
    )
    assert "caps terminationGracePeriodSeconds (on GKE spot nodes 30 s" in K8S.read_text()


def dockerfile_runs() -> list[str]:
    """The Dockerfile's RUN instructions, their lines joined as docker joins them."""
    text = DOCKERFILE.read_text().replace("\\\n", "")
    return [" ".join(run.split()) for run in re.findall(r"^RUN (.*)$", text, re.M)]


def test_the_image_drops_the_pins_of_torch_and_what_torch_requires(tmp_path):
    """The base image's CUDA torch stays, and so do the triton and nvidia-* it requires:
    their pins (the CPU build's versions) are left out of the image's constraints, and out
    of docs/gpu.md's, which is the same filter. Run on constraints.txt with an nvidia pin
    added, as a later torch's would be."""
    dependencies = dockerfile_runs()[0]
    grep = dependencies.split(" && ")[0]
    assert grep == (
        "grep -v -E '^(torch|triton|nvidia-[^=]*)==' constraints.txt > constraints-image.txt"
    )
    gpu_md = (ROOT / "docs" / "gpu.md").read_text()
    assert grep.replace("constraints-image.txt", "constraints-gpu.txt") + "\n" in gpu_md
    pins = (ROOT / "constraints.txt").read_text() + "nvidia-nccl-cu12==2.27.3\n"
    (tmp_path / "constraints.txt").write_text(pins)
    subprocess.run(["sh", "-c", grep], cwd=tmp_path, check=True)
    kept = (tmp_path / "constraints-image.txt").read_text().splitlines()
    dropped = [line for line in pins.splitlines() if line not in kept]
    assert dropped == ["torch==2.13.0", "triton==3.6.0", "nvidia-nccl-cu12==2.27.3"]
    assert "torchao==0.18.0" in kept and len(kept) == len(pins.splitlines()) - 3


def test_the_image_installs_the_dependencies_in_a_layer_before_the_wheel(tmp_path):
    """bertkit's requirements and its image extras (read from pyproject.toml) install before
    the wheel is copied in, so a code change reuses that layer; the wheel then installs with
    the same extras and constraints, which it finds satisfied."""
    text = DOCKERFILE.read_text()
    assert text.index("-r requirements-image.txt") < text.index("COPY dist/bertkit-*.whl")
    dependencies, wheel = dockerfile_runs()[:2]
    read = dependencies.split(" && ")[1]
    assert read.startswith('python -c "') and read.endswith(" > requirements-image.txt")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    subprocess.run(
        ["sh", "-c", read.replace("python", sys.executable, 1)], cwd=tmp_path, check=True
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = re.search(r'"\$\{wheel\}\[([a-z,]+)\]"', wheel)[1].split(",")
    assert extras == ["train", "aws", "gcp"]
    assert (tmp_path / "requirements-image.txt").read_text().splitlines() == [
        *project["dependencies"],
        *(r for extra in extras for r in project["optional-dependencies"][extra]),
    ]
    assert "pip install --no-cache-dir -c constraints-image.txt -r requirements-image.txt" in (
        dependencies
    )


def test_the_image_refuses_more_than_one_wheel(tmp_path):
    """dist/ with an older build's wheel beside the new one: the build stops, naming both,
    instead of installing both in the glob's order. The docs' build command empties dist/."""
    wheel = dockerfile_runs()[1]
    guard = wheel.split(" && pip install")[0] + ' && echo "installing $wheel"'
    older, newer = "bertkit-0.1.0-py3-none-any.whl", "bertkit-0.2.0-py3-none-any.whl"
    (tmp_path / older).touch()
    one = subprocess.run(["sh", "-c", guard], cwd=tmp_path, capture_output=True, text=True)
    assert (one.returncode, one.stdout) == (0, f"installing {older}\n")
    (tmp_path / newer).touch()
    two = subprocess.run(["sh", "-c", guard], cwd=tmp_path, capture_output=True, text=True)
    assert (two.returncode, two.stderr) == (
        1,
        f"dist/ holds 2 bertkit wheels ({older} {newer}): rm -f dist/bertkit-*.whl and build one\n",
    )
    build = "rm -f dist/bertkit-*.whl && python -m pip wheel --no-deps -w dist . && "
    assert f"#   {build}\\\n" in DOCKERFILE.read_text()
    assert f"\n{build}\\\n" in TRAINING_MD.read_text()


def recipe(config) -> dict:
    names = (
        "max_seq_length model micro_batch_size global_batch_size optimizer lr warmup_steps "
        "max_steps decay_power shuffle_buffer compile"
    )
    return {name: getattr(config, name) for name in names.split()}


PHASE_1 = {
    "max_seq_length": 128,
    "model": "base",
    "micro_batch_size": 128,
    "global_batch_size": 8192,
    "optimizer": "lamb",
    "lr": 6e-3,
    "warmup_steps": 2000,
    "max_steps": 7038,
    "decay_power": 0.5,
    "shuffle_buffer": 65536,  # 8 global batches: trainer/order.py's shuffle_note says none
    "compile": True,
}


def test_every_phase_1_recipe_passes_the_same_flags_with_its_sequence_length():
    """The examples stage writes seq128/ and seq512/ into one shards directory, and the
    trainer refuses (exit 2) to choose without --max-seq-length: every phase-1 command on
    s3://bucket/shards names 128, and they all train the same recipe (LAMB's decay power
    0.5 included). Each parses as `bertkit train`'s flags."""
    (container,) = k8s_job()["spec"]["template"]["spec"]["containers"]
    assert recipe(parsed(container["args"][2:])) == PHASE_1
    assert recipe(parsed(sbatch_example_flags())) == PHASE_1
    commands = [
        line
        for block in re.findall(r"```bash\n(.*?)```", TRAINING_MD.read_text(), re.S)
        for line in logical_lines(block)
        if "s3://bucket/shards" in line
    ]
    seen = []
    for command in commands:
        words = shlex.split(command.split("#")[0])
        if "…" in words:  # phase 2's sketch: --max-seq-length 512 and "…"
            assert words[words.index("--max-seq-length") + 1] == "512"
            continue
        if "infra/slurm/train.sbatch" in words:
            flags = words[words.index("infra/slurm/train.sbatch") + 1 :]
        else:
            flags = words[words.index("trainer.train") + 1 :]
        seen.append(recipe(parsed(flags)))
    assert seen == [PHASE_1, PHASE_1]  # torchrun's, sbatch's


def test_the_build_context_is_what_the_dockerfiles_copy() -> None:
    """.dockerignore sends only what a Dockerfile COPYs from the checkout (every other file
    stays out: .venv/, out/, .git/), and nothing a COPY needs is left out."""
    copied = set()
    for dockerfile in (DOCKERFILE, ROOT / "infra" / "dataflow" / "Dockerfile"):
        for line in logical_lines(dockerfile.read_text()):
            words = line.split()
            if words and words[0] == "COPY" and not words[1].startswith("--from"):
                copied.update(words[1:-1])
    kept = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert kept[0] == "*"  # everything out, then what is copied back in
    assert (
        {line.removeprefix("!") for line in kept[1:]}
        == copied
        == {
            "constraints.txt",
            "pyproject.toml",
            "dist/bertkit-*.whl",
            "infra/dataflow/main.py",
        }
    )
