"""Vectors for hybrid search, stored L2-normalised as little-endian float32 blobs
(never pickled), so cosine similarity is a dot product."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


def pack_vector(values: list[float]) -> bytes | None:
    """The unit vector as float32 bytes, or None for a zero or non-finite vector."""
    vector = np.asarray(values, dtype=np.float64)
    norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0.0:
        return None
    return (vector / norm).astype("<f4").tobytes()


def unpack_vector(blob: bytes) -> Vector:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)
