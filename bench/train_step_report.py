"""bench.train_step's report: the table of rows, the MFU verdict against the target, and
the results file. Not a command: `python -m bench.train_step` prints these.
"""

from __future__ import annotations

# First: without the train extra, one line naming the install command (bench/train_extra.py).
import bench.train_extra  # noqa: F401

# isort: split
import argparse
import json
import os
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import torch

from bench import measure
from bench.measure import fmt, importlib_version

if TYPE_CHECKING:
    from bench.train_step import RowResult, RowSpec
    from bench.train_step_batches import Batches

MFU_TARGET = 0.45  # BERT-base, seq 128, H100
TARGET_MODEL = "base"


def print_results(results: list[RowResult], device: torch.device) -> None:
    headers = [
        "model",
        "impl",
        "mode",
        "optimizer",
        "buckets",
        "unpad",
        "fp8",
        "ffn epilogue",
        "add-norm",
        "params M",
        "batch",
        "padded len",
        "preds/seq",
        "warmup s",
        "step ms",
        "seq/s",
        "tokens/s",
        "model TFLOP/s",
        "MFU",
        "÷ transformers",
    ]
    if device.type == "cuda":
        headers.append("peak mem GiB")
    rows = []
    for result in results:
        labels = [
            result.model,
            result.implementation,
            result.spec.mode,
            result.optimizer,
            str(result.bucket_window or "off"),
            result.unpad if result.implementation == "bertkit" else "-",
            result.fp8 if result.implementation == "bertkit" else "-",
            result.ffn if result.implementation == "bertkit" else "-",
            result.add_norm if result.implementation == "bertkit" else "-",
        ]
        if not result.ok:
            rows.append([*labels, "FAILED", *["n/a"] * (len(headers) - len(labels) - 1)])
            continue
        m = result.medians
        row = [
            *labels,
            fmt(result.parameters / 1e6 if result.parameters else None, ".1f"),
            fmt(result.batch, "d"),
            fmt(result.mean_length, ".1f"),
            fmt(result.predictions_per_seq, ".1f"),
            fmt(result.warmup_s, ".1f"),
            fmt(m["step_ms"], ".1f"),
            fmt(m["seq_per_s"], ",.0f"),
            fmt(m["tokens_per_s"], ",.0f"),
            fmt(m["model_tflops"], ".3g"),
            fmt(m["mfu"] * 100 if m["mfu"] is not None else None, ".1f")
            + ("%" if m["mfu"] is not None else ""),
            fmt(result.vs_transformers, ".2f") + ("×" if result.vs_transformers else ""),
        ]
        if device.type == "cuda":
            row.append(fmt(result.peak_memory_gib, ".1f"))
        rows.append(row)
    measure.print_markdown_table(headers, rows, left=7)
    for result in results:
        if not result.ok:
            print(f"{describe_row(result.spec)}: {result.error}")


def compare_with_peers(results: list[RowResult]) -> None:
    """Set each bertkit row's seq/s ÷ its transformers row's, where both ran."""
    done = {r.spec: r for r in results if r.ok}
    for result in results:
        peer = done.get(result.spec.peer())
        if result.ok and result.implementation == "bertkit" and peer is not None:
            result.vs_transformers = result.medians["seq_per_s"] / peer.medians["seq_per_s"]  # type: ignore[operator]


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    cpu = measure.machine_description()["cpu"]
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"CPU: {cpu}, {torch.get_num_threads()} torch threads of {os.cpu_count()} cores, load "
        f"average {load} (torch {torch.__version__})"
    )


def describe_row(spec: RowSpec) -> str:
    buckets = f" buckets {spec.bucket_window}" if spec.bucket_window else ""
    unpad = (
        f" unpad {spec.unpad}" if spec.unpad != "off" and spec.implementation == "bertkit" else ""
    )
    fp8 = f" fp8 {spec.fp8}" if spec.fp8 != "off" else ""
    kernels = (" ffn-epilogue" if spec.ffn == "on" else "") + (
        " add-norm" if spec.add_norm == "on" else ""
    )
    return (
        f"{spec.model} {spec.implementation} {spec.mode} {spec.optimizer}{buckets}{unpad}{fp8}"
        f"{kernels}"
    )


def target_verdict(
    results: list[RowResult], device: torch.device, device_name: str, seq: int
) -> dict[str, Any]:
    base = [
        r
        for r in results
        if r.ok
        and r.model == TARGET_MODEL
        and r.medians.get("mfu")
        and r.implementation == "bertkit"
        and r.fp8 == "off"  # the target is the bf16 step's
    ]
    best = max(base, key=lambda r: r.medians["mfu"] or 0.0, default=None)
    mfu = best.medians["mfu"] if best else None
    on_h100 = device.type == "cuda" and "H100" in device_name.upper()
    if mfu is None:
        note = (
            f"not measured: needs a {TARGET_MODEL} row with a known peak (a GPU in the table "
            "or --peak-tflops)"
        )
    else:
        verdict = "MET" if mfu >= MFU_TARGET else "NOT MET"
        mode = "compiled" if best and best.compiled else "eager"
        note = f"{verdict} ({mfu:.1%}, {TARGET_MODEL} {mode}, seq {seq})"
        if not on_h100:
            note += f"; the target is stated for an H100, this is {device_name}"
    return {"target_mfu": MFU_TARGET, "model": TARGET_MODEL, "best_mfu": mfu, "verdict": note}


def write_results(
    args: argparse.Namespace,
    device_name: str,
    batch: int,
    dtype: str,
    peak: float | None,
    data: Batches,
    results: list[RowResult],
    verdict: dict[str, Any] | None,
    planned: int,
) -> None:
    """The run's results so far as JSON at args.json. Written after every row (`complete`
    False until the last row of the `planned` is in), so a stage its limit stops still keeps
    the rows it finished; replaced whole, so a kill mid-write leaves the last version."""
    payload = {
        "machine": measure.machine_description(
            torch=torch.__version__, transformers=importlib_version("transformers")
        ),
        "device": device_name,
        "config": {
            "seq": args.seq,
            "batch": batch,
            "optimizers": args.optimizers,
            "reference": args.reference,
            "bucket_windows": args.windows,
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "batches": args.batches,
            "compile_mode": args.compile_mode,
            "precision": dtype,
            "hidden_dropout": args.hidden_dropout,
            "attention_dropout": args.attention_dropout,
            "unpad": args.unpads,
            "fp8": args.fp8s,
            "fp8_layers": args.fp8_layers,
            "ffn_epilogue": args.ffns,
            "add_norm": args.add_norms,
            "padding": args.padding,
            "host_batches": args.host_batches,
            "profile_steps": args.profile,
            "dtype": dtype,
            "torch_threads": torch.get_num_threads(),
            "peak_flops": peak,
            "synthetic": data.synthetic,
            "data": data.description,
            "vocab_size": data.vocab_size,
        },
        "rows": [asdict(r) for r in results],
        "rows_planned": planned,
        "complete": len(results) == planned,
        "target": verdict,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    partial = args.json.with_name(args.json.name + ".partial")
    partial.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    partial.replace(args.json)
