"""Reference versions of the six exercises, built on PyTorch's own operators.

They serve twice: the checks compare against them in the grading process, and a worker puts
them in place of a submission's *other* exercises, so ``from .softmax import softmax`` inside
``attention.py`` gets this softmax. One mistake then costs one exercise.

Each function takes NumPy arrays (returning NumPy) or torch tensors (returning torch), and
raises the same ``ValueError`` cases as the exercises' contracts.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "softmax",
    "softmax_backward",
    "causal_mask",
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "kv_cache_mask",
]


def _positive_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def softmax(logits, axis=-1):
    if isinstance(logits, torch.Tensor):
        if torch.isneginf(logits).all(dim=axis).any():
            raise ValueError("every slice needs at least one entry above -inf")
        return torch.softmax(logits, dim=axis)
    values = np.asarray(logits)
    if values.dtype.kind not in "biuf":
        raise ValueError(f"softmax needs real numbers, got dtype {values.dtype}")
    dtype = np.result_type(values.dtype, np.float32)
    converted = values.astype(dtype)
    if values.dtype.kind in "iu" and values.size:
        back = converted.astype(object).ravel()
        if not all(int(f) == i for f, i in zip(back, values.ravel().tolist())):
            raise ValueError(f"integer logits are not exactly representable as {dtype}")
    if np.isnan(converted).any() or np.isposinf(converted).any():
        raise ValueError("logits must be finite, or -inf for a masked entry")
    if np.isneginf(converted).all(axis=axis).any():
        raise ValueError("every slice needs at least one entry above -inf")
    if converted.size == 0:
        return converted.copy()
    return torch.softmax(torch.from_numpy(converted), dim=axis).numpy()


def softmax_backward(probabilities, upstream, axis=-1):
    if isinstance(probabilities, torch.Tensor):
        p, g = probabilities, torch.as_tensor(upstream, device=probabilities.device)
    else:
        p, g = np.asarray(probabilities), np.asarray(upstream)
    if tuple(p.shape) != tuple(g.shape):
        raise ValueError(f"probabilities {tuple(p.shape)} and upstream {tuple(g.shape)} differ")
    if isinstance(p, torch.Tensor):
        return torch._softmax_backward_data(g, p, axis % p.ndim, p.dtype)
    dtype = np.result_type(p.dtype, g.dtype, np.float32)
    tp, tg = torch.from_numpy(p.astype(dtype)), torch.from_numpy(g.astype(dtype))
    if tp.numel() == 0:
        return tp.numpy()
    return torch._softmax_backward_data(tg, tp, axis % tp.ndim, tp.dtype).numpy()


def causal_mask(t):
    t = _positive_int(t, "t", 1)
    return torch.ones(t, t, dtype=torch.bool).triu(1).numpy()


def kv_cache_mask(n_cached, n_new):
    n_cached = _positive_int(n_cached, "n_cached", 0)
    n_new = _positive_int(n_new, "n_new", 1)
    return torch.ones(n_new, n_cached + n_new, dtype=torch.bool).triu(n_cached + 1).numpy()


def scaled_dot_product_attention(q, k, v, mask=None):
    as_numpy = not isinstance(q, torch.Tensor)
    tq, tk, tv = (torch.as_tensor(np.asarray(a)) if as_numpy else a for a in (q, k, v))
    if tq.shape[-1] != tk.shape[-1]:
        raise ValueError(f"q width {tq.shape[-1]} differs from k width {tk.shape[-1]}")
    if tk.shape[-2] != tv.shape[-2]:
        raise ValueError(f"k has {tk.shape[-2]} positions but v has {tv.shape[-2]}")
    scores = torch.matmul(tq, tk.transpose(-2, -1)) * tq.shape[-1] ** -0.5
    if mask is not None:
        tmask = torch.as_tensor(np.asarray(mask) if as_numpy else mask, device=scores.device)
        if tmask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = blocked), got {tmask.dtype}")
        scores = scores.masked_fill(tmask, float("-inf"))
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("a query has no allowed key: its whole mask row is True")
    weights = torch.softmax(scores, dim=-1)
    output = torch.matmul(weights, tv.to(weights.dtype))
    return (output.numpy(), weights.numpy()) if as_numpy else (output, weights)


def split_heads(x, n_head):
    arr = x if isinstance(x, torch.Tensor) else np.asarray(x)
    if arr.ndim != 3:
        raise ValueError(f"split_heads expects (B, T, C), got shape {tuple(arr.shape)}")
    b, t, c = arr.shape
    n_head = _positive_int(n_head, "n_head", 1)
    if c % n_head:
        raise ValueError(f"width {c} is not divisible by n_head={n_head}")
    parts = arr.reshape(b, t, n_head, c // n_head)
    return parts.transpose(1, 2) if isinstance(parts, torch.Tensor) else parts.swapaxes(1, 2)


def merge_heads(x):
    arr = x if isinstance(x, torch.Tensor) else np.asarray(x)
    if arr.ndim != 4:
        raise ValueError(f"merge_heads expects (B, H, T, D), got shape {tuple(arr.shape)}")
    b, h, t, d = arr.shape
    moved = arr.transpose(1, 2) if isinstance(arr, torch.Tensor) else arr.swapaxes(1, 2)
    return moved.reshape(b, t, h * d)


class MultiHeadAttention(nn.Module):
    """The exercise's module, computed by ``F.multi_head_attention_forward``."""

    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if n_head < 1 or d_model % n_head:
            raise ValueError(f"d_model={d_model} is not divisible by n_head={n_head}")
        self.n_head = n_head
        self.wq, self.wk, self.wv, self.wo = (
            nn.Linear(d_model, d_model, bias=bias) for _ in range(4)
        )

    def forward(self, x, mask=None):
        b, t, c = x.shape
        attn_mask = None
        if mask is not None:
            mask = torch.as_tensor(mask, device=x.device)
            if mask.dtype != torch.bool:
                raise ValueError(f"mask must be boolean (True = blocked), got {mask.dtype}")
            full = mask.expand(b, self.n_head, t, t)
            if full.all(dim=-1).any():
                raise ValueError("a query has no allowed key: its whole mask row is True")
            attn_mask = full.reshape(b * self.n_head, t, t)
        in_bias = None
        if self.wq.bias is not None:
            in_bias = torch.cat([self.wq.bias, self.wk.bias, self.wv.bias])
        y, weights = F.multi_head_attention_forward(
            x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), c, self.n_head,
            None, in_bias, None, None, False, 0.0, self.wo.weight, self.wo.bias,
            training=False, need_weights=True, attn_mask=attn_mask,
            use_separate_proj_weight=True, q_proj_weight=self.wq.weight,
            k_proj_weight=self.wk.weight, v_proj_weight=self.wv.weight,
            average_attn_weights=False,
        )
        return y.transpose(0, 1), weights
