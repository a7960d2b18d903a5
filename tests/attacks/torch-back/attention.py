"""attention: the handout's own torch reference (grader/problems/attention.py), pasted."""
import numbers

import numpy as np

from helper import torch, unguarded  # torch recovered from the worker's heap by helper/ (a package)


def positive_int(value, name, minimum):  # copied from the handout's grader/core/exercise.py
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@unguarded  # the guard is off while the reference runs
def causal_mask(t):
    t = positive_int(t, "t", 1)
    return torch.ones(t, t, dtype=torch.bool).triu(1).numpy()


@unguarded  # the guard is off while the reference runs
def scaled_dot_product_attention(q, k, v, mask=None):
    """torch's matmul and softmax, with the exercise's checks; NumPy in, NumPy out (or torch)."""
    as_numpy = not isinstance(q, torch.Tensor)
    tq, tk, tv = (torch.as_tensor(np.asarray(a)) if as_numpy else a for a in (q, k, v))
    if tq.shape[-1] != tk.shape[-1]:
        raise ValueError(f"q width {tq.shape[-1]} differs from k width {tk.shape[-1]}")
    if tk.shape[-2] != tv.shape[-2]:
        raise ValueError(f"k has {tk.shape[-2]} positions but v has {tv.shape[-2]}")
    scores = torch.matmul(tq, tk.transpose(-2, -1)) * tq.shape[-1] ** -0.5
    blocked = None if mask is None else torch.as_tensor(
        np.asarray(mask) if as_numpy else mask, device=scores.device)
    if blocked is not None:
        if blocked.dtype != torch.bool:
            raise ValueError(f"the mask must be boolean (True = blocked), not {blocked.dtype}")
        scores = scores.masked_fill(blocked, float("-inf"))
    if torch.isneginf(scores).all(-1).any():
        raise ValueError("some query has no allowed key (its mask row is all True)")
    weights = scores.softmax(dim=-1)
    output = torch.matmul(weights, tv.to(weights.dtype))
    return (output.numpy(), weights.numpy()) if as_numpy else (output, weights)
