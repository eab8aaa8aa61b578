"""crc32c (Castagnoli), as LevelDB and TensorFlow compute and store it, in numpy. Beam-free.

TensorFlow checks each block of a checkpoint's index and each tensor's bytes with crc32c
(`pipelines/io/tf_checkpoint.py`). A byte-at-a-time loop in Python is far too slow for
BERT-base's 440 MB, and the compiled crc32c packages are no dependency of bertkit's, so the
bytes are cut into many lanes that run side by side (one numpy step advances every lane by a
byte), and the lanes' CRCs are then joined pairwise with the linear map "move the register over
n zero bytes", as zlib's crc32_combine joins CRCs.
"""

from __future__ import annotations

import functools

import numpy as np

_POLY = 0x82F63B78  # crc32c's polynomial, bit-reversed


def _crc_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1)
    return table.astype(np.uint32)


_TABLE = _crc_table()
_TABLE_LIST = [int(v) for v in _TABLE]
_BITS = np.arange(32, dtype=np.uint32)


def _apply(operator: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A GF(2)-linear map on 32-bit registers (given by its images of the 32 bits) applied to
    every value."""
    result = np.zeros(values.shape, dtype=np.uint32)
    for bit in range(32):
        result ^= np.where((values >> np.uint32(bit)) & np.uint32(1), operator[bit], np.uint32(0))
    return result


def _zero_byte_operator() -> np.ndarray:
    """How one 0x00 byte moves the CRC register."""
    register = np.uint32(1) << _BITS
    return _TABLE[register & np.uint32(0xFF)] ^ (register >> np.uint32(8))


_ZERO_BYTE = _zero_byte_operator()


@functools.lru_cache(maxsize=64)
def _shift_operator(length: int) -> np.ndarray:
    """The register's move over `length` zero bytes, by squaring (cached: a checkpoint's
    chunks and lanes come in a few lengths)."""
    result = np.uint32(1) << _BITS  # identity
    power = _ZERO_BYTE
    while length:
        if length & 1:
            result = _apply(power, result)
        length >>= 1
        if length:
            power = _apply(power, power)
    return result


def _register_small(data: memoryview | bytes, register: int) -> int:
    table = _TABLE_LIST
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


_MAX_LANES = 1 << 16
_MIN_LANE_BYTES = 16  # below this many steps per pass, numpy's per-call cost dominates
_CHUNK_BYTES = 16 << 20  # bytes per pass: bounds the lanes' working memory


def _register_lanes(lanes: np.ndarray) -> int:
    """The register over `lanes` (uint8, [lanes (a power of two), bytes], the bytes in row
    order) started from 0."""
    count, lane_bytes = lanes.shape
    registers = np.zeros(count, dtype=np.uint32)
    low = np.empty(count, dtype=np.uint8)
    for column in range(lane_bytes):
        np.bitwise_xor(registers.astype(np.uint8), lanes[:, column], out=low)
        np.right_shift(registers, np.uint32(8), out=registers)
        np.bitwise_xor(registers, _TABLE[low], out=registers)
    span = lane_bytes
    while registers.size > 1:  # join neighbours: left moved over the right's bytes, xor right
        registers = _apply(_shift_operator(span), registers[0::2]) ^ registers[1::2]
        span *= 2
    return int(registers[0])


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """crc32c of `data`, as TensorFlow's and LevelDB's `crc32c::Value` give it."""
    view = memoryview(data).cast("B")
    register = 0xFFFFFFFF
    start = 0
    while (left := view.nbytes - start) >= 256 * _MIN_LANE_BYTES:
        count = min(_MAX_LANES, 1 << (left // _MIN_LANE_BYTES).bit_length() - 1)
        size = min(_CHUNK_BYTES, left) // count * count
        lanes = np.frombuffer(view[start : start + size], dtype=np.uint8).reshape(count, -1)
        moved = _apply(_shift_operator(size), np.array([register], dtype=np.uint32))
        register = int(moved[0]) ^ _register_lanes(lanes)
        start += size
    register = _register_small(view[start:], register)
    return register ^ 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    """LevelDB's and TensorFlow's stored form of a crc32c, undone."""
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF
