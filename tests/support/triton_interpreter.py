"""Imported first by tests/conftest.py and bench/tests/conftest.py: without a GPU, Triton
(where installed: the dev extra) runs its kernels in its NumPy interpreter, and
tests/test_ffn_epilogue.py checks the --ffn-epilogue kernels so. Triton reads the variable
when it is first imported (torch._dynamo imports it), so it is set before any test runs."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
