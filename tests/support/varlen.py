"""A CPU stand-in for torch's varlen flash kernel, which runs on a CUDA GPU only: the
tests of the unpadded path's tokens, cu_seqlens and layouts attend through it."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F


def reference_varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k):
    """torch's varlen_attn (CUDA only) on the CPU, one sequence at a time: (T, heads, d)."""
    # The same tensor for both where bertkit calls it (no torch.equal: a read on a GPU).
    assert cu_seq_q is cu_seq_k and max_q == max_k
    assert cu_seq_q.dtype == torch.int32
    bounds = cu_seq_q.tolist()
    assert max_q == max(end - start for start, end in itertools.pairwise(bounds))
    parts = [
        F.scaled_dot_product_attention(
            *(t[start:end].transpose(0, 1)[None] for t in (query, key, value))
        )[0].transpose(0, 1)
        for start, end in itertools.pairwise(bounds)
    ]
    return torch.cat(parts)


def reference_flash_forward(query, key, value, cu_q, cu_k, max_q, max_k, dropout_p, causal, debug):
    """aten's _flash_attention_forward (CUDA only) as trainer/attention.py `flash_varlen`
    calls it, on the CPU and without its dropout: (the context,)."""
    assert not causal and not debug and 0.0 <= dropout_p < 1.0
    return (reference_varlen_attn(query, key, value, cu_q, cu_k, max_q, max_k),)
