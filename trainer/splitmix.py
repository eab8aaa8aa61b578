"""splitmix64 (Steele, Lea and Flood, 2014): the counter-based hash behind the trainer's
draws, the epoch's order (trainer/order.py) and dynamic masks (trainer/masking.py). A draw is
`mix(state + n · GOLDEN)`, the n-th output of the stream `state`: any output is computed
directly from its counter, for a whole numpy array at once, with no generator to carry.
"""

from __future__ import annotations

import numpy as np

MIX_1, MIX_2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # the finalizer's multipliers
_M1, _M2 = np.uint64(MIX_1), np.uint64(MIX_2)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # the stream's step


def mix(z: np.ndarray) -> np.ndarray:
    """The finalizer over a uint64 array, in place (a bijection; wraps modulo 2**64): pass an
    array of the caller's own. Returns it."""
    shifted = z >> np.uint64(30)
    z ^= shifted
    z *= _M1
    np.right_shift(z, np.uint64(27), out=shifted)
    z ^= shifted
    z *= _M2
    np.right_shift(z, np.uint64(31), out=shifted)
    z ^= shifted
    return z


def mix_int(z: int) -> int:
    """`mix` of one integer (modulo 2**64), in Python: cheaper than numpy for one value."""
    z = ((z ^ (z >> 30)) * MIX_1) % 2**64
    z = ((z ^ (z >> 27)) * MIX_2) % 2**64
    return z ^ (z >> 31)
