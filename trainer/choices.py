"""The values `bertkit train`'s flags choose among, in a module that imports nothing else.

The flags (trainer/config.py) import these and not the modules that act on them, which
import torch: so `bertkit train --help` works in an install without the train extra. Each
module that acts on a choice imports its own from here and keeps its name.
"""

from __future__ import annotations

# name → (layers, hidden, heads). tiny … medium are Google's smaller BERTs (Turc et al. 2019,
# "Well-Read Students Learn Better"); every size has intermediate = 4 × hidden.
MODEL_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

OPTIMIZERS = ("adamw", "lamb")

PRECISIONS = ("auto", "bf16", "fp16", "fp32")

# --unpad's choices. auto: unpadded with the varlen kernel where it runs and at least
# AUTO_MIN_PADDING (trainer/attention.py) of the batch's positions are padding, else the
# padded batch; on: unpadded always (padded attention per layer where varlen cannot run);
# off: the padded batch.
UNPAD_MODES = ("auto", "on", "off")

# Each kernel lever's flag (trainer/kernel_choice.py): auto (timed and checked at the
# start), on, off.
KERNEL_MODES = ("auto", "on", "off")

# --compile-mode's choices: torch.compile's modes. reduce-overhead and max-autotune replay
# the step as CUDA graphs (on a GPU); max-autotune and max-autotune-no-cudagraphs time
# Triton matmul templates against cuBLAS for each shape and keep the fastest.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

FP8_RECIPES = ("off", "tensorwise", "rowwise")
FP8_LAYERS = ("auto", "all")
FP8_NOT_FP16 = (
    "--fp8 {recipe} runs with bf16 autocast or in fp32, not with fp16's loss scaling: every "
    "GPU with FP8 matrix products has bf16; pass --precision bf16 (or auto)"
)
