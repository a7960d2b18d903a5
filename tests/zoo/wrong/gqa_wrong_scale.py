# zoo: gqa
"""Zoo: divides the scores by sqrt(d_model) instead of sqrt(d_head)."""

import math

import numpy as np
import torch
from torch import nn


def repeat_kv(x, n_rep):
    if x.ndim != 4 or n_rep < 1:
        raise ValueError("bad input")
    if isinstance(x, torch.Tensor):
        return x.repeat_interleave(n_rep, dim=1)
    return np.repeat(np.asarray(x), n_rep, axis=1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_head, n_kv_head, bias=False):
        super().__init__()
        if d_model % n_head or n_head % n_kv_head:
            raise ValueError("indivisible")
        self.n_head, self.n_kv_head, self.d_head = n_head, n_kv_head, d_model // n_head
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, n_kv_head * self.d_head, bias=bias)
        self.wv = nn.Linear(d_model, n_kv_head * self.d_head, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, t, c = x.shape
        q = self.wq(x).view(b, t, self.n_head, self.d_head).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_kv_head, self.d_head).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_kv_head, self.d_head).transpose(1, 2)
        rep = self.n_head // self.n_kv_head
        k, v = repeat_kv(k, rep), repeat_kv(v, rep)
        scores = q @ k.transpose(-2, -1) / math.sqrt(c)
        if mask is not None:
            scores = scores.masked_fill(torch.as_tensor(mask, device=x.device), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.wo((weights @ v).transpose(1, 2).reshape(b, t, c)), weights
