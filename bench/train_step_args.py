"""bench.train_step's command line: `parse_args`, its flags and the checks that refuse a
combination before any row runs (the rows themselves: bench/train_step.py `row_specs`)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from bench import measure
from bench.gpu_levers import HOST_BATCHES
from bench.measure import DEMO_OUTPUT
from trainer.choices import (
    COMPILE_MODES,
    FP8_LAYERS,
    FP8_NOT_FP16,
    FP8_RECIPES,
    MODEL_SIZES,
    OPTIMIZERS,
    PRECISIONS,
    UNPAD_MODES,
)

DEFAULT_SHARDS = DEMO_OUTPUT / "shards"
BERT_VOCAB_SIZE = 30522  # BERT's uncased WordPiece vocabulary: --synthetic's default


def parse_args(argv: list[str] | None, doc: str | None) -> argparse.Namespace:
    """bench.train_step's arguments from `argv`, its `--help` text `doc`."""
    parser = measure.argument_parser("bench.train_step", doc)
    parser.add_argument(
        "--model",
        help="model sizes, comma-separated (default: tiny,mini on CPU, base on CUDA, the "
        f"target's); of {', '.join(MODEL_SIZES)}",
    )
    parser.add_argument("--seq", type=int, default=128, help="which seqN shards (default 128)")
    parser.add_argument("--batch", type=int, help="sequences per step (default 32 CPU, 256 CUDA)")
    parser.add_argument("--steps", type=int, default=20, help="steps per timing window")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (compiles)")
    parser.add_argument("--repeats", type=int, default=3, help="timing windows (median)")
    parser.add_argument("--batches", type=int, default=8, help="distinct batches to cycle")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add torch.compile rows (default: on CUDA yes, on CPU no)",
    )
    parser.add_argument("--modes", help="comma-separated eager, compiled (overrides --compile)")
    parser.add_argument(
        "--compile-mode",
        default="default",
        choices=COMPILE_MODES,
        help="torch.compile's mode for compiled rows, as bertkit train --compile-mode "
        "(max-autotune: set TORCHINDUCTOR_CACHE_DIR to keep its tuning for the next run)",
    )
    parser.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help="auto: bf16 autocast on CUDA, fp32 on the CPU; fp16: autocast with dynamic loss "
        "scaling (GradScaler), as bertkit train --precision fp16",
    )
    parser.add_argument(
        "--hidden-dropout", type=float, help="hidden dropout rate (default: the model's 0.1)"
    )
    parser.add_argument(
        "--attention-dropout", type=float, help="attention dropout rate (default: 0.1)"
    )
    # The trainer's dropout_overrides reads --dropout too (both rates); the bench has no such flag.
    parser.set_defaults(dropout=None)
    parser.add_argument(
        "--unpad",
        default="off",
        help="comma-separated bertkit --unpad values, a row set each: off (the padded batch, "
        "the trainer's default), on (real tokens only through the encoder), auto",
    )
    parser.add_argument(
        "--fp8",
        default="off",
        help="comma-separated bertkit train --fp8 values, a row set each: off (the default), "
        "tensorwise, rowwise (torchao's FP8 matmuls in the encoder; the gpu extra)",
    )
    parser.add_argument(
        "--ffn-epilogue",
        default="off",
        help="comma-separated bertkit train --ffn-epilogue values, a row set each: off (the "
        "plain feed-forward block), on (its bias and GELU in the matmul's epilogue: Triton)",
    )
    parser.add_argument(
        "--add-norm",
        default="off",
        help="comma-separated bertkit train --add-norm values, a row set each: off (the plain "
        "dropout, add and LayerNorm), on (one Triton kernel each way)",
    )
    parser.add_argument(
        "--fp8-layers",
        default="auto",
        choices=FP8_LAYERS,
        help="bertkit train --fp8-layers: auto (torchao's H100 tables) or all",
    )
    parser.add_argument(
        "--padding",
        type=float,
        default=0.0,
        help="--synthetic: this share of positions is padding (the demo's pairs at 512: "
        "0.18); a share twice that of the sequences is shorter (default 0: all full)",
    )
    parser.add_argument(
        "--host-batches",
        default="device",
        choices=HOST_BATCHES,
        help="device: copied up front (default); pinned/pageable: copied in each timed step",
    )
    parser.add_argument("--profile", type=int, default=0, help="profile N steps per row")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak, for MFU")
    parser.add_argument("--threads", type=int, help="torch CPU threads (1 on a busy machine)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--shards", type=Path, default=DEFAULT_SHARDS)
    parser.add_argument("--synthetic", action="store_true", help="random batches, no shards")
    parser.add_argument(
        "--vocab-size", type=int, default=BERT_VOCAB_SIZE, help="--synthetic's vocabulary"
    )
    parser.add_argument(
        "--optimizer", default="adamw", help="comma-separated: adamw, lamb (a row set each)"
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="add transformers' BertForPreTraining rows and bertkit ÷ transformers",
    )
    parser.add_argument(
        "--bucket-windows",
        default="0",
        help="comma-separated loader --bucket-window values, real batches only (0 = off)",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.reference and importlib.util.find_spec("transformers") is None:
        parser.error(
            "--reference runs transformers' BertForPreTraining beside bertkit's, and transformers "
            "is not installed: pip install transformers (the dev extra has it)"
        )
    args.optimizers = [o.strip() for o in args.optimizer.split(",") if o.strip()]
    if not args.optimizers or set(args.optimizers) - set(OPTIMIZERS):
        parser.error(f"--optimizer {args.optimizer!r}: comma-separated, of {', '.join(OPTIMIZERS)}")
    try:
        args.windows = [int(w) for w in args.bucket_windows.split(",")]
    except ValueError:
        parser.error(f"--bucket-windows {args.bucket_windows!r}: comma-separated integers")
    if any(w < 0 for w in args.windows):
        parser.error("--bucket-windows: 0 (off) or a number of batches")
    args.unpads = [u.strip() for u in args.unpad.split(",") if u.strip()]
    if not args.unpads or set(args.unpads) - set(UNPAD_MODES):
        parser.error(f"--unpad {args.unpad!r}: comma-separated, of {', '.join(UNPAD_MODES)}")
    for flag, given, name in (("--ffn-epilogue", args.ffn_epilogue, "ffns"),
                              ("--add-norm", args.add_norm, "add_norms")):  # fmt: skip
        values = [value.strip() for value in given.split(",") if value.strip()]
        if not values or set(values) - {"off", "on"}:
            parser.error(f"{flag} {given!r}: comma-separated, of off, on")
        setattr(args, name, values)
    args.fp8s = [f.strip() for f in args.fp8.split(",") if f.strip()]
    if not args.fp8s or set(args.fp8s) - set(FP8_RECIPES):
        parser.error(f"--fp8 {args.fp8!r}: comma-separated, of {', '.join(FP8_RECIPES)}")
    if args.fp8s != ["off"] and args.precision == "fp16":
        parser.error(FP8_NOT_FP16.format(recipe=",".join(args.fp8s)))
    for name in ("hidden_dropout", "attention_dropout"):
        rate = getattr(args, name)
        if rate is not None and not 0 <= rate < 1:
            parser.error(f"--{name.replace('_', '-')} {rate}: a rate from 0 to below 1")
    if not 0 <= args.padding <= 0.5:
        parser.error(f"--padding {args.padding}: a share from 0 to 0.5 of the positions")
    if args.padding and not args.synthetic:
        parser.error("--padding shapes synthetic batches: add --synthetic (real ones have theirs)")
    if args.synthetic and any(args.windows):
        parser.error("--bucket-windows needs real batches: synthetic ones are all full length")
    args.mode_list = [m.strip() for m in (args.modes or "").split(",") if m.strip()]
    if args.modes is not None and (
        not args.mode_list or set(args.mode_list) - {"eager", "compiled"}
    ):
        parser.error(f"--modes {args.modes!r}: comma-separated, of eager, compiled")
    if args.profile < 0:
        parser.error("--profile must be 0 or more")
    for name in ("seq", "steps", "repeats", "batches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.warmup < 0 or (args.batch is not None and args.batch < 1):
        parser.error("--warmup must be 0 or more, --batch at least 1")
    return args
