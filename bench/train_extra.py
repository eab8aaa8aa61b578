"""Imported first by the training-step benchmark (bench.train_step and its modules), which
needs the trainer's install and no more: torch and safetensors (the train extra), so that
it runs on a GPU machine set up as docs/gpu.md says, without the test servers of the dev
extra. Without them, one line naming the install command and exit 2 (bench/extra_guard.py).
"""

from __future__ import annotations

from bench.extra_guard import require

require("train")
