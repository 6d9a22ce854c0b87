"""The x-ray's packed answers: a JSON header and typed arrays in one body, and the small integer
codings the arrays use. ``static/js/xray/data.js`` reads them.

**The layout** (:func:`pack`): a little-endian uint32 N, N bytes of UTF-8 JSON (the header), then
the arrays, each at a multiple of 4 bytes, as the header's ``arrays`` lists them
(``{name: {dtype, shape, offset}}``, offset from the end of the header).
"""

from __future__ import annotations

import math

import numpy as np
import orjson


def pack(header: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """A JSON header and typed arrays in one body (the layout is in the module docstring)."""
    layout, parts, offset = {}, [], 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
        layout[name] = {"dtype": str(array.dtype), "shape": list(array.shape), "offset": offset}
        raw = data.tobytes()
        parts.append(raw + b"\0" * (-len(raw) % 4))
        offset += len(parts[-1])
    head = orjson.dumps({**header, "arrays": layout})
    head += b" " * (-len(head) % 4)
    return len(head).to_bytes(4, "little") + head + b"".join(parts)


def unpack(body: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """``pack``'s body → (header, arrays); what static/js/xray/data.js reads, for tests and bench."""
    length = int.from_bytes(body[:4], "little")
    header = orjson.loads(body[4 : 4 + length])
    arrays = {name: np.frombuffer(body, dtype=np.dtype(spec["dtype"]).newbyteorder("<"),
                                  count=math.prod(spec["shape"]),
                                  offset=4 + length + spec["offset"]).reshape(spec["shape"])
              for name, spec in header["arrays"].items()}
    return header, arrays


def planes(codes: np.ndarray) -> np.ndarray:
    """uint32 codes below 2²⁴ → (3, …) uint8: the low, middle and high bytes apart."""
    return np.stack([(codes >> shift) & 0xFF for shift in (0, 8, 16)]).astype(np.uint8)


def fixed(values, digits: int, dtype) -> np.ndarray:
    """Numbers the trace rounded to ``digits`` decimals → the integers value × 10^digits."""
    return np.rint(np.asarray(values, dtype=np.float64) * 10**digits).astype(dtype)


def int8_with_step(values: np.ndarray) -> tuple[np.ndarray, float]:
    """values ≈ code × step (int8 codes, float64 step: exact in JSON)."""
    top = float(np.abs(values).max())
    step = top / 127 if top > 0 else 1.0
    return np.clip(np.rint(values / step), -127, 127).astype(np.int8), step


def wrap(codes: np.ndarray) -> np.ndarray:
    """Integers → int8 modulo 256 (code − guess of two int8 codes in −127…127 comes back exactly
    as (guess + wrapped) mod 256)."""
    return (((codes.astype(np.int64) + 128) & 255) - 128).astype(np.int8)


def trits(corrections: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int8 corrections (3 in 4 are 0, nearly all others ±1) → five per byte in base 3 (each
    clamped to −1…1, +1), and the few beyond ±1: the gaps between their flat indices (uint32)
    and their values (int8)."""
    flat = corrections.ravel().astype(np.int64)
    digits = np.clip(flat, -1, 1) + 1
    digits = np.concatenate([digits, np.ones(-digits.size % 5, np.int64)]).reshape(-1, 5)
    packed = (digits @ np.array([1, 3, 9, 27, 81])).astype(np.uint8)
    beyond = np.flatnonzero(np.abs(flat) > 1)
    gaps = np.diff(beyond, prepend=0).astype(np.uint32)
    return packed, gaps, flat[beyond].astype(np.int8)


def untrits(packed: np.ndarray, gaps: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """``trits`` undone: the int8 corrections, flat."""
    digits = (packed.astype(np.int64)[:, None] // np.array([1, 3, 9, 27, 81])) % 3
    flat = (digits.ravel()[:count] - 1).astype(np.int8)
    flat[np.cumsum(gaps.astype(np.int64))] = values
    return flat
