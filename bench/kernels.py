"""bertkit's Triton kernels against the plain ops they replace, one layer's block at a time:
the feed-forward with its GELU in the matmul's epilogue (`--ffn-epilogue`) and the dropout,
residual add and LayerNorm in one kernel (`--add-norm`).

    python -m bench.kernels                                   # base and large, bf16, on a GPU
    python -m bench.kernels --compiled --json OUT/kernels.json
    python -m bench.kernels --device cpu --model tiny --rows 64   # Triton's interpreter

Each row is what `bertkit train`'s auto does at a run's start (trainer/kernel_choice.py): one
layer's block forward and backward on a micro-batch's rows (--rows, by default a batch of
256 × 128 for base and 128 × 128 for large), the plain ops and then the kernels (Triton's
tuning and compilation in the warm-up), medians of 10 runs after 3, and whether the kernels'
output and inputs' gradients were the plain ops' within a few roundings. --compiled times
both under torch.compile (the plain ops then inductor's fused kernels). The add-norm rows run
at the 2018 recipe's hidden dropout 0.1. A second table times the epilogue kernel's two
matmuls against cuBLAS's products alone (GELU aside: how close Triton's matmul comes to
cuBLAS's, in TFLOP/s and of the GPU's bf16 peak). On a CPU the kernels run in Triton's
interpreter: a check that the benchmark runs (one run after one warm-up), not a figure.
"""

from __future__ import annotations

# First: without the train extra, one line naming the install command (bench/train_extra.py).
import bench.train_extra  # noqa: F401

# isort: split
import os
from pathlib import Path

import torch

if not torch.cuda.is_available():  # before Triton's import, which reads it: its interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

# isort: split
from bench.measure import (
    NO_TRITON,
    STEP_BATCH,
    STEP_SEQ,
    argument_parser,
    fmt,
    model_list,
    print_table,
    write_results,
)
from trainer.add_norm import time_add_norm
from trainer.choices import MODEL_SIZES
from trainer.ffn_epilogue import time_blocks
from trainer.kernel_choice import triton_available, warmed_ms
from trainer.metrics import peak_flops
from trainer.model import config_for

DROPOUT = 0.1  # the 2018 recipe's hidden dropout


def rows_for(model: str, rows: int | None) -> int:
    return rows if rows is not None else STEP_BATCH.get(model, 8) * STEP_SEQ


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.kernels", __doc__)
    parser.add_argument("--model", default="base,large", help="comma-separated model sizes")
    parser.add_argument("--rows", type=int, help="rows per block (default: batch × 128)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--compiled", action="store_true", help="time both under torch.compile")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    models = model_list(parser, args.model, MODEL_SIZES)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU here (--device cpu checks it in the interpreter)")
    if not triton_available():
        parser.error(NO_TRITON)
    device = torch.device(args.device)
    dtype = torch.bfloat16
    results, products = [], []
    for model in models:
        config = config_for(model, vocab_size=2)  # the block's sizes; no vocabulary used
        hidden, intermediate = config.hidden_size, config.intermediate_size
        rows = rows_for(model, args.rows)
        products += product_rows(model, (rows, hidden, intermediate), device, dtype)
        ffn = time_blocks((rows, hidden, intermediate), dtype, device, args.compiled)
        norm = time_add_norm(rows, hidden, DROPOUT, dtype, device, args.compiled)
        for lever, (plain, kernel, problem) in (("ffn-epilogue", ffn), ("add-norm", norm)):
            results.append(
                {
                    "lever": lever,
                    "model": model,
                    "rows": rows,
                    "compiled": args.compiled,
                    "plain_ms": plain,
                    "kernel_ms": kernel,
                    "speedup": plain / kernel,
                    "problem": problem,
                }
            )
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (interpreter)"
    print(f"\n{name}, bf16, {'compiled' if args.compiled else 'eager'}\n")
    print_table(
        ["lever", "model", "rows", "plain ms", "kernel ms", "plain ÷ kernel", "check"],
        [
            [
                row["lever"],
                row["model"],
                f"{row['rows']:,}",
                fmt(row["plain_ms"], ".3f"),
                fmt(row["kernel_ms"], ".3f"),
                fmt(row["speedup"], ".2f"),
                row["problem"] or "the plain ops' results",
            ]
            for row in results
        ],
        left=(0, 1, 6),
    )
    peak = peak_flops(device, "bf16")
    print("\nThe epilogue kernel's matmul against cuBLAS's product alone (eager)\n")
    print_table(
        ["product", "model", "cuBLAS ms", "kernel ms", "cuBLAS TFLOP/s", "kernel TFLOP/s",
         "speed vs cuBLAS", "kernel, of peak"],
        [
            [row["product"], row["model"], fmt(row["cublas_ms"], ".3f"),
             fmt(row["kernel_ms"], ".3f"), fmt(row["cublas_tflops"], ".1f"),
             fmt(row["kernel_tflops"], ".1f"), fmt(row["cublas_ms"] / row["kernel_ms"], ".2f"),
             "n/a" if peak is None else f"{row['kernel_tflops'] * 1e12 / peak:.1%}"]
            for row in products
        ],
        left=(0, 1),
    )  # fmt: skip
    if args.json:
        results_file = {"device": name, "dtype": "bf16", "rows": results, "products": products}
        write_results(args.json, results_file)
    return 0


def product_rows(
    model: str, sizes: tuple[int, int, int], device: torch.device, dtype: torch.dtype
) -> list[dict]:
    """The epilogue kernel's two products against cuBLAS's product alone, timed as auto
    times (warm-up, then the median): the up projection x·W1ᵀ + b1 (the kernel adds the
    GELU) and the down projection's input gradient dz·W2 (the kernel multiplies by the
    GELU's slope). How far the kernel's matmul is from cuBLAS's, GELU aside."""
    rows, hidden, intermediate = sizes
    generator = torch.Generator(device=device).manual_seed(0)

    def normal(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return scale * torch.randn(*shape, device=device, dtype=dtype, generator=generator)

    x, grad = normal(rows, hidden), normal(rows, hidden)
    up, down = normal(intermediate, hidden, scale=0.02), normal(hidden, intermediate, scale=0.02)
    bias = normal(intermediate, scale=0.02)
    pre = torch.ops.bertkit.ffn_up(x, up, bias)[0]
    pairs = {
        "up, x·W1ᵀ + b1": (
            lambda: [torch.addmm(bias, x, up.t())],
            lambda: list(torch.ops.bertkit.ffn_up(x, up, bias)),
        ),
        "down's input gradient, dz·W2": (
            lambda: [grad @ down],
            lambda: [torch.ops.bertkit.ffn_gelu_grad(grad, down, pre)],
        ),
    }
    flops = 2 * rows * hidden * intermediate
    found = []
    for product, runs in pairs.items():
        cublas, kernel = (warmed_ms(run, device.type == "cuda") for run in runs)
        found.append(
            {
                "product": product,
                "model": model,
                "rows": rows,
                "cublas_ms": cublas,
                "kernel_ms": kernel,
                "cublas_tflops": flops / cublas / 1e9,
                "kernel_tflops": flops / kernel / 1e9,
            }
        )
    return found


if __name__ == "__main__":
    raise SystemExit(main())
