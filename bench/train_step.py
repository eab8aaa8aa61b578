"""Benchmark the training step: sequences/s, tokens/s, model TFLOP/s and MFU of trainer.model.

    python -m bench.train_step                    # CPU: tiny and mini; CUDA: base (+ compiled)
    python -m bench.train_step --model base,large --steps 50 --repeats 5  # on a GPU
    python -m bench.train_step --synthetic        # no shards needed (random batches)
    python -m bench.train_step --model tiny --steps 5 --repeats 1 --json bench/.work/step.json
    python -m bench.train_step --reference --optimizer adamw,lamb   # + transformers, + LAMB
    python -m bench.train_step --seq 512 --batches 32 --bucket-windows 0,32  # length bucketing
    bench/gpu_check.sh OUT_DIR                    # the GPU rows of docs/benchmarks.md

Run from the repository root, after `bertkit demo` (which writes out/demo/shards), or with
--shards DIR or --synthetic.

What is timed: the step `bertkit train` does for one micro-batch, without the data loading:
forward of BertForPreTraining on a collated batch (MODEL_INPUTS), backward, gradient clipping
at 1.0, AdamW step, zero_grad. On CUDA as the trainer runs there: bf16 autocast (--precision
fp16: fp16 autocast with dynamic loss scaling, as the trainer's fp16), fused AdamW, and with
torch.compile the batches padded to --seq (one shape, one graph); on CPU fp32. Like
the trainer's step (tests/test_step_syncs.py), it reads no tensor value back on the host, so
the GPU may run ahead of the host within a timing window.

The batches are real: --batches batches of --batch sequences taken once from the shards'
train split through trainer.data's loader (shuffled, padded to a multiple of 8), moved to the
device up front and cycled, so reading and host-to-device copies are not measured (unless
--host-batches pinned|pageable: then they wait in host memory of that kind and the trainer's
to_device copies them in each step). With --synthetic (or for a --seq the shards lack) they
are random: ids uniform over the vocabulary, every sequence full length (or --padding F: a
share F of the positions padding, 0.18 as the demo's pairs at 512), 15 % of positions
predicted. After --warmup steps (compilation happens there), --repeats windows of --steps
steps are timed, with torch.cuda.synchronize() around each; the table shows the medians.

Model FLOPs per batch are trainer.model.flops_per_sequence on the batch's padded length with
its real predictions (the trainer's accounting); tokens/s counts real (unpadded) tokens. MFU
= achieved model FLOP/s ÷ trainer.metrics.peak_flops(device, "bf16" on CUDA, "fp32" on CPU),
or ÷ --peak-tflops (a CPU has no table entry). On a busy CPU, --threads 1 can be many times
faster than torch's one OpenMP thread per core; the output prints the threads and the load.

Default rows: on CPU tiny and mini at --seq 128, batch 32, eager; on CUDA BERT-base at 128,
batch 256, eager and compiled (--model picks the sizes; --no-compile drops the compiled rows,
--modes compiled the eager ones; --compile-mode as the trainer's: reduce-overhead adds CUDA
graphs, max-autotune tunes the matmuls in the warmup, for minutes, cached where
TORCHINDUCTOR_CACHE_DIR says). --hidden-dropout and --attention-dropout set the rates (0
calls no dropout); --unpad off,on adds a row set per bertkit --unpad value, --fp8
off,tensorwise,rowwise one per bertkit --fp8 recipe (torchao; --fp8-layers as the trainer's),
--ffn-epilogue off,on one without and one with the feed-forward's epilogue kernels (Triton),
--add-norm off,on one without and one with the dropout-add-LayerNorm kernels (Triton),
its MFU against the same bf16 peak.
--optimizer adamw,lamb adds a row per optimizer (bertkit's multi-tensor LAMB, the trainer's
--optimizer lamb). --reference adds, for every row, the same step on transformers'
`BertForPreTraining` (SDPA attention, the same config, batches, autocast, optimizer and
compile setting; labels -100 off the masked positions, as its users pass them, so its MLM
head runs over every position) and prints bertkit ÷ transformers seq/s per row; its FLOPs and
MFU are counted as bertkit's (the useful work), so the MFU columns compare directly.
--bucket-windows 0,32 adds rows per value of the loader's length bucketing (trainer.data,
--bucket-window; 0 = off; real batches): compare tokens/s; compiled rows pad to the quarter
of --seq that holds the batch, as the trainer does. --profile N lists each row's top kernels.
The target: ≥ 45 % MFU for BERT-base on an H100. The demo's shards have their own vocabulary
(8,000 tokens; BERT's is 30,522, --synthetic's default): a smaller MLM decoder than BERT's.
"""

from __future__ import annotations

# First: without the train extra, one line naming the install command (bench/train_extra.py).
import bench.train_extra  # noqa: F401

# isort: split
import argparse
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch

from bench import measure, train_step_args
from bench.gpu_levers import (
    batch_source,
    optimizer_step,
    precision_step,
    print_profile,
    profile_steps,
)
from bench.measure import fmt
from bench.train_step_batches import Batches, real_batches, synthetic_batches
from bench.train_step_report import (
    MFU_TARGET,
    TARGET_MODEL,
    compare_with_peers,
    describe_device,
    describe_row,
    print_results,
    resolve_device,
    target_verdict,
    write_results,
)
from schemas.batch import IGNORE_INDEX, MODEL_INPUTS, BatchField
from trainer.choices import MODEL_SIZES
from trainer.collate import FixedShape, to_device  # the trainer's compile padding
from trainer.compiling import compiled  # the trainer's torch.compile
from trainer.config import dropout_overrides  # the flags' rates as BertConfig fields
from trainer.data import DataConfigError
from trainer.export import hf_config  # transformers' config.json for the same model
from trainer.fp8 import convert_to_fp8, cpu_products
from trainer.metrics import peak_flops
from trainer.model import (
    BertConfig,
    BertForPreTraining,
    batch_flops,  # the trainer's FLOPs of a collated batch
    config_for,
    parameter_count,
)
from trainer.optim import build_optimizer
from trainer.precision import resolve_precision

# --------------------------------------------------------------------------- one row


IMPLEMENTATIONS = ("bertkit", "transformers")


@dataclass(frozen=True)
class RowSpec:
    model: str
    compiled: bool
    optimizer: str = "adamw"
    implementation: str = "bertkit"  # or "transformers": its BertForPreTraining, the peer
    bucket_window: int = 0
    unpad: str = "off"  # bertkit's --unpad (trainer/attention.py); transformers pads too
    fp8: str = "off"  # bertkit's --fp8 (trainer/fp8.py); transformers' rows run without
    ffn: str = "off"  # bertkit's --ffn-epilogue, on or off (trainer/ffn_epilogue.py)
    add_norm: str = "off"  # bertkit's --add-norm, on or off (trainer/add_norm.py)

    @property
    def mode(self) -> str:
        return "compiled" if self.compiled else "eager"

    def peer(self) -> RowSpec:
        """The same row on the other implementation (transformers pads every batch)."""
        other = IMPLEMENTATIONS[1 - IMPLEMENTATIONS.index(self.implementation)]
        return replace(
            self, implementation=other, unpad="off", fp8="off", ffn="off", add_norm="off"
        )


@dataclass
class Window:
    steps: int
    seconds: float
    sequences: int
    tokens: int  # real tokens (attention mask), as the trainer's meter counts them
    flops: float

    def rates(self, peak: float | None) -> dict[str, float | None]:
        flops_per_s = self.flops / self.seconds
        return {
            "step_ms": 1000 * self.seconds / self.steps,
            "seq_per_s": self.sequences / self.seconds,
            "tokens_per_s": self.tokens / self.seconds,
            "model_tflops": flops_per_s / 1e12,
            "mfu": flops_per_s / peak if peak else None,
        }


@dataclass
class RowResult:
    model: str
    compiled: bool
    ok: bool
    optimizer: str = "adamw"
    implementation: str = "bertkit"
    bucket_window: int = 0
    unpad: str = "off"
    fp8: str = "off"
    ffn: str = "off"
    add_norm: str = "off"
    parameters: int | None = None
    batch: int | None = None
    mean_length: float | None = None  # padded length the model computed on
    predictions_per_seq: float | None = None
    warmup_s: float | None = None  # includes compilation
    peak_memory_gib: float | None = None
    medians: dict[str, float | None] = field(default_factory=dict)
    windows: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    vs_transformers: float | None = None  # bertkit seq/s ÷ transformers', on bertkit rows
    profile: list[dict[str, Any]] | None = None  # --profile: the top kernels

    @classmethod
    def of(cls, spec: RowSpec, ok: bool, **measured: Any) -> RowResult:
        """The result of the row `spec`: its fields, and what was measured (or the error)."""
        return cls(**{f.name: getattr(spec, f.name) for f in fields(RowSpec)}, ok=ok, **measured)

    @property
    def spec(self) -> RowSpec:
        return RowSpec(**{f.name: getattr(self, f.name) for f in fields(RowSpec)})


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_model(spec: RowSpec, config: BertConfig) -> torch.nn.Module:
    """bertkit's BertForPreTraining, or transformers' with the same config and SDPA."""
    if spec.implementation == "bertkit":
        return BertForPreTraining(config, unpad=spec.unpad)
    from transformers import BertConfig as PeerConfig
    from transformers import BertForPreTraining as PeerModel

    settings = {k: v for k, v in hf_config(config).items() if k not in ("architectures",)}
    return PeerModel(PeerConfig(**settings, attn_implementation="sdpa"))


def transformers_labels(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, L) MLM labels as transformers' users pass them: the masked positions' token ids,
    IGNORE_INDEX everywhere else (a padding slot points at position 0, [CLS], never masked,
    and carries IGNORE_INDEX, so it writes nothing new)."""
    labels = torch.full_like(batch[BatchField.INPUT_IDS], IGNORE_INDEX)
    return labels.scatter_(1, batch[BatchField.MASKED_POSITIONS], batch[BatchField.MASKED_LABELS])


def model_inputs(spec: RowSpec, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if spec.implementation == "bertkit":
        return {name: batch[name] for name in MODEL_INPUTS}
    return {
        "input_ids": batch[BatchField.INPUT_IDS],
        "attention_mask": batch[BatchField.ATTENTION_MASK].long(),
        "token_type_ids": batch[BatchField.TOKEN_TYPE_IDS],
        "labels": transformers_labels(batch),
        "next_sentence_label": batch[BatchField.NEXT_SENTENCE_LABELS],
    }


def run_row(
    spec: RowSpec, data: Batches, args: argparse.Namespace, device: torch.device, peak: float | None
) -> RowResult:
    torch.manual_seed(0)
    config: BertConfig = config_for(spec.model, data.vocab_size, **dropout_overrides(args))
    if config.max_position_embeddings < args.seq:
        config = replace(config, max_position_embeddings=args.seq)
    model = build_model(spec, config).to(device)
    if spec.fp8 != "off":  # before torch.compile, as the trainer converts it
        convert_to_fp8(model, spec.fp8, args.fp8_layers)
    if spec.implementation == "bertkit":  # the kernels untimed, as `bertkit train` … on
        model.use_kernels(ffn_epilogue=spec.ffn == "on", add_norm=spec.add_norm == "on")
    model.train()
    cuda = device.type == "cuda"
    optimizer = build_optimizer(model, spec.optimizer, args.lr, fused=cuda)
    # Bucketed batches come in four widths: four static graphs, as the trainer compiles them.
    dynamic = False if spec.bucket_window else None
    forward = compiled(model, args.compile_mode, dynamic) if spec.compiled else model
    autocast, scaler = precision_step(args.dtype, device)  # fp16: with loss scaling
    slots = max(b[BatchField.MASKED_POSITIONS].shape[1] for b in data.batches)
    buckets = 4 if spec.bucket_window else 1
    pad_to = FixedShape.of(args.seq, slots, buckets) if spec.compiled else None
    # Per batch, computed once on the CPU: FLOPs, sequences and real tokens, and the model's
    # inputs; then (--host-batches device) the tensors go to the device, so neither the
    # counting nor the copies are in the timed windows.
    prepared = [to_device(dict(b), torch.device("cpu"), pad_to) for b in data.batches]
    counts = [
        (
            batch_flops(config, b),
            len(b[BatchField.INPUT_IDS]),
            int(b[BatchField.ATTENTION_MASK].sum()),
        )
        for b in prepared
    ]
    lengths = [b[BatchField.INPUT_IDS].shape[1] for b in prepared]
    predictions = [int((b[BatchField.MASKED_LABELS] != IGNORE_INDEX).sum()) for b in prepared]
    sequences = sum(len(b[BatchField.INPUT_IDS]) for b in prepared)
    fetch = batch_source([model_inputs(spec, b) for b in prepared], args.host_batches, device)
    # The trainer's hints for --unpad (the real tokens' counts from the host), per batch.
    mask, ids = BatchField.ATTENTION_MASK, BatchField.INPUT_IDS
    host_lengths = [(np.count_nonzero(b[mask].numpy(), axis=1), b[ids].numel()) for b in prepared]

    def step(index: int) -> None:
        batch = fetch(index)
        with autocast:
            hints: dict[str, object] = {}
            if isinstance(model, BertForPreTraining):
                hints = model.unpad_hints(*host_lengths[index % len(prepared)], device)
            out = forward(**batch, **hints)
        optimizer_step(out.loss, model, optimizer, scaler)

    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    index = 0
    started = time.perf_counter()
    for _ in range(args.warmup):
        step(index)
        index += 1
    synchronize(device)
    warmup_s = time.perf_counter() - started
    windows = []
    for _ in range(args.repeats):
        first = index
        synchronize(device)
        started = time.perf_counter()
        for _ in range(args.steps):
            step(index)
            index += 1
        synchronize(device)
        seconds = time.perf_counter() - started
        done = [counts[i % len(counts)] for i in range(first, index)]
        windows.append(
            Window(
                args.steps,
                seconds,
                sequences=sum(c[1] for c in done),
                tokens=sum(c[2] for c in done),
                flops=sum(c[0] for c in done),
            )
        )
    kernels = profile_steps(step, args.profile, index, device) if args.profile else None
    rates = [window.rates(peak) for window in windows]
    medians = {
        key: (statistics.median(r[key] for r in rates) if rates[0][key] is not None else None)  # type: ignore[type-var]
        for key in rates[0]
    }
    return RowResult.of(
        spec,
        ok=True,
        parameters=parameter_count(model),
        batch=len(prepared[0][BatchField.INPUT_IDS]),
        mean_length=statistics.fmean(lengths),
        predictions_per_seq=sum(predictions) / sequences,
        warmup_s=warmup_s,
        peak_memory_gib=torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None,
        medians=medians,
        windows=[{**asdict(w), **w.rates(peak)} for w in windows],
        profile=kernels,
    )


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return train_step_args.parse_args(argv, __doc__)


def row_specs(args: argparse.Namespace, device: torch.device) -> list[RowSpec]:
    cuda = device.type == "cuda"
    if args.model:
        models = [m.strip() for m in args.model.split(",") if m.strip()]
    else:
        models = [TARGET_MODEL] if cuda else ["tiny", "mini"]
    unknown = [m for m in models if m not in MODEL_SIZES]
    if unknown:
        raise SystemExit(f"--model {','.join(unknown)}: choose from {', '.join(MODEL_SIZES)}")
    compile_rows = cuda if args.compile is None else args.compile
    modes = [False, True] if compile_rows else [False]
    if args.mode_list:
        modes = [mode == "compiled" for mode in args.mode_list]
    implementations = IMPLEMENTATIONS if args.reference else IMPLEMENTATIONS[:1]
    specs = [
        RowSpec(
            model,
            compiled,
            optimizer,
            implementation,
            window,
            unpad if implementation == "bertkit" else "off",
            fp8 if implementation == "bertkit" else "off",
            ffn if implementation == "bertkit" else "off",
            add_norm if implementation == "bertkit" else "off",
        )
        for model in models
        for window in args.windows
        for unpad in args.unpads
        for fp8 in args.fp8s
        for ffn in args.ffns
        for add_norm in args.add_norms
        for compiled in modes
        for optimizer in args.optimizers
        for implementation in implementations
    ]
    return list(dict.fromkeys(specs))  # transformers' rows once, whatever --unpad lists


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    batch = args.batch or (256 if cuda else 32)
    # The trainer's choice: auto is bf16 on a GPU with it, fp16 on one without, fp32 on a CPU.
    dtype = args.dtype = resolve_precision(args.precision, device)
    peak = peak_flops(device, dtype, args.peak_tflops)
    specs = row_specs(args, device)
    device_name = (
        torch.cuda.get_device_name(device) if cuda else measure.machine_description()["cpu"]
    )

    if args.synthetic:
        datasets = {
            0: synthetic_batches(
                args.seq, batch, args.batches, args.vocab_size, padding=args.padding
            )
        }
    elif not (args.shards / "manifest.json").exists():
        print(
            f"no shards at {args.shards}: make them with `bertkit demo` (writes out/demo/shards) "
            "or give --shards DIR; or run with --synthetic (random batches, no shards needed)",
            file=sys.stderr,
        )
        return 2
    else:
        try:
            datasets = {
                w: real_batches(args.shards, args.seq, batch, args.batches, w) for w in args.windows
            }
        except DataConfigError as error:
            print(f"{error}\nrun with --synthetic to use random batches", file=sys.stderr)
            return 2
    data = datasets[args.windows[0]] if not args.synthetic else datasets[0]

    print(f"device: {describe_device(device)}")
    for each in datasets.values():
        print(f"data: {each.description}")
    source = "--peak-tflops" if args.peak_tflops else "trainer.metrics table"
    print(
        f"peak: {fmt(peak / 1e12 if peak else None, ',.1f')} TFLOP/s {dtype}"
        + (f" ({source})" if peak else " (none known: MFU n/a; give --peak-tflops)")
    )
    print(
        f"timing: {args.warmup} warmup steps, then {args.repeats} windows of {args.steps} "
        f"steps (median); {dtype}, compile mode {args.compile_mode}, batches kept on/in "
        f"{args.host_batches}" + (f", {args.profile} steps profiled" if args.profile else ""),
        flush=True,
    )

    results: list[RowResult] = []
    for spec in specs:
        try:
            with cpu_products(spec.fp8, device):  # as `bertkit train` runs FP8 on a CPU
                result = run_row(spec, datasets[spec.bucket_window], args, device, peak)
        except Exception as error:  # noqa: BLE001 - an OOM or a compile failure: run the rest
            first_line = str(error).splitlines()[0] if str(error) else ""
            message = f"{type(error).__name__}: {first_line}"
            result = RowResult.of(spec, ok=False, error=message)
        if spec.compiled:
            torch._dynamo.reset()  # drop the graphs (and what they hold) of this row's model
        if cuda:
            torch.cuda.empty_cache()
        results.append(result)
        if args.json:  # before the row's line: whoever reads the line finds the row written
            write_results(args, device_name, batch, dtype, peak, data, results, None, len(specs))
        if result.ok:
            m = result.medians
            print(
                f"  {describe_row(spec):<40} {fmt(m['step_ms'], '8.1f')} ms/step  "
                f"{fmt(m['seq_per_s'], ',.0f')} seq/s  {fmt(m['model_tflops'], '.3g')} TFLOP/s",
                flush=True,
            )
            if result.profile:
                print_profile(describe_row(spec), result.profile)
        else:
            print(f"  {describe_row(spec):<40} FAILED {result.error}", flush=True)

    compare_with_peers(results)
    print(f"\nTraining step, seq {args.seq} ({'synthetic' if data.synthetic else 'real'} batches)")
    print_results(results, device)
    verdict = target_verdict(results, device, device_name, args.seq)
    print(
        f"target: ≥ {MFU_TARGET:.0%} MFU for BERT-{TARGET_MODEL} on an H100 -> {verdict['verdict']}"
    )
    if args.json:
        write_results(args, device_name, batch, dtype, peak, data, results, verdict, len(specs))
        print(f"\nresults: {args.json}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
