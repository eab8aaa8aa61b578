"""What Triton makes of bertkit's kernels for GPUs this machine need not have: each kernel
compiled for Ampere, Hopper and Blackwell as `bertkit train` launches it there, and the machine code
checked, on a CPU.

    python -m bench.kernel_codegen                   # base and large, sm_80/86/90/100, bf16
    python -m bench.kernel_codegen --arch 90 --model base --tiles 1 --json OUT/codegen.json

Each row compiles one kernel (trainer/triton_kernels.py) with the arguments its launcher
passes on a GPU (the same `*_arguments`/`*_launch` functions), on the micro-batch's rows of
bench/gpu_check.sh (256 × 128 for base, 128 × 128 for large), so Triton specializes it as its
JIT would there (the tensors' 16-byte alignment, the sizes divisible by 16, the strides of 1).
Every tile the feed-forward's autotuner may choose is compiled. Then, from the PTX and from
the cubin's resource use (the CUDA toolkit's `cuobjdump -res-usage`, shipped in Triton's
wheel):

- tensor cores: the matmul's product runs on them (`mma.sync` on Ampere, `wgmma.mma_async`
  on Hopper, `tcgen05.mma` on Blackwell);
- pipelined: its tiles are loaded asynchronously, a few stages ahead (`cp.async`, or TMA's
  `cp.async.bulk`), which is where most of a Triton matmul's speed comes from;
- 128-bit: the add-norm's rows are loaded and stored 16 bytes at a time (`ld.global.v4`,
  `st.global.v4`), as a kernel bound by memory must;
- shared memory within what one block may take on that architecture, registers at most 255
  and no spills (local memory), for every kernel.

A row that fails one of them is named, and the command exits 1. Not a timing: whether the
kernels are fast is `python -m bench.kernels` on the GPU; this says they are built as a fast
kernel is, where no GPU is at hand (the tests run it).
"""

from __future__ import annotations

# First: without the train extra, one line naming the install command (bench/train_extra.py).
import bench.train_extra  # noqa: F401

# isort: split
import os

if __name__ == "__main__":  # compiling, not interpreting: Triton reads it at its import
    os.environ.pop("TRITON_INTERPRET", None)

# isort: split
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from bench.measure import (
    NO_TRITON,
    STEP_BATCH,
    STEP_SEQ,
    argument_parser,
    model_list,
    print_table,
    write_results,
)
from trainer.kernel_choice import triton_available
from trainer.model import config_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

# The shared memory one block may take (opt-in maximum, bytes), from the CUDA C Programming
# Guide's table of compute capabilities: A100 (8.0) 163 KB; GA10x and Ada (8.6, 8.9) 99 KB;
# H100/H200 (9.0) and B200 (10.0) 227 KB.
SHARED_LIMIT = {80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024, 100: 227 * 1024}
MAX_REGISTERS = 255
TENSOR_CORE_OP = {
    80: "mma.sync", 86: "mma.sync", 89: "mma.sync", 90: "wgmma.mma_async", 100: "tcgen05.mma"
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    kernel: str  # "ffn forward", "ffn backward", "add-norm forward", …
    model: str
    arch: int
    tile: str  # the matmul's BLOCK_M×N×K/stages/warps, or the rows' launch
    shared: int  # bytes
    registers: int
    spilled: int  # bytes of local memory per thread
    tensor_cores: bool | None  # None: not a matmul
    pipelined: bool | None
    vectorized: bool | None  # None: a matmul (its tiles' loads are cp.async's)

    @property
    def problems(self) -> list[str]:
        found = []
        if self.shared > SHARED_LIMIT[self.arch]:
            found.append(f"{self.shared} bytes of shared memory, over {SHARED_LIMIT[self.arch]}")
        if self.registers > MAX_REGISTERS:
            found.append(f"{self.registers} registers")
        if self.spilled:
            found.append(f"{self.spilled} bytes spilled to local memory")
        if self.tensor_cores is False:
            found.append(f"no {TENSOR_CORE_OP[self.arch]}: the product is not on tensor cores")
        if self.pipelined is False:
            found.append("no cp.async: the tiles' loads are not pipelined")
        if self.vectorized is False:
            found.append("no 128-bit loads and stores: the rows move a word at a time")
        return found


def compile_for(kernel, arch: int, args: tuple, options: dict, constants: dict):
    """`kernel` (a JITFunction) compiled for sm_`arch` as its JIT would on a GPU given
    `args` (tensors stand in by their dtype and their address's alignment)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, _ = binder(*args, **constants, **options)
    options, signature, constexprs, attrs = kernel._pack_args(
        backend, options, bound, specialization, None
    )
    source = ASTSource(kernel, signature, constexprs, attrs)
    return triton.compile(source, target=target, options=options.__dict__)


def resource_use(cubin: bytes) -> dict[str, int]:
    """REG, SHARED, LOCAL, … of the cubin's kernel, read by the CUDA toolkit's cuobjdump."""
    import triton

    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        listing = subprocess.run(
            [triton.knobs.nvidia.cuobjdump.path, "-res-usage", file.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    function = listing[listing.index("Function") :]
    return {name: int(value) for name, value in re.findall(r"(\w+):(\d+)", function)}


def row_of(kernel_name: str, model: str, arch: int, tile: str, compiled, matmul: bool) -> Row:
    ptx = compiled.asm["ptx"]
    use = resource_use(compiled.asm["cubin"])
    return Row(
        kernel=kernel_name,
        model=model,
        arch=arch,
        tile=tile,
        shared=int(compiled.metadata.shared),
        registers=use["REG"],
        spilled=use["LOCAL"],
        tensor_cores=TENSOR_CORE_OP[arch] in ptx if matmul else None,
        pipelined=("cp.async" in ptx) if matmul else None,
        vectorized=None if matmul else ("ld.global.v4" in ptx and "st.global.v4" in ptx),
    )


def ffn_rows(model: str, arch: int, dtype: torch.dtype, tiles: int | None) -> list[Row]:
    """The feed-forward's epilogue kernel, forward and backward, for each autotuned tile."""
    from trainer import triton_kernels

    config = config_for(model, 30522)
    rows = STEP_BATCH[model] * STEP_SEQ
    hidden, inner = config.hidden_size, config.intermediate_size
    x = torch.empty(rows, hidden, dtype=dtype)
    up = torch.empty(inner, hidden, dtype=dtype)  # nn.Linear's (out, in)
    down = torch.empty(hidden, inner, dtype=dtype)
    bias = torch.empty(inner, dtype=dtype)
    pre, out = torch.empty(rows, inner, dtype=dtype), torch.empty(rows, inner, dtype=dtype)
    tma = arch >= 90  # trainer/triton_kernels.py tma_possible: Hopper and newer
    strides = {"ffn forward": (up.stride(1), up.stride(0)), "ffn backward": down.stride()}
    launches = {  # as trainer/ffn_epilogue.py calls them
        "ffn forward": (x, up, bias, pre, out),
        "ffn backward": (x, down, pre, pre, out),
    }
    found = []
    for config in tuned_configs(tma, tiles):
        constants = dict(config.kwargs)
        options = {"num_stages": config.num_stages, "num_warps": config.num_warps}
        tile = "{BLOCK_M}×{BLOCK_N}×{BLOCK_K}".format(**constants)
        tile += f"/{config.num_stages}/{config.num_warps}"
        tile += " TMA" if constants["USE_TMA"] else ""
        for name, tensors in launches.items():
            args = triton_kernels.matmul_gelu_arguments(
                *tensors, b_strides=strides[name], backward=name.endswith("backward"),
                interpreted=False, tma=tma,
            )  # fmt: skip
            if constants["USE_TMA"]:  # as its pre-hook does, the descriptors take the tile
                triton_kernels.tile_descriptors(args, constants)
            compiled = compile_for(triton_kernels.matmul_gelu, arch, args, options, constants)
            row = row_of(name, model, arch, tile, compiled, matmul=True)
            if constants["USE_TMA"]:  # its loads TMA's bulk copies
                row = replace(row, pipelined="cp.async.bulk.tensor" in compiled.asm["ptx"])
            found.append(row)
    return found


def tuned_configs(tma: bool, tiles: int | None) -> list:
    """The feed-forward autotuner's tiles for a launch with (`tma`) or without descriptors:
    the first `tiles` (all: None) through pointers, and as many through TMA."""
    from trainer import triton_kernels

    configs = triton_kernels.TUNED.configs
    pointers = [config for config in configs if not config.kwargs["USE_TMA"]][:tiles]
    descriptors = [config for config in configs if config.kwargs["USE_TMA"]][:tiles]
    return pointers + (descriptors if tma else [])


def add_norm_rows(model: str, arch: int, dtype: torch.dtype) -> list[Row]:
    """The dropout-add-LayerNorm kernels, with and without dropout, under autocast's dtypes:
    the residual stream fp32 (LayerNorm's output), the branch in `dtype` (a Linear's)."""
    from trainer import triton_kernels

    hidden = config_for(model, 30522).hidden_size
    rows = STEP_BATCH[model] * STEP_SEQ
    wide = torch.float32
    x, y = torch.empty(rows, hidden, dtype=wide), torch.empty(rows, hidden, dtype=dtype)
    gamma, beta = torch.empty(hidden, dtype=wide), torch.empty(hidden, dtype=wide)
    outputs = (x.new_empty(x.shape), x.new_empty(x.shape), x.new_empty(rows), x.new_empty(rows))
    seed = torch.empty((), dtype=torch.int64)
    found = []
    for p in (0.1, 0.0):
        dropout = "dropout" if p else "no dropout"
        _, args, options = triton_kernels.add_norm_forward_launch(
            x, y, gamma, beta, outputs, p, seed, 1e-12, gpu=True
        )
        tile = f"{args[-2]} row/{options['num_warps']}"
        compiled = compile_for(triton_kernels.add_norm_forward, arch, args, options, {})
        found.append(row_of(f"add-norm forward, {dropout}", model, arch, tile, compiled, False))
        saved = (outputs[1], gamma, outputs[2], outputs[3])
        grads = (x.new_empty(x.shape), y.new_empty(y.shape))
        _, args, options, _ = triton_kernels.add_norm_backward_launch(
            x, saved, grads, p, seed, gpu=True
        )
        tile = f"{args[-3]} row×{args[-1]}/{options['num_warps']}"
        compiled = compile_for(triton_kernels.add_norm_backward, arch, args, options, {})
        found.append(row_of(f"add-norm backward, {dropout}", model, arch, tile, compiled, False))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.kernel_codegen", __doc__)
    parser.add_argument("--model", default="base,large", help="comma-separated model sizes")
    parser.add_argument("--arch", default="80,86,90,100", help="compute capabilities: 80,90")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument(
        "--tiles", type=int, help="the first N of the autotuner's tiles, each way (all)"
    )
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    models = model_list(parser, args.model, STEP_BATCH)
    try:
        arches = [int(arch) for arch in args.arch.split(",")]
    except ValueError:
        parser.error(f"--arch {args.arch}: compute capabilities such as 80,86,90")
    if unsupported := [arch for arch in arches if arch not in SHARED_LIMIT]:
        parser.error(f"--arch {unsupported[0]}: one of {', '.join(map(str, SHARED_LIMIT))}")
    if not triton_available():
        parser.error(NO_TRITON)
    from trainer import triton_kernels

    if not hasattr(triton_kernels.matmul_gelu, "params"):  # imported under TRITON_INTERPRET
        parser.error("Triton was imported in its interpreter (TRITON_INTERPRET is set)")
    dtype = DTYPES[args.dtype]
    found: list[Row] = []
    for model in models:
        for arch in arches:
            found += ffn_rows(model, arch, dtype, args.tiles)
            found += add_norm_rows(model, arch, dtype)
    print(f"Triton's code for bertkit's kernels, {args.dtype}, Triton {_triton_version()}")
    print_table(
        ["kernel", "model", "sm", "tile", "shared KB", "regs", "spill", "tensor cores",
         "pipelined", "128-bit", "problems"],
        [
            [row.kernel, row.model, str(row.arch), row.tile, f"{row.shared / 1024:.0f}",
             str(row.registers), str(row.spilled), _yes(row.tensor_cores), _yes(row.pipelined),
             _yes(row.vectorized), "; ".join(row.problems) or "none"]
            for row in found
        ],
        left=(0, 1, 3, 10),
    )  # fmt: skip
    failing = [row for row in found if row.problems]
    if args.json:
        results = {
            "dtype": args.dtype,
            "triton": _triton_version(),
            "rows": [asdict(row) | {"problems": row.problems} for row in found],
        }
        write_results(args.json, results)
    if failing:
        print(f"\n{len(failing)} of {len(found)} kernels are not built as a fast kernel is")
        return 1
    return 0


def _yes(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "NO")


def _triton_version() -> str:
    import triton

    return triton.__version__


if __name__ == "__main__":
    sys.exit(main())
