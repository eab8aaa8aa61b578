"""Reading a Google TensorFlow BERT checkpoint: bertkit's reader against transformers'.

    python -m bench.tf_checkpoint --tf-python ENV/bin/python [--repeats 3]
    python -m bench.tf_checkpoint --install-into bench/.work   # TensorFlow... installed there

Google released BERT as TensorFlow checkpoints (bert_model.ckpt.*); transformers converts them
with TensorFlow installed (`load_tf_weights_in_bert`, in transformers 4.x, the last to have it),
bertkit reads them with numpy alone (pipelines/io/tf_checkpoint.py). This benchmark runs
transformers from your environment (--tf-python: a python with tensorflow-cpu, transformers
4.x and torch, never bertkit dependencies; or --install-into DIR: a venv DIR/tf-venv of the
versions measured, torch's CPU build), writes into WORKDIR a checkpoint of BERT-base's
shape with the Adam slots a training checkpoint carries
(tests/data/tf_bert_tiny/make_fixture.py --bert-base, random values), then:
- checks that both readers give the same tensors under the same names, bit for bit;
- measures, each in a fresh process, median of --repeats: bertkit's `read_tf_bert`, and
  transformers' `BertForPreTraining(config)` plus `load_tf_weights_in_bert` (what a user of
  transformers runs to get the weights); CPU-seconds and peak RSS.
Results go to WORKDIR/results.json.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from bench.measure import (
    REPO_ROOT,
    argument_parser,
    fmt,
    machine_description,
    measure_command,
    print_table,
    repo_python,
    tail_of,
    write_results,
)
from bench.runs import median_figures
from bench.venvs import Tool, add_tool_arguments, tool_python

# The versions measured (docs/benchmarks.md); torch's CPU build (constraints.txt's version)
# from PyTorch's index: PyPI's Linux torch is the CUDA build, gigabytes of it.
TF_TOOL = Tool(
    name="tf-venv",
    flag="--tf-python",
    what="TensorFlow with transformers 4.x (load_tf_weights_in_bert) and torch",
    packages=(
        "--extra-index-url",
        "https://download.pytorch.org/whl/cpu",
        "tensorflow-cpu==2.21.0",
        "transformers==4.57.6",
        "torch==2.13.0+cpu",
        "safetensors==0.8.0",
    ),
    # transformers before tensorflow, as its own conversion imports them: tensorflow-cpu 2.21
    # imported first makes the import of transformers 4.57 crash (SIGSEGV) here.
    check_code="from transformers import load_tf_weights_in_bert; import tensorflow, torch",
)
_FIXTURE_SCRIPT = REPO_ROOT / "tests" / "data" / "tf_bert_tiny" / "make_fixture.py"

_BERTKIT = """
import sys
from pipelines.io.tf_checkpoint import read_tf_bert
config, tensors = read_tf_bert(sys.argv[1])
if len(sys.argv) > 2:
    from safetensors.numpy import save_file
    save_file(tensors, sys.argv[2])
"""
_TRANSFORMERS = """
import sys
from transformers import BertConfig, BertForPreTraining, load_tf_weights_in_bert
config = BertConfig.from_json_file(sys.argv[1] + "/bert_config.json")
model = BertForPreTraining(config)
load_tf_weights_in_bert(model, config, sys.argv[1] + "/bert_model.ckpt")
if len(sys.argv) > 2:
    model.save_pretrained(sys.argv[2])
"""


def _same_tensors(bertkit: Path, transformers: Path) -> tuple[bool, int]:
    from safetensors.numpy import load_file

    ours, theirs = load_file(str(bertkit)), load_file(str(transformers))
    same = sorted(ours) == sorted(theirs) and all(
        ours[name].dtype == theirs[name].dtype and np.array_equal(ours[name], theirs[name])
        for name in ours
    )
    return same, len(ours)


def main() -> None:
    parser = argument_parser("bench.tf_checkpoint", __doc__)
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "bench/.work/tf_checkpoint")
    parser.add_argument("--repeats", type=int, default=3)
    add_tool_arguments(parser, TF_TOOL)
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    command = "python -m bench.tf_checkpoint"
    tf_python = tool_python(command, TF_TOOL, args.tf_python, args.install_into)
    checkpoint = workdir / "bert_base"
    if not (checkpoint / "bert_model.ckpt.index").exists():
        print(f"writing a BERT-base-shaped checkpoint into {checkpoint}", flush=True)
        subprocess.run(
            [tf_python, str(_FIXTURE_SCRIPT), "--bert-base", str(checkpoint)], check=True
        )
    size_mb = sum(p.stat().st_size for p in checkpoint.glob("bert_model.ckpt.*")) / 1e6

    commands = {
        "bertkit read_tf_bert (numpy)": [repo_python(), "-c", _BERTKIT, str(checkpoint)],
        "transformers load_tf_weights_in_bert (TensorFlow)": [
            tf_python, "-c", _TRANSFORMERS, str(checkpoint)
        ],
    }  # fmt: skip
    saved = {"bertkit": workdir / "bertkit.safetensors", "transformers": workdir / "hf"}
    for (_, command), output in zip(commands.items(), saved.values(), strict=True):
        subprocess.run([*command, str(output)], cwd=REPO_ROOT, check=True, capture_output=True)
    same, count = _same_tensors(saved["bertkit"], saved["transformers"] / "model.safetensors")
    print(f"{count} tensors, bit for bit the same: {same}")

    rows, results = [], {}
    for name, command in commands.items():
        runs = []
        for repeat in range(args.repeats):
            log = workdir / "logs" / f"{name.split()[0]}-{repeat}.log"
            run = measure_command(command, REPO_ROOT, log, timeout_s=900)
            if not run.ok:
                raise SystemExit(f"bench.tf_checkpoint: {name} failed:\n{tail_of(log)}")
            runs.append(run)
        figures = results[name] = median_figures(runs)
        cpu, wall, rss = (figures[f] for f in ("cpu_s", "wall_s", "peak_rss_mib"))
        rows.append([name, fmt(cpu, ".2f"), fmt(wall, ".2f"), fmt(rss, ".0f")])
    print(f"\na BERT-base checkpoint with Adam slots, {size_mb:,.0f} MB; medians of {args.repeats}")
    print_table(["reader", "CPU s", "wall s", "peak RSS MiB"], rows)
    write_results(
        workdir / "results.json",
        {
            "checkpoint_mb": size_mb,
            "tensors": count,
            "same_tensors": same,
            "readers": results,
            "machine": machine_description(),
        },
    )


if __name__ == "__main__":
    main()
